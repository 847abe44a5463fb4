//! Every thread allocates, grows, frees: `Vec`, `String`, `Box`, `BTreeMap`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static CHECK: AtomicU64 = AtomicU64::new(0);

pub fn worker(index: usize, _count: usize) {
    let mut v: Vec<Box<[u64]>> = Vec::new();
    for i in 0..16 {
        v.push(vec![index as u64 ^ i; 1 + (i as usize * 7 + index) % 40].into_boxed_slice());
    }
    let mut s = String::new();
    for b in &v {
        s.push_str(&b.len().to_string());
    }
    let mut m = BTreeMap::new();
    for (i, b) in v.iter().enumerate() {
        m.insert(b.len() * 100 + i, b[0]);
    }
    v.truncate(3);
    v.shrink_to_fit();
    let total: u64 = m.values().sum::<u64>() + s.len() as u64 + v.len() as u64;
    CHECK.fetch_add(total, Relaxed);
}

pub fn finish(count: usize) {
    let mut expected = 0u64;
    for index in 0..count as u64 {
        let lens: Vec<u64> = (0..16u64).map(|i| 1 + (i * 7 + index) % 40).collect();
        let s: usize = lens.iter().map(|l| l.to_string().len()).sum();
        expected += (0..16u64).map(|i| index ^ i).sum::<u64>() + s as u64 + 3;
    }
    println!("check {} expected {expected}", CHECK.load(Relaxed));
}
