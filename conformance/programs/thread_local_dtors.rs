//! `thread_local!` values with destructors: each runs when its thread ends (on the
//! GPU: when the thread's kernel ends). Some destructors leave a file behind.

use std::cell::RefCell;
use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static CREATED: AtomicUsize = AtomicUsize::new(0);

struct Witness {
    index: usize,
    notes: Vec<String>,
}

impl Drop for Witness {
    fn drop(&mut self) {
        if self.index % 1024 == 0 {
            let text = format!("thread {} dropped with {:?}\n", self.index, self.notes);
            fs::write(format!("dropped-{:05}.txt", self.index), text).unwrap();
        }
    }
}

thread_local! {
    static WITNESS: RefCell<Option<Witness>> = const { RefCell::new(None) };
}

pub fn worker(index: usize, _count: usize) {
    WITNESS.with_borrow_mut(|w| {
        *w = Some(Witness { index, notes: vec![format!("n{}", index % 3)] });
    });
    WITNESS.with_borrow_mut(|w| w.as_mut().unwrap().notes.push("second".into()));
    CREATED.fetch_add(1, Relaxed);
}

pub fn finish(count: usize) {
    println!("{} of {count} created a witness", CREATED.load(Relaxed));
}
