//! A `Mutex` shared by every thread: sums, a `Vec` pushed to, `try_lock`.

use std::sync::Mutex;

static SUM: Mutex<u64> = Mutex::new(0);
static SEEN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub fn worker(index: usize, _count: usize) {
    for _ in 0..4 {
        *SUM.lock().unwrap() += index as u64;
    }
    SEEN.lock().unwrap().push(index as u32);
    let _ = SUM.try_lock().map(|g| *g);
}

pub fn finish(count: usize) {
    let n = count as u64;
    let sum = *SUM.lock().unwrap();
    println!("sum {sum} expected {}", 4 * n * (n - 1) / 2);
    let mut seen = SEEN.lock().unwrap();
    seen.sort_unstable();
    println!("every thread once: {}", seen.iter().enumerate().all(|(i, s)| *s == i as u32));
}
