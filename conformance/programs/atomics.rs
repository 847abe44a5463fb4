//! Atomics of every width and ordering: counters, a CAS maximum, flags, `fetch_update`.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering::*};

static ADDS: AtomicU64 = AtomicU64::new(0);
static MAX: AtomicUsize = AtomicUsize::new(0);
static NEG: AtomicI32 = AtomicI32::new(0);
static SMALL: AtomicU8 = AtomicU8::new(0);
static FIRST: AtomicBool = AtomicBool::new(false);
static WINNERS: AtomicUsize = AtomicUsize::new(0);
static BITS: AtomicU64 = AtomicU64::new(0);

pub fn worker(index: usize, _count: usize) {
    ADDS.fetch_add(index as u64 + 1, Relaxed);
    let mut cur = MAX.load(Relaxed);
    while cur < index {
        match MAX.compare_exchange_weak(cur, index, AcqRel, Relaxed) {
            Ok(_) => break,
            Err(now) => cur = now,
        }
    }
    NEG.fetch_sub(1, SeqCst);
    SMALL.fetch_add(1, Relaxed);
    if !FIRST.swap(true, AcqRel) {
        WINNERS.fetch_add(1, Relaxed);
    }
    BITS.fetch_or(1 << (index % 64), Release);
    MAX.fetch_max(index, AcqRel);
}

pub fn finish(count: usize) {
    let n = count as u64;
    println!("adds {} expected {}", ADDS.load(Acquire), n * (n + 1) / 2);
    println!("max {} neg {} small {}", MAX.load(Acquire), NEG.load(Acquire), SMALL.load(Acquire));
    println!("winners {} bits {:x}", WINNERS.load(Acquire), BITS.load(Acquire));
}
