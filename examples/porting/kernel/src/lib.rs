//! A std program made a GPU kernel.

#![feature(abi_ptx)]

use std::collections::BTreeMap;

use libc_hostcall::gpu;

/// `main`'s body, made the kernel: every GPU thread runs it.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn kmain(n: u32) {
    let words: Vec<String> = (0..n).map(|i| format!("w{i}")).collect();
    println!(
        "{}: {}",
        std::thread::current().name().unwrap(),
        words.join(",")
    );
    if gpu::global_thread() == 0 {
        let mode = std::env::var("MODE").unwrap_or_default();
        let counts: BTreeMap<usize, usize> = words.iter().map(|w| (w.len(), 1)).collect();
        std::fs::write("/data/summary.txt", format!("{mode} {counts:?}\n")).unwrap();
    }
}
