//! Every thread sleeps; none wakes early.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

static ON_TIME: AtomicUsize = AtomicUsize::new(0);

pub fn worker(index: usize, _count: usize) {
    let want = Duration::from_millis(5 + (index % 4) as u64 * 5);
    let t = Instant::now();
    std::thread::sleep(want);
    if t.elapsed() >= want {
        ON_TIME.fetch_add(1, Relaxed);
    }
}

pub fn finish(count: usize) {
    println!("{} of {count} slept at least as asked", ON_TIME.load(Relaxed));
}
