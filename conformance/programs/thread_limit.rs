//! More threads than can run at once: threads that wait are spawned until a spawn fails
//! (at most 1,000), which on the GPU is Linux's error at its thread limit (`EAGAIN`)
//! instead of a wait, and a spawn succeeds again once they end. On the CPU the limit is
//! far higher, so the GPU's output is checked against `expected/thread_limit.stdout`
//! (runs hold 16 threads back).

use std::sync::{Arc, RwLock};
use std::thread;

pub fn main() {
    let gate = Arc::new(RwLock::new(()));
    let closed = gate.write().unwrap();
    let mut busy = Vec::new();
    let refused = loop {
        if busy.len() == 1_000 {
            break None;
        }
        let gate = gate.clone();
        match thread::Builder::new().spawn(move || drop(gate.read().unwrap())) {
            Ok(h) => busy.push(h),
            Err(e) => break Some(e),
        }
    };
    println!("{} threads busy", busy.len());
    match refused {
        Some(e) => println!("one more: {:?} {e}", e.kind()),
        None => println!("one more: started"),
    }
    drop(closed);
    busy.into_iter().for_each(|h| h.join().unwrap());
    println!("after they ended: {:?}", thread::spawn(|| "started").join().unwrap());
}
