//! Thread costs, timed by an ordinary std program: run as it is on the CPU and on the GPU
//! (`cargo gpu build`), it prints one JSON object per measurement, and the device run
//! puts both sides in one file (`bench/device-runs/run.sh NAME program-rows`).
//!
//!     threads-bench [ELEMENTS]            (default 10^8 u64s for rayon's sum)
//!     threads-bench profile [ELEMENTS]    where rayon's sum spends its time (`profile`)
//!
//! - `spawn_join_one_us`: `thread::spawn` then `join`, one thread at a time, mean of 200.
//! - `spawn_join_many_us`: as many threads at once as the machine reports
//!   (`available_parallelism`, at most 1,000), all spawned then all joined, per round.
//! - `rayon_sum_ms`: `par_iter().map().sum()` over ELEMENTS `u64`s, and the sequential
//!   sum on the main thread for scale.
//! - `rayon_sort_ms`: `par_sort_unstable` of 10^7 pseudo-random `u64`s.
//! - `rayon_sha256_ms`: SHA-256 of 10^6 64-byte blocks, `par_iter().map()` (compute
//!   bound: no memory traffic to speak of).
//! - `scope_10000_ms`: `thread::scope` over 10,000 threads, each summing its chunk of a
//!   shared slice; `scope_spawned` says how many were spawned at once before
//!   `Builder::spawn_scoped` failed (the rest run on the scope's own thread), so the
//!   figure is honest on a machine that cannot hold 10,000 threads.

use std::time::Instant;

use rayon::prelude::*;
use sha2::{Digest, Sha256};

mod profile;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let profiling = args.first().is_some_and(|a| a == "profile");
    if profiling {
        args.remove(0);
    }
    let elements: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000_000);
    if profiling {
        profile::rayon_sum(elements, 2);
        return;
    }
    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());

    const ONE_AT_A_TIME: u32 = 200;
    let t = Instant::now();
    for i in 0..ONE_AT_A_TIME {
        let h = std::thread::spawn(move || i * 2);
        assert_eq!(h.join().unwrap(), i * 2);
    }
    let one = t.elapsed().as_secs_f64() * 1e6 / f64::from(ONE_AT_A_TIME);
    println!("{{\"spawn_join_one_us\": {one:.2}}}");

    let many = parallelism.min(1000);
    let rounds = 5;
    let t = Instant::now();
    for _ in 0..rounds {
        let hs: Vec<_> = (0..many)
            .map(|i| std::thread::spawn(move || i + 1))
            .collect();
        let sum: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, many * (many + 1) / 2);
    }
    let per_round = t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    println!("{{\"spawn_join_many_us\": {per_round:.1}, \"threads_at_once\": {many}}}");

    let v: Vec<u64> = (0..elements as u64).collect();
    let square = |x: &u64| x.wrapping_mul(*x) % 1_000_003;
    let _warm: u64 = v[..elements.min(1 << 16)].par_iter().map(square).sum();
    let t = Instant::now();
    let par: u64 = v.par_iter().map(square).sum();
    let par_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let seq: u64 = v.iter().map(square).sum();
    let seq_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(par, seq);
    println!(
        "{{\"rayon_sum_ms\": {par_ms:.2}, \"sequential_sum_ms\": {seq_ms:.2}, \"elements\": {elements}, \"rayon_threads\": {}, \"sum\": {par}}}",
        rayon::current_num_threads()
    );
    drop(v);

    const SORTED: u64 = 10_000_000;
    let mut keys: Vec<u64> = (0..SORTED).map(mix).collect();
    let t = Instant::now();
    keys.par_sort_unstable();
    let sort_ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    println!("{{\"rayon_sort_ms\": {sort_ms:.2}, \"sorted\": {SORTED}}}");
    drop(keys);

    const BLOCKS: u64 = 1_000_000;
    let t = Instant::now();
    let folded = (0..BLOCKS)
        .into_par_iter()
        .map(|i| {
            let mut block = [0u8; 64];
            for (k, word) in block.chunks_mut(8).enumerate() {
                word.copy_from_slice(&mix(i * 8 + k as u64).to_le_bytes());
            }
            let digest = Sha256::digest(block);
            u64::from_le_bytes(digest[..8].try_into().unwrap())
        })
        .reduce(|| 0, |a, b| a ^ b);
    let sha_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{{\"rayon_sha256_ms\": {sha_ms:.2}, \"blocks\": {BLOCKS}, \"digest_xor\": {folded}}}"
    );

    const SCOPED: usize = 10_000;
    let data: Vec<u64> = (0..SCOPED as u64 * 1000).collect();
    let t = Instant::now();
    let (total, spawned) = scope_sum(&data, SCOPED);
    let scope_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(total, data.iter().sum::<u64>());
    println!(
        "{{\"scope_10000_ms\": {scope_ms:.2}, \"scope_threads\": {SCOPED}, \"scope_spawned\": {spawned}}}"
    );
}

/// A fixed pseudo-random `u64` for `i` (splitmix64's finaliser): the same on both sides.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `data` summed by `threads` scoped threads, a chunk each; a chunk whose thread could
/// not be spawned is summed on the scope's own thread. Returns the sum and how many
/// threads were spawned.
fn scope_sum(data: &[u64], threads: usize) -> (u64, usize) {
    let chunk = data.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        let mut inline = 0;
        for part in data.chunks(chunk) {
            match std::thread::Builder::new().spawn_scoped(s, move || part.iter().sum::<u64>()) {
                Ok(h) => handles.push(h),
                Err(_) => inline += part.iter().sum::<u64>(),
            }
        }
        let spawned = handles.len();
        let total = inline + handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>();
        (total, spawned)
    })
}
