//! The demo kernel: ordinary std code (formatting, `println!`, files, collections, a
//! `Mutex`, `Instant`, `env::var`) run by every thread of a GPU launch.

#![feature(abi_ptx)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use libc_hostcall::gpu;

/// `mode` values the host passes to `kmain` (0: run normally).
const MODE_PANIC: u32 = 1;
const MODE_EXIT: u32 = 2;
const MODE_PING: u32 = 3;

/// Round trips each thread makes in `MODE_PING`.
const PINGS: u64 = 64;

/// Threads that have finished their work, shared by every GPU thread.
static COUNTER: Mutex<u64> = Mutex::new(0);
/// Sum of every thread's checksum, to show atomics across the grid.
static CHECKSUM: AtomicU64 = AtomicU64::new(0);

/// Every thread prints one line; thread 0 of block 0 also round-trips a file; the last
/// thread to finish prints the totals. `mode` selects a failure to demonstrate.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn kmain(mode: u32) {
    let started = Instant::now();
    let (block, thread) = (gpu::block(), gpu::thread());

    if mode == MODE_PANIC && block == 1 && thread == 3 {
        let empty: Vec<u32> = Vec::new();
        panic!("culinux: deliberate panic, {} items", empty[0]);
    }
    if mode == MODE_PING {
        ping_check();
        return;
    }
    if mode == MODE_EXIT && block == 0 && thread == 0 {
        println!("culinux: exiting with code 3");
        std::process::exit(3);
    }

    let values: Vec<u64> = (0..16).map(|i| (gpu::global_thread() + 1) * i).collect();
    let sum: u64 = values.iter().sum();
    let text = format!("block {block} thread {thread} sum {sum}");
    let mut words: HashMap<&str, usize> = HashMap::new();
    for w in text.split(' ') {
        *words.entry(w).or_default() += 1;
    }
    CHECKSUM.fetch_add(sum, Ordering::Relaxed);

    if block == 0 && thread == 0 {
        file_round_trip();
    }

    let done = {
        let mut c = COUNTER.lock().unwrap();
        *c += 1;
        *c
    };
    println!(
        "culinux: block {block} thread {thread} sum={sum} words={} took={:?}",
        words.len(),
        started.elapsed()
    );
    if done == gpu::launch_threads() {
        println!(
            "culinux: counter={done} checksum={}",
            CHECKSUM.load(Ordering::Relaxed)
        );
    }
}

/// Writes a file under `$CULINUX_DIR`, reads it back and reports whether it matched.
fn file_round_trip() {
    let dir = match std::env::var("CULINUX_DIR") {
        Ok(d) => d,
        Err(e) => {
            println!("culinux: file round-trip FAILED: CULINUX_DIR: {e}");
            return;
        }
    };
    let path = format!("{dir}/culinux.txt");
    let body = "written by a GPU thread through std::fs\n";
    let result = File::create(&path)
        .and_then(|mut f| write!(f, "{body}"))
        .and_then(|()| fs::read_to_string(&path));
    match result {
        Ok(back) if back == body => println!("culinux: file round-trip ok ({} bytes)", back.len()),
        Ok(back) => println!("culinux: file round-trip FAILED: read back {back:?}"),
        Err(e) => println!("culinux: file round-trip FAILED: {e}"),
    }
}

/// Each thread echoes `PINGS` tokens unique to (thread, iteration) through the host and
/// reports any reply that is not its own token, decoded, so a crossed or stale answer
/// says whose it was. Prints one line per thread: `ping: <global thread> <bad> <ns>`.
fn ping_check() {
    let me = gpu::global_thread();
    let started = gpu::now_ns();
    let mut bad = 0;
    for i in 0..PINGS {
        let token = (me << 20) | i;
        let got = gpu::ping(token);
        if got != token {
            bad += 1;
            println!(
                "ping: MISMATCH thread {me} iteration {i}: got thread {} iteration {}",
                got >> 20,
                got & 0xfffff
            );
        }
    }
    println!("ping: {me} {bad} {}", gpu::now_ns() - started);
}
