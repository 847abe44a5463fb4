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
const MODE_LATENCY: u32 = 4;
const MODE_PRINTLN: u32 = 5;
const MODE_BULK_WRITE: u32 = 6;
const MODE_MALLOC: u32 = 7;

/// Round trips timed by thread 0 in `MODE_LATENCY`.
const LATENCY_PINGS: u64 = 2000;
/// Lines each thread prints in `MODE_PRINTLN`.
const LINES_PER_THREAD: u64 = 16;
/// Bytes thread 0 writes in `MODE_BULK_WRITE`, in `BULK_CHUNK` pieces.
const BULK_BYTES: usize = 256 << 20;
const BULK_CHUNK: usize = 8 << 20;
/// Allocation/free pairs per thread in `MODE_MALLOC`.
const ALLOCS_PER_THREAD: u64 = 256;

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
        panic!("culinux: deliberate panic in block {block} thread {thread}");
    }
    match mode {
        MODE_PING => return ping_check(),
        MODE_LATENCY => return latency(),
        MODE_PRINTLN => return println_flood(),
        MODE_BULK_WRITE => return bulk_write(),
        MODE_MALLOC => return malloc_pairs(),
        _ => {}
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

/// Thread 0 times `LATENCY_PINGS` round trips alone: `latency: <pings> <ns>`.
fn latency() {
    if gpu::global_thread() != 0 {
        return;
    }
    gpu::ping(0);
    let started = gpu::now_ns();
    for i in 0..LATENCY_PINGS {
        gpu::ping(i);
    }
    println!("latency: {LATENCY_PINGS} {}", gpu::now_ns() - started);
}

/// Every thread prints `LINES_PER_THREAD` short lines.
fn println_flood() {
    let me = gpu::global_thread();
    for i in 0..LINES_PER_THREAD {
        println!("line {me} {i}");
    }
}

/// Thread 0 writes `BULK_BYTES` to `$CULINUX_DIR/bulk.bin` with `std::fs`:
/// `bulk: <bytes> <ns>`.
fn bulk_write() {
    if gpu::global_thread() != 0 {
        return;
    }
    let path = format!(
        "{}/bulk.bin",
        std::env::var("CULINUX_DIR").unwrap_or_else(|_| ".".into())
    );
    let chunk: Vec<u8> = (0..BULK_CHUNK).map(|i| i as u8).collect();
    let started = gpu::now_ns();
    let result = File::create(&path).and_then(|mut f| {
        for _ in 0..BULK_BYTES / BULK_CHUNK {
            f.write_all(&chunk)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => println!("bulk: {BULK_BYTES} {}", gpu::now_ns() - started),
        Err(e) => println!("bulk: FAILED {e}"),
    }
}

/// Every thread allocates and frees 64-byte boxes `ALLOCS_PER_THREAD` times.
fn malloc_pairs() {
    let mut sum = 0u64;
    for i in 0..ALLOCS_PER_THREAD {
        let b = std::hint::black_box(Box::new([i as u8; 64]));
        sum += b[63] as u64;
    }
    CHECKSUM.fetch_add(sum, Ordering::Relaxed);
}
