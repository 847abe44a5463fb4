//! A `Condvar` gate: every thread waits until all have arrived, then counts its exit.

use std::sync::{Condvar, Mutex};

static ARRIVED: Mutex<usize> = Mutex::new(0);
static ALL_HERE: Condvar = Condvar::new();
static LEFT: Mutex<usize> = Mutex::new(0);

pub fn worker(_index: usize, count: usize) {
    let mut arrived = ARRIVED.lock().unwrap();
    *arrived += 1;
    if *arrived == count {
        ALL_HERE.notify_all();
    }
    let arrived = ALL_HERE.wait_while(arrived, |a| *a < count).unwrap();
    let saw = *arrived;
    drop(arrived);
    assert_eq!(saw, count);
    *LEFT.lock().unwrap() += 1;
}

pub fn finish(count: usize) {
    println!("arrived {} left {} of {count}", *ARRIVED.lock().unwrap(), *LEFT.lock().unwrap());
    let (guard, timeout) = ALL_HERE.wait_timeout(LEFT.lock().unwrap(), std::time::Duration::from_millis(5)).unwrap();
    println!("timed out {} still {}", timeout.timed_out(), *guard);
}
