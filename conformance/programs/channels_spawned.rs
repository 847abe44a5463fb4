//! Channels and `sync` types between spawned threads: a pipeline of stages joined by
//! channels, a rendezvous channel, a bounded channel that fills, a `Mutex` and `Condvar`
//! queue, a `Barrier`, an `RwLock`, and `park`/`unpark`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex, RwLock};
use std::thread;

pub fn main() {
    // source -> square -> sum, each a thread.
    let (tx, rx) = mpsc::channel::<u64>();
    let (tx2, rx2) = mpsc::channel::<u64>();
    let source = thread::spawn(move || (1..=100).for_each(|i| tx.send(i).unwrap()));
    let square = thread::spawn(move || rx.iter().for_each(|i| tx2.send(i * i).unwrap()));
    let sum = thread::spawn(move || rx2.iter().sum::<u64>());
    source.join().unwrap();
    square.join().unwrap();
    println!("pipeline: {}", sum.join().unwrap());

    let (tx, rx) = mpsc::sync_channel::<&str>(0);
    let sender = thread::spawn(move || ["one", "two", "three"].map(|w| tx.send(w).unwrap()));
    println!("rendezvous: {:?}", rx.iter().collect::<Vec<_>>());
    sender.join().unwrap();

    let (tx, rx) = mpsc::sync_channel::<u32>(2);
    let producer = thread::spawn(move || {
        for i in 0..10 {
            tx.send(i).unwrap();
        }
    });
    let got: Vec<u32> = rx.iter().collect();
    producer.join().unwrap();
    println!("bounded: {got:?}");

    let queue = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
    let consumers: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || {
                let (m, cv) = &*queue;
                let mut taken = 0u32;
                loop {
                    let mut q = cv.wait_while(m.lock().unwrap(), |q| q.is_empty()).unwrap();
                    match q.pop() {
                        Some(0) => {
                            q.push(0);
                            cv.notify_all();
                            return taken;
                        }
                        Some(v) => taken += v,
                        None => {}
                    }
                }
            })
        })
        .collect();
    for v in (1..=30).chain([0]) {
        let (m, cv) = &*queue;
        m.lock().unwrap().insert(0, v);
        cv.notify_one();
    }
    let taken: u32 = consumers.into_iter().map(|h| h.join().unwrap()).sum();
    println!("condvar queue: {taken}");

    let barrier = Arc::new(Barrier::new(5));
    let table = Arc::new(RwLock::new(Vec::new()));
    let hs: Vec<_> = (0..5)
        .map(|i| {
            let (barrier, table) = (barrier.clone(), table.clone());
            thread::spawn(move || {
                table.write().unwrap().push(i);
                let leader = barrier.wait().is_leader();
                (table.read().unwrap().len(), leader)
            })
        })
        .collect();
    let seen: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    println!(
        "barrier: each saw {:?}, {} leader",
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        seen.iter().filter(|s| s.1).count()
    );

    let go = Arc::new(AtomicBool::new(false));
    let parked = {
        let go = go.clone();
        thread::spawn(move || {
            while !go.load(Ordering::Acquire) {
                thread::park();
            }
            "unparked"
        })
    };
    go.store(true, Ordering::Release);
    parked.thread().unpark();
    println!("park: {}", parked.join().unwrap());
}
