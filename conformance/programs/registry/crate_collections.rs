//! itertools, hashbrown and smallvec on every thread: each groups, sorts and counts
//! values made from its index; the totals and a fixed sample are printed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use itertools::Itertools;
use smallvec::SmallVec;

static CHECK: AtomicU64 = AtomicU64::new(0);
static SPILLED: AtomicU64 = AtomicU64::new(0);

fn values(seed: usize) -> Vec<u64> {
    (0..40).map(|i| ((seed * 7 + i * 13) % 23) as u64).collect()
}

pub fn worker(index: usize, _count: usize) {
    let v = values(index);
    let mut counts: hashbrown::HashMap<u64, SmallVec<[usize; 1]>> = hashbrown::HashMap::new();
    for (i, x) in v.iter().enumerate() {
        counts.entry(*x).or_default().push(i);
    }
    let spilled = counts.values().filter(|s| s.spilled()).count();
    SPILLED.fetch_add(spilled as u64, Relaxed);
    let check: u64 = counts
        .iter()
        .sorted()
        .map(|(k, s)| k * 31 + s.len() as u64)
        .chain(v.iter().tuple_windows().map(|(a, b)| a ^ b))
        .sum();
    CHECK.fetch_add(check, Relaxed);
}

pub fn finish(count: usize) {
    println!(
        "{count} threads: check {}, {} spilled vectors",
        CHECK.load(Relaxed),
        SPILLED.load(Relaxed)
    );
    let v = values(5);
    println!("{}", v.iter().sorted().dedup().join(","));
    let runs: Vec<(bool, usize)> = v[..16]
        .iter()
        .chunk_by(|x| **x > 11)
        .into_iter()
        .map(|(big, run)| (big, run.count()))
        .collect();
    println!("{runs:?}");
    println!("{:?}", (1..=4).permutations(2).take(5).collect_vec());
    let mut set: hashbrown::HashSet<&str> = ["b", "a", "c"].into_iter().collect();
    set.remove("b");
    println!("{:?}", set.iter().sorted().collect_vec());
    let mut small: SmallVec<[u8; 4]> = SmallVec::from_slice(b"abc");
    println!("inline {}", !small.spilled());
    small.extend_from_slice(b"defg");
    println!("spilled {} {:?}", small.spilled(), String::from_utf8_lossy(&small));
    println!("{:?}", (0..10).interleave(100..103).collect_vec());
}
