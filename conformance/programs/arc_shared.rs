//! `Arc` clones handed between threads; counts return to one.

use std::sync::{Arc, Mutex, OnceLock};

static SHARED: OnceLock<Arc<Vec<u64>>> = OnceLock::new();
static HELD: Mutex<Vec<Arc<Vec<u64>>>> = Mutex::new(Vec::new());

pub fn worker(index: usize, _count: usize) {
    let data = SHARED.get_or_init(|| Arc::new((0..1000).collect())).clone();
    let sum: u64 = data.iter().sum();
    assert_eq!(sum, 499_500);
    if index % 2 == 0 {
        HELD.lock().unwrap().push(data);
    }
}

pub fn finish(count: usize) {
    let arc = SHARED.get().unwrap();
    println!("held {} count {} (expected {})", HELD.lock().unwrap().len(), Arc::strong_count(arc), 1 + count.div_ceil(2));
    HELD.lock().unwrap().clear();
    println!("after clear {}", Arc::strong_count(arc));
}
