//! More threads than can run at once: with every thread the program may have busy, one
//! more spawn fails with Linux's error at its thread limit (`EAGAIN`) instead of waiting,
//! and succeeds again once one ends. On the CPU the limit is far higher, so the GPU's
//! output is checked against `expected/thread_limit.stdout` (runs hold 8 threads back).

use std::sync::{Arc, Barrier};
use std::thread;

pub fn main() {
    let n = thread::available_parallelism().map_or(1, |n| n.get());
    let release = Arc::new(Barrier::new(n + 1));
    let busy: Vec<_> = (0..n)
        .map(|_| {
            let release = release.clone();
            thread::spawn(move || {
                release.wait();
            })
        })
        .collect();
    println!("{} threads busy", busy.len());
    match thread::Builder::new().spawn(|| ()) {
        Ok(h) => {
            h.join().unwrap();
            println!("one more: started");
        }
        Err(e) => println!("one more: {:?} {e}", e.kind()),
    }
    release.wait();
    busy.into_iter().for_each(|h| h.join().unwrap());
    println!("after they ended: {:?}", thread::spawn(|| "started").join().unwrap());
}
