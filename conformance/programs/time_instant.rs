//! `Instant`, `Duration` arithmetic and formatting, `thread::sleep`.

use std::thread;
use std::time::{Duration, Instant};

pub fn main() {
    let start = Instant::now();
    thread::sleep(Duration::from_millis(30));
    let slept = start.elapsed();
    println!("slept at least 30ms: {}", slept >= Duration::from_millis(30));
    println!("slept under 5s: {}", slept < Duration::from_secs(5));
    let later = Instant::now();
    println!("monotonic {}", later >= start);
    println!("checked_duration_since {:?}", start.checked_duration_since(later).map(|d| d > Duration::ZERO));
    let d = Duration::from_micros(1_500_250);
    println!("{d:?} {} {} {:?}", d.as_millis(), d.as_secs_f64(), d.checked_sub(Duration::from_secs(2)));
    println!("{:?} {:?}", Duration::from_nanos(999), Duration::from_secs(3661) / 7);
    thread::sleep(Duration::ZERO);
    thread::yield_now();
    println!("zero sleep returns");
}
