//! `OnceLock`, `LazyLock` and `Once` raced by every thread: one initializer runs.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{LazyLock, Once, OnceLock};

static RUNS: AtomicUsize = AtomicUsize::new(0);
static CELL: OnceLock<String> = OnceLock::new();
static LAZY: LazyLock<usize> = LazyLock::new(|| {
    RUNS.fetch_add(1, SeqCst);
    42
});
static ONCE: Once = Once::new();
static AGREE: AtomicUsize = AtomicUsize::new(0);

pub fn worker(index: usize, _count: usize) {
    let v = CELL.get_or_init(|| {
        RUNS.fetch_add(1, SeqCst);
        format!("set by one of them ({})", index >= usize::MAX)
    });
    ONCE.call_once(|| {
        RUNS.fetch_add(1, SeqCst);
    });
    if *LAZY == 42 && v.starts_with("set by") {
        AGREE.fetch_add(1, SeqCst);
    }
}

pub fn finish(count: usize) {
    println!("initializers run {} (3 expected); {} of {count} agree", RUNS.load(SeqCst), AGREE.load(SeqCst));
    println!("{}", CELL.get().unwrap());
}
