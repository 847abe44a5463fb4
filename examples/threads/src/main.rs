//! std's threads and every `sync` type between spawned threads, each checked by what it
//! prints: nothing in it knows about GPUs.
//!
//!     cargo run              # on the CPU
//!     cargo gpu run          # on the GPU, unchanged

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex, OnceLock, RwLock};
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    // spawn, Builder (name), join with a value, distinct ids.
    let hs: Vec<_> = (0..6)
        .map(|i| {
            thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || (thread::current().name().unwrap().to_owned(), i * i))
                .unwrap()
        })
        .collect();
    let ids: Vec<_> = hs.iter().map(|h| h.thread().id()).collect();
    let got: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    println!("joined: {got:?}");
    let mut unique = ids.clone();
    unique.sort_by_key(|id| format!("{id:?}"));
    unique.dedup();
    println!("distinct thread ids: {}", unique.len() == ids.len());

    // A rendezvous channel: the message waits on the sender's stack.
    let (tx, rx) = mpsc::sync_channel::<String>(0);
    let sender = thread::spawn(move || {
        for i in 0..3 {
            tx.send(format!("hand-over {i}")).unwrap();
        }
    });
    let handed: Vec<String> = rx.iter().collect();
    sender.join().unwrap();
    println!("rendezvous: {handed:?}");

    // Many senders, one receiver.
    let (tx, rx) = mpsc::channel();
    for i in 0..4u64 {
        let tx = tx.clone();
        thread::spawn(move || tx.send(i * 10).unwrap());
    }
    drop(tx);
    let mut many: Vec<u64> = rx.iter().collect();
    many.sort();
    println!("channel: {many:?}");

    // Barrier, RwLock, Mutex, Condvar, OnceLock, atomics.
    let barrier = Arc::new(Barrier::new(4));
    let table = Arc::new(RwLock::new(Vec::new()));
    let leaders = Arc::new(AtomicUsize::new(0));
    let once = Arc::new(OnceLock::new());
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let (barrier, table, leaders, once) = (
                barrier.clone(),
                table.clone(),
                leaders.clone(),
                once.clone(),
            );
            thread::spawn(move || {
                table.write().unwrap().push(i);
                if barrier.wait().is_leader() {
                    leaders.fetch_add(1, Ordering::Relaxed);
                }
                once.get_or_init(|| "set once");
                table.read().unwrap().len()
            })
        })
        .collect();
    let lens: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    println!(
        "barrier: every thread saw {:?} entries, {} leader, once {:?}",
        lens,
        leaders.load(Ordering::Relaxed),
        once.get()
    );

    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let waiter = {
        let pair = pair.clone();
        thread::spawn(move || {
            let (m, cv) = &*pair;
            let g = cv.wait_while(m.lock().unwrap(), |n| *n < 3).unwrap();
            *g
        })
    };
    for _ in 0..3 {
        let (m, cv) = &*pair;
        *m.lock().unwrap() += 1;
        cv.notify_all();
    }
    println!("condvar: woke at {}", waiter.join().unwrap());

    // park and unpark, yield, sleep, is_finished.
    let flag = Arc::new(AtomicBool::new(false));
    let parked = {
        let flag = flag.clone();
        thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                thread::park();
            }
            "unparked"
        })
    };
    thread::yield_now();
    flag.store(true, Ordering::Release);
    parked.thread().unpark();
    println!("park: {}", parked.join().unwrap());

    let t = Instant::now();
    let sleeper = thread::spawn(|| thread::sleep(Duration::from_millis(20)));
    while !sleeper.is_finished() {
        thread::yield_now();
    }
    sleeper.join().unwrap();
    println!(
        "sleep: at least 20 ms: {}",
        t.elapsed() >= Duration::from_millis(20)
    );

    // Scoped threads borrowing and writing locals.
    let mut parts = [0u64; 4];
    let data: Vec<u64> = (1..=400).collect();
    thread::scope(|s| {
        for (k, part) in parts.iter_mut().enumerate() {
            let chunk = &data[k * 100..(k + 1) * 100];
            s.spawn(move || *part = chunk.iter().sum());
        }
    });
    println!("scope: {parts:?} = {}", parts.iter().sum::<u64>());
    // A panic in a spawned thread reaches `join` as an `Err` holding its payload, for a
    // named thread, a scoped one, and a `&str` payload; the program goes on.
    let step = parts.len() - 1;
    let doomed = thread::Builder::new()
        .name("doomed".into())
        .spawn(move || -> u32 { panic!("worker failed at step {step}") })
        .unwrap();
    let payload = doomed.join().unwrap_err();
    println!("panic joined: {:?}", payload.downcast_ref::<String>());
    let scoped = thread::scope(|s| {
        let h = s.spawn(|| {
            if data.len() > 1 {
                panic!("scoped thread saw {} items", data.len());
            }
            data.len()
        });
        while !h.is_finished() {
            thread::yield_now();
        }
        h.join().map_err(|p| p.downcast_ref::<String>().cloned())
    });
    println!("scoped panic joined: {scoped:?}");
    let plain = thread::spawn(|| panic!("a plain message")).join();
    println!(
        "str payload: {:?}",
        plain.unwrap_err().downcast_ref::<&str>()
    );
    let after = thread::spawn(|| 6 * 7).join().unwrap();
    println!("after the panics: {after}");
    println!(
        "available_parallelism >= 1: {}",
        thread::available_parallelism().is_ok_and(|n| n.get() >= 1)
    );
}
