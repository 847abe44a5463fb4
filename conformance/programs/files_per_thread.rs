//! Threads write files of their own and read a shared one.

use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static READ_OK: AtomicUsize = AtomicUsize::new(0);

pub fn worker(index: usize, _count: usize) {
    if index % 512 == 0 {
        fs::write(format!("out-{index:05}.txt"), format!("written by thread {index}\n")).unwrap();
    }
    // A few hundred readers at once: all of them at once would pass the host's limit of
    // open files, as they would on Linux.
    if index % 128 == 0 {
        let text = fs::read_to_string("input.txt").unwrap();
        if text.lines().count() == 3 {
            READ_OK.fetch_add(1, Relaxed);
        }
    }
}

pub fn finish(count: usize) {
    println!("read ok {} of {}", READ_OK.load(Relaxed), count.div_ceil(128));
    let mut names: Vec<String> = fs::read_dir(".").unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    println!("{} files: {:?}", names.len(), names.iter().take(5).collect::<Vec<_>>());
}
