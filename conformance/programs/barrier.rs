//! `std::sync::Barrier` across every thread, twice; one leader each time.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Barrier, OnceLock};

static BARRIER: OnceLock<Barrier> = OnceLock::new();
static LEADERS: AtomicUsize = AtomicUsize::new(0);
static BEFORE: AtomicUsize = AtomicUsize::new(0);
static SAW_ALL: AtomicUsize = AtomicUsize::new(0);

pub fn worker(_index: usize, count: usize) {
    let barrier = BARRIER.get_or_init(|| Barrier::new(count));
    BEFORE.fetch_add(1, SeqCst);
    if barrier.wait().is_leader() {
        LEADERS.fetch_add(1, SeqCst);
    }
    if BEFORE.load(SeqCst) == count {
        SAW_ALL.fetch_add(1, SeqCst);
    }
    if barrier.wait().is_leader() {
        LEADERS.fetch_add(1, SeqCst);
    }
}

pub fn finish(count: usize) {
    println!("leaders {} saw all {} of {count}", LEADERS.load(SeqCst), SAW_ALL.load(SeqCst));
}
