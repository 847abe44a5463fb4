//! `threads-bench profile`: where rayon's sum spends its time. Every leaf job of the
//! `par_iter` records its thread, start, end and length; the report says how many leaves
//! rayon made, how long they were, how busy its workers were, how fast a leaf went
//! through its elements, and how long the last tenth of the elements took.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use rayon::prelude::*;

/// Leaves recorded at most (32 bytes each); more are counted, not recorded.
const RECORDS: usize = 1 << 22;
/// The timeline's step, for the tail.
const STEP_NS: u64 = 1_000_000;

/// Each leaf's thread, start and end (ns since `t0`) and length.
struct Leaves {
    t0: Instant,
    next: AtomicUsize,
    records: Vec<[AtomicU64; 4]>,
}

impl Leaves {
    fn new() -> Self {
        Self {
            t0: Instant::now(),
            next: AtomicUsize::new(0),
            records: (0..RECORDS).map(|_| Default::default()).collect(),
        }
    }

    fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    fn record(&self, start: u64, len: u64) {
        let end = self.now();
        let thread = rayon::current_thread_index().map_or(u64::MAX, |t| t as u64);
        if let Some(r) = self.records.get(self.next.fetch_add(1, Relaxed)) {
            for (word, v) in r.iter().zip([thread, start, end, len]) {
                word.store(v, Relaxed);
            }
        }
    }

    /// One JSON object: the run of `wall_ns` that began at `begin_ns`.
    fn report(&self, begin_ns: u64, wall_ns: u64) -> String {
        let leaves = self.next.load(Relaxed);
        let recorded = &self.records[..leaves.min(RECORDS)];
        let threads = rayon::current_num_threads();
        let mut by_length = [0u64; 33];
        let steps = (wall_ns / STEP_NS + 2) as usize;
        let mut done = vec![0u64; steps];
        let (mut elements, mut busy) = (0u64, 0u64);
        for r in recorded {
            let [_, start, end, len] = [0, 1, 2, 3].map(|k| r[k].load(Relaxed));
            by_length[(64 - len.leading_zeros() as usize).min(32)] += 1;
            let step = (end.saturating_sub(begin_ns) / STEP_NS) as usize;
            done[step.min(steps - 1)] += len;
            elements += len;
            busy += end - start;
        }
        let mut sum = 0;
        let ninety = done
            .iter()
            .position(|&d| {
                sum += d;
                sum * 10 >= elements * 9
            })
            .unwrap_or(0) as u64;
        let last = by_length.iter().rposition(|&n| n > 0).unwrap_or(0);
        format!(
            "{{\"profile\": \"rayon_sum\", \"threads\": {threads}, \"wall_ms\": {:.2}, \"leaves\": {leaves}, \"elements_recorded\": {elements}, \"busy_fraction\": {:.3}, \"ns_per_element_in_leaves\": {:.1}, \"leaves_by_length_log2\": {:?}, \"last_tenth_ms\": {:.1}}}",
            wall_ns as f64 / 1e6,
            busy as f64 / (threads as f64 * wall_ns as f64),
            busy as f64 / elements.max(1) as f64,
            &by_length[..=last],
            (wall_ns as f64 - (ninety * STEP_NS) as f64) / 1e6,
        )
    }
}

/// Prints the profile of `rounds` runs of the bench's rayon sum over `elements`.
pub fn rayon_sum(elements: usize, rounds: u32) {
    let v: Vec<u64> = (0..elements as u64).collect();
    let square = |x: &u64| x.wrapping_mul(*x) % 1_000_003;
    let expected: u64 = v.par_iter().map(square).sum();
    for _ in 0..rounds {
        let leaves = Leaves::new();
        let begin = leaves.now();
        let t = Instant::now();
        let sum: u64 = v
            .par_iter()
            .fold(
                || (leaves.now(), 0u64, 0u64),
                |(start, n, acc), x| (start, n + 1, acc + square(x)),
            )
            .map(|(start, n, acc)| {
                leaves.record(start, n);
                acc
            })
            .sum();
        let wall = t.elapsed().as_nanos() as u64;
        assert_eq!(sum, expected);
        println!("{}", leaves.report(begin, wall));
    }
}
