//! An ordinary program using crates from the registry: rayon's parallel iterators,
//! sort and join, and serde_json with derive. Nothing in it knows about GPUs.
//!
//!     cargo run -- N                 # on the CPU
//!     cargo gpu run -- N             # on the GPU, unchanged

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Report {
    n: u64,
    sum_of_squares: u64,
    primes_below_n: usize,
    fib: u64,
    sorted_head: Vec<u32>,
    sorted: bool,
}

fn is_prime(k: u64) -> bool {
    k >= 2 && (2..).take_while(|d| d * d <= k).all(|d| k % d != 0)
}

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    if n < 16 {
        return fib(n - 1) + fib(n - 2);
    }
    let (a, b) = rayon::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let sum_of_squares = (0..n).into_par_iter().map(|k| k * k % 1_000_003).sum();
    let primes_below_n = (0..n).into_par_iter().filter(|&k| is_prime(k)).count();
    let mut v: Vec<u32> = (0..n as u32)
        .map(|k| k.wrapping_mul(2_654_435_761) % 1_000_000)
        .collect();
    v.par_sort_unstable();
    let report = Report {
        n,
        sum_of_squares,
        primes_below_n,
        fib: fib(24),
        sorted_head: v.iter().take(5).copied().collect(),
        sorted: v.windows(2).all(|w| w[0] <= w[1]),
    };
    let json = serde_json::to_string_pretty(&report).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
    println!("{json}");
}
