//! An `RwLock`: many readers at once, writers in between.

use std::collections::BTreeMap;
use std::sync::RwLock;

static TABLE: RwLock<BTreeMap<u32, u32>> = RwLock::new(BTreeMap::new());

pub fn worker(index: usize, _count: usize) {
    if index % 16 == 0 {
        TABLE.write().unwrap().insert(index as u32, 1);
    }
    let seen = TABLE.read().unwrap().len();
    assert!(seen <= TABLE.read().unwrap().len());
    if index % 16 == 0 {
        *TABLE.write().unwrap().get_mut(&(index as u32)).unwrap() += 1;
    }
}

pub fn finish(count: usize) {
    let t = TABLE.read().unwrap();
    println!("entries {} expected {}", t.len(), count.div_ceil(16));
    println!("all bumped: {}", t.values().all(|v| *v == 2));
}
