//! Threads a program spawns beside rayon's pool, which takes as many as
//! `available_parallelism` says: a `thread::scope` of four threads, each using the pool,
//! then a named thread, all while the pool's threads live.

use rayon::prelude::*;
use std::thread;

pub fn main() {
    let total: u64 = (0..100_000u64).into_par_iter().map(|x| x % 7).sum();
    println!("the pool's sum: {total}");

    let data: Vec<u64> = (1..=40_000).collect();
    let sums: Vec<u64> = thread::scope(|s| {
        let handles: Vec<_> = data
            .chunks(10_000)
            .map(|chunk| s.spawn(move || chunk.par_iter().sum::<u64>()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("four threads beside the pool: {sums:?}");

    let named = thread::Builder::new()
        .name("after-the-pool".into())
        .spawn(|| thread::current().name().map(str::to_owned))
        .expect("a thread beside the pool");
    println!("a named thread: {:?}", named.join().unwrap());
}
