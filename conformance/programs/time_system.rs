//! `SystemTime` against the host's clock: a file's mtime (stamped by the host's kernel)
//! lies between two readings of `SystemTime::now()` taken around its creation.

use std::fs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn main() {
    let before = SystemTime::now();
    fs::write("stamp", "now").unwrap();
    let after = SystemTime::now();
    let mtime = fs::metadata("stamp").unwrap().modified().unwrap();
    // Filesystems stamp with a coarse clock (a few ms): within 10ms either side.
    let slack = Duration::from_millis(10);
    println!("mtime between the readings: {}", mtime + slack >= before && mtime <= after + slack);
    let since = before.duration_since(UNIX_EPOCH).unwrap();
    println!("after 2026: {}", since > Duration::from_secs(1_767_225_600));
    println!("ordered: {}", after >= before);
    println!("epoch minus one: {:?}", UNIX_EPOCH.checked_sub(Duration::from_secs(1)).is_some());
    println!("elapsed ok: {}", before.elapsed().is_ok());
}
