//! `thread::scope`: threads that borrow and write their parent's locals, a scoped thread
//! that spawns into the same scope, and a value returned through a scoped handle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

pub fn main() {
    let data: Vec<u64> = (1..=1000).collect();
    let mut sums = [0u64; 8];
    thread::scope(|s| {
        for (k, sum) in sums.iter_mut().enumerate() {
            let chunk = &data[k * 125..(k + 1) * 125];
            s.spawn(move || *sum = chunk.iter().sum());
        }
    });
    println!("sums {sums:?}, total {}", sums.iter().sum::<u64>());

    let mut words = vec![String::from("a"), String::from("bb"), String::from("ccc")];
    thread::scope(|s| {
        for w in words.iter_mut() {
            s.spawn(move || w.push('!'));
        }
    });
    println!("words {words:?}");

    let hits = AtomicUsize::new(0);
    let longest = thread::scope(|s| {
        let h = s.spawn(|| {
            hits.fetch_add(1, Ordering::Relaxed);
            s.spawn(|| hits.fetch_add(10, Ordering::Relaxed));
            words.iter().map(String::len).max()
        });
        h.join().unwrap()
    });
    println!("longest {longest:?}, hits {}", hits.load(Ordering::Relaxed));
}
