//! Allocations far past what a GPU's heap has backed at the launch (64 MiB, where the
//! driver maps memory while a kernel runs): the threads take 512 MiB in all, in blocks
//! of at most 8 MiB that they keep until the end, writing a word on each 4 KiB page;
//! racing threads ask the host to back more of the heap at once. Each then reads its
//! words back.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const TOTAL: usize = 512 << 20;
const BLOCK_MAX: usize = 8 << 20;
const PAGE: usize = 4096;

static PAGES: AtomicU64 = AtomicU64::new(0);
static CHECK: AtomicU64 = AtomicU64::new(0);

/// The word thread `index` writes on page `page` of its block `block`.
fn word(index: usize, block: usize, page: usize) -> u64 {
    ((index as u64) << 40) | ((block as u64) << 20) | page as u64
}

pub fn worker(index: usize, count: usize) {
    let share = TOTAL / count;
    let block = share.min(BLOCK_MAX);
    let mut blocks: Vec<Vec<u64>> = Vec::new();
    for b in 0..share / block {
        let mut v: Vec<u64> = Vec::with_capacity(block / 8);
        let room = v.spare_capacity_mut();
        for p in 0..block / PAGE {
            room[p * PAGE / 8].write(word(index, b, p));
        }
        blocks.push(v);
    }
    let (mut pages, mut check) = (0u64, 0u64);
    for (b, v) in blocks.iter_mut().enumerate() {
        let room = v.spare_capacity_mut();
        for p in 0..block / PAGE {
            // SAFETY: written above, on this page's first word.
            let w = unsafe { room[p * PAGE / 8].assume_init() };
            assert_eq!(w, word(index, b, p), "thread {index} block {b} page {p}");
            pages += 1;
            check = check.wrapping_add(w);
        }
    }
    PAGES.fetch_add(pages, Relaxed);
    CHECK.fetch_add(check, Relaxed);
}

pub fn finish(count: usize) {
    let share = TOTAL / count;
    let block = share.min(BLOCK_MAX);
    let mut check = 0u64;
    for index in 0..count {
        for b in 0..share / block {
            for p in 0..block / PAGE {
                check = check.wrapping_add(word(index, b, p));
            }
        }
    }
    println!(
        "{} pages written and read back, check {} expected {check}",
        PAGES.load(Relaxed),
        CHECK.load(Relaxed)
    );
}
