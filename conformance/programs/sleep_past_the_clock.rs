//! A sleep longer than the clock can count (`Duration::MAX`) sleeps, as on Linux,
//! rather than wrapping around to a deadline in the past and returning at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

static WOKE: AtomicBool = AtomicBool::new(false);

pub fn main() {
    thread::spawn(|| {
        thread::sleep(Duration::MAX);
        WOKE.store(true, Ordering::SeqCst);
    });
    thread::sleep(Duration::from_millis(200));
    println!("the sleeper woke: {}", WOKE.load(Ordering::SeqCst));
}
