//! The smallest programs, for start-up and end: `hostcall_bench --programs` times the
//! whole process from outside, on the CPU and packaged by `cargo gpu build` on the GPU.
//!
//!     startup            prints `hi`, as `fn main() { println!("hi") }` does
//!     startup threads    eight spawned threads each sum 1,000 numbers; prints the total

fn main() {
    if std::env::args().nth(1).as_deref() == Some("threads") {
        let handles: Vec<_> = (0..8u64)
            .map(|t| std::thread::spawn(move || (t * 1000..(t + 1) * 1000).sum::<u64>()))
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        println!("{total}");
    } else {
        println!("hi");
    }
}
