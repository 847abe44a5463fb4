//! Unwinding: a panic inside `catch_unwind` comes back as `Err(payload)` after the
//! destructors of the frames it leaves ran, innermost first; `resume_unwind` carries a
//! payload on to an outer catch; a panic hook sees every panic; a thread's panic drops
//! what it held (a `Mutex` guard poisons its lock) before `join` sees it; a rayon job's
//! panic reaches the caller of `join`, and the pool works on.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::thread;

struct Noisy(&'static str);

impl Drop for Noisy {
    fn drop(&mut self) {
        println!("drop {} (panicking: {})", self.0, thread::panicking());
    }
}

fn descend(depth: u32) -> u32 {
    let _frame = Noisy(["outer", "middle", "inner"][depth as usize % 3]);
    if depth == 2 {
        let v: Vec<u32> = (0..3).collect();
        return v[std::hint::black_box(depth as usize + 5)];
    }
    descend(depth + 1) + 1
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "?".into(),
    }
}

pub fn main() {
    panic::set_hook(Box::new(|info| {
        println!("hook: {}", message(info.payload()));
    }));
    println!("ok: {:?}", panic::catch_unwind(|| 6 * 7));

    let caught = panic::catch_unwind(|| descend(0)).unwrap_err();
    println!("caught: {}", message(&*caught));

    let outer = panic::catch_unwind(|| {
        let _guard = Noisy("outer catch");
        let inner = panic::catch_unwind(|| panic!("first {}", 1)).unwrap_err();
        println!("inner caught: {}", message(&*inner));
        panic::resume_unwind(Box::new(format!("again after {}", message(&*inner))));
    });
    println!("outer caught: {}", message(&*outer.unwrap_err()));

    let lock = Arc::new(Mutex::new(0u32));
    let held = Arc::clone(&lock);
    let joined = thread::spawn(move || {
        let _local = Noisy("thread local value");
        let mut n = held.lock().unwrap();
        *n += 1;
        panic!("while holding the lock");
    })
    .join();
    println!("thread: {}", message(&*joined.unwrap_err()));
    match lock.lock() {
        Ok(n) => println!("lock not poisoned: {}", *n),
        Err(poisoned) => println!("lock poisoned, value {}", *poisoned.into_inner()),
    }

    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let job = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.install(|| rayon::join(|| 1, || -> u32 { panic!("rayon job") }))
    }));
    println!("rayon: {}", message(&*job.unwrap_err()));
    let sum: u64 = pool.install(|| {
        use rayon::prelude::*;
        (1..=1000u64).into_par_iter().sum()
    });
    println!("pool works on: {sum}");

    let _ = panic::take_hook();
    let quiet = panic::catch_unwind(|| panic!("default hook again"));
    println!("done: {}", quiet.is_err());
}
