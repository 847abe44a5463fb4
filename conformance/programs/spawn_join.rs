//! `thread::spawn` and `thread::Builder`: names, values returned through `join`, distinct
//! ids, `is_finished`, and threads that spawn threads.

use std::collections::HashSet;
use std::thread;

pub fn main() {
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    let me = thread::current();
                    (me.name().map(str::to_owned), me.id(), i * i)
                })
                .unwrap()
        })
        .collect();
    let mut ids = HashSet::new();
    for h in handles {
        let (name, id, square) = h.join().unwrap();
        ids.insert(id);
        println!("{name:?} returned {square}");
    }
    println!("{} distinct ids, main's among them: {}", ids.len(), ids.contains(&thread::current().id()));
    println!("main is named {:?}", thread::current().name());

    let unnamed = thread::spawn(|| thread::current().name().map(str::to_owned));
    println!("an unnamed thread's name: {:?}", unnamed.join().unwrap());

    let quick = thread::spawn(|| 1);
    while !quick.is_finished() {
        thread::yield_now();
    }
    println!("finished, then joined: {}", quick.join().unwrap());

    // A thread that spawns and joins its own threads.
    let nested = thread::spawn(|| {
        let inner: Vec<_> = (1..=3u32).map(|k| thread::spawn(move || k * 100)).collect();
        inner.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
    });
    println!("nested threads summed {}", nested.join().unwrap());

    // More threads over time than run at once: each worker takes the next one.
    let total: u64 = (0..40u64)
        .map(|i| thread::spawn(move || i).join().unwrap())
        .sum();
    println!("40 threads one after another returned {total}");
}
