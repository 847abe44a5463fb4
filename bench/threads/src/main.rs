//! Thread costs, timed by an ordinary std program: run as it is on the CPU and on the GPU
//! (`cargo gpu build`), it prints one JSON object per measurement, and the device run
//! puts both sides in one file (`bench/device-runs/run.sh NAME program-rows`).
//!
//!     threads-bench [ELEMENTS]    (default 10^8 u64s for rayon's sum)
//!
//! - `spawn_join_one_us`: `thread::spawn` then `join`, one thread at a time, mean of 200.
//! - `spawn_join_many_us`: as many threads at once as the machine reports
//!   (`available_parallelism`, at most 1,000), all spawned then all joined, per round.
//! - `rayon_sum_ms`: `par_iter().map().sum()` over ELEMENTS `u64`s, and the sequential
//!   sum on the main thread for scale.

use std::time::Instant;

use rayon::prelude::*;

fn main() {
    let elements: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000_000);
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
}
