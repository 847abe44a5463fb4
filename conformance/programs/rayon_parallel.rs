//! rayon on threads the program spawns: a parallel map and sum, a parallel sort, `join`
//! recursing, `par_chunks`, a `scope` and a `max`.

use rayon::prelude::*;

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = rayon::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

pub fn main() {
    let sum: u64 = (0..1_000_000u64).into_par_iter().map(|x| x * x % 1_000).sum();
    println!("sum of squares mod 1000: {sum}");

    let mut v: Vec<u64> = (0..100_000u64)
        .map(|i| i.wrapping_mul(6_364_136_223_846_793_005) >> 40)
        .collect();
    v.par_sort_unstable();
    println!(
        "sorted: {}, first {:?}, last {:?}",
        v.windows(2).all(|w| w[0] <= w[1]),
        &v[..3],
        &v[v.len() - 3..]
    );

    println!("fib(20) by join: {}", fib(20));

    let chunks: Vec<u64> = v.par_chunks(10_000).map(|c| c.iter().sum()).collect();
    println!("chunk sums: {} chunks, total {}", chunks.len(), chunks.iter().sum::<u64>());

    let words = ["alpha", "beta", "gamma", "delta"];
    let mut lengths = vec![0; words.len()];
    rayon::scope(|s| {
        for (w, l) in words.iter().zip(lengths.iter_mut()) {
            s.spawn(move |_| *l = w.len());
        }
    });
    println!("scope: {lengths:?}");

    let max = (1..=500u32).into_par_iter().map(|x| x % 97).max();
    println!("max {max:?}, on at least one thread: {}", rayon::current_num_threads() >= 1);
}
