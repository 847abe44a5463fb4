//! The demo kernel: ordinary std code (formatting, `println!`, files, collections, a
//! `Mutex`, `Instant`, `env::var`) run by every thread of a GPU launch.

#![feature(abi_ptx)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use hostcall_abi::errno::EPIPE;
use hostcall_abi::typed::Errno;
use hostcall_client::stream::{Stream, Submitted};
use hostcall_client::typed::{CallHostFn, HostFn};
use libc_hostcall::gpu;

/// `mode` values the host passes to `kmain` (0: run normally).
const MODE_PANIC: u32 = 1;
const MODE_EXIT: u32 = 2;
const MODE_PING: u32 = 3;
const MODE_LATENCY: u32 = 4;
const MODE_PRINTLN: u32 = 5;
const MODE_BULK_WRITE: u32 = 6;
const MODE_MALLOC: u32 = 7;
const MODE_NULL: u32 = 8;
const MODE_MIXED: u32 = 9;
const MODE_SLEEP: u32 = 10;
const MODE_SPIN: u32 = 11;
const MODE_CALL_LOOP: u32 = 12;
const MODE_BIG_WRITE: u32 = 13;
/// `ktyped`'s modes: every thread's verified typed calls, or thread 0's latency.
const MODE_TYPED_NULL: u32 = 14;
const MODE_TYPED_LATENCY: u32 = 15;
const MODE_ALLOC_FAIL: u32 = 16;
const MODE_STACK_OVERFLOW: u32 = 17;
/// Evaluations per thread of `kmath`.
const MATH_EVALS: u64 = 65536;

/// Round trips timed by thread 0 in `MODE_LATENCY`.
const LATENCY_PINGS: u64 = 2000;
/// Lines each thread prints in `MODE_PRINTLN`.
const LINES_PER_THREAD: u64 = 16;
/// Bytes thread 0 writes in `MODE_BULK_WRITE`, in `BULK_CHUNK` pieces.
const BULK_BYTES: usize = 1 << 30;
const BULK_CHUNK: usize = 8 << 20;
/// Allocation/free pairs per thread in `MODE_MALLOC`.
const ALLOCS_PER_THREAD: u64 = 256;

/// Round trips each thread makes in `MODE_PING`.
const PINGS: u64 = 64;
/// Verified null round trips each thread makes in `MODE_NULL`.
const NULL_PINGS: u64 = 64;
/// Calls lane `l` makes in `MODE_MIXED`: `MIXED_CALLS - l % 3`.
const MIXED_CALLS: u64 = 24;
/// How long thread 0 sleeps in `MODE_SLEEP` before timing round trips again.
const SLEEP_S: u64 = 5;

/// Bits of a round-trip token that hold the iteration; the thread's global index is above.
const TOKEN_SHIFT: u32 = 20;

/// A value unique to (thread `me`, iteration `i`), so a crossed or stale reply says whose
/// it was.
fn token(me: u64, i: u64) -> u64 {
    (me << TOKEN_SHIFT) | i
}

/// Launch-wide measurement of the throughput modes: the earliest start, the latest end,
/// the bad replies and the threads done. The last thread reports and resets them (module
/// globals outlive a launch).
static FIRST_START: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_END: AtomicU64 = AtomicU64::new(0);
static BAD: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicU64 = AtomicU64::new(0);

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
        MODE_NULL => return null_calls(),
        MODE_MIXED => return mixed(),
        MODE_SLEEP => return sleep_then_latency(),
        MODE_SPIN => spin_forever(),
        MODE_CALL_LOOP => call_forever(),
        MODE_BIG_WRITE => return big_write(),
        MODE_ALLOC_FAIL => alloc_fail(),
        MODE_STACK_OVERFLOW if block == 0 && thread == 0 => {
            println!("culinux: {}", deep(256));
            return;
        }
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
        let token = token(me, i);
        let got = gpu::ping(token);
        if got != token {
            bad += 1;
            println!(
                "ping: MISMATCH thread {me} iteration {i}: got thread {} iteration {}",
                got >> TOKEN_SHIFT,
                got & ((1 << TOKEN_SHIFT) - 1)
            );
        }
    }
    println!("ping: {me} {bad} {}", gpu::now_ns() - started);
}

/// Thread 0 times `LATENCY_PINGS` round trips alone, each stage apart:
/// `latency: <pings> <ns> <ns per stage...>` (stages of `hostcall_client::stages`).
fn latency() {
    if gpu::global_thread() != 0 {
        return;
    }
    gpu::ping(0);
    let mut stages = [0u64; 6];
    let started = gpu::now_ns();
    for i in 0..LATENCY_PINGS {
        let (_, spans) = gpu::ping_timed(i);
        for (sum, s) in stages.iter_mut().zip(spans) {
            *sum += s;
        }
    }
    let total = gpu::now_ns() - started;
    let stages: Vec<String> = stages.iter().map(u64::to_string).collect();
    println!("latency: {LATENCY_PINGS} {total} {}", stages.join(" "));
}

/// Thread 0 sleeps `SLEEP_S` seconds (the host idles), then times round trips as in
/// `latency`.
fn sleep_then_latency() {
    if gpu::global_thread() != 0 {
        return;
    }
    std::thread::sleep(std::time::Duration::from_secs(SLEEP_S));
    latency();
}

/// Adds this thread to the launch-wide measurement; the last thread to finish prints
/// `<label>: <bad replies> <ns from the first start to the last end>`.
fn finish(label: &str, started: u64, bad: u64) {
    BAD.fetch_add(bad, Ordering::Relaxed);
    FIRST_START.fetch_min(started, Ordering::Relaxed);
    LAST_END.fetch_max(gpu::now_ns(), Ordering::Relaxed);
    if FINISHED.fetch_add(1, Ordering::AcqRel) + 1 == gpu::launch_threads() {
        let ns =
            LAST_END.swap(0, Ordering::Relaxed) - FIRST_START.swap(u64::MAX, Ordering::Relaxed);
        println!("{label}: {} {ns}", BAD.swap(0, Ordering::Relaxed));
        FINISHED.store(0, Ordering::Release);
    }
}

/// Typed calls of the host closure `echo` (`|x: u64| x`, a `HostFn`), measured as the
/// null calls are: in `MODE_TYPED_NULL` every thread makes `NULL_PINGS` of them with
/// tokens unique to (thread, iteration) and counts replies not its own
/// (`typed: <bad> <ns>`); in `MODE_TYPED_LATENCY` thread 0 times `LATENCY_PINGS` alone
/// (`typed_latency: <calls> <ns>`).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn ktyped(mode: u32, echo: u64) {
    let echo = HostFn::<(u64,), u64>::from_raw(echo);
    let me = gpu::global_thread();
    if mode == MODE_TYPED_LATENCY {
        if me == 0 {
            echo.call((0,));
            let started = gpu::now_ns();
            for i in 0..LATENCY_PINGS {
                echo.call((i,));
            }
            let total = gpu::now_ns() - started;
            println!("typed_latency: {LATENCY_PINGS} {total}");
        }
        return;
    }
    if mode != MODE_TYPED_NULL {
        return;
    }
    let started = gpu::now_ns();
    let mut bad = 0;
    for i in 0..NULL_PINGS {
        let token = token(me, i);
        if echo.call((token,)) != token {
            bad += 1;
        }
    }
    finish("typed", started, bad);
}

/// AMDGPU.jl's `HostCallHolder` example: every thread calls the host closure `add42`
/// (`|x: f32| x + 42.0`) with its own value and checks the answer; `add42_report` then
/// prints `add42: <calls> calls, <wrong> wrong`.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn add42(add42: u64) {
    let add42 = HostFn::<(f32,), f32>::from_raw(add42);
    let x = gpu::global_thread() as f32 * 0.5;
    let y = add42.call((x,));
    FINISHED.fetch_add(1, Ordering::Relaxed);
    if y != x + 42.0 {
        BAD.fetch_add(1, Ordering::Relaxed);
        println!("add42: thread {}: {x} + 42 gave {y}", gpu::global_thread());
    }
}

/// Calls the continuous closure answered in `lifetimes`, and the threads it then
/// refused with `EPIPE`, over the launch.
static ANSWERED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// AMDGPU.jl's hostcall lifetimes. Thread 0 calls the one-shot closure `once` twice
/// (`lifetimes: the one-shot closure answered Ok(7), then Err(EPIPE)`); then every thread
/// calls the continuous closure `tick` until the host finishes it, checking each answer.
/// The last thread reports: `lifetimes: <n> calls answered, then <t> threads refused with
/// EPIPE, <bad> wrong`.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn lifetimes(once: u64, tick: u64) {
    type Echo = HostFn<(u64,), Result<u64, Errno>>;
    let (once, tick) = (Echo::from_raw(once), Echo::from_raw(tick));
    let me = gpu::global_thread();
    if me == 0 {
        let (first, second) = (once.call((7,)), once.call((8,)));
        println!("lifetimes: the one-shot closure answered {first:?}, then {second:?}");
    }
    let (mut answered, mut bad) = (0, 0);
    let refused = loop {
        match tick.call((me,)) {
            Ok(v) => {
                answered += 1;
                bad += u64::from(v != me);
            }
            Err(e) => break e,
        }
    };
    ANSWERED.fetch_add(answered, Ordering::Relaxed);
    REFUSED.fetch_add(u64::from(refused == Errno(EPIPE)), Ordering::Relaxed);
    BAD.fetch_add(bad, Ordering::Relaxed);
    if FINISHED.fetch_add(1, Ordering::AcqRel) + 1 == gpu::launch_threads() {
        println!(
            "lifetimes: {} calls answered, then {} threads refused with EPIPE, {} wrong",
            ANSWERED.swap(0, Ordering::Relaxed),
            REFUSED.swap(0, Ordering::Relaxed),
            BAD.swap(0, Ordering::Relaxed)
        );
        FINISHED.store(0, Ordering::Release);
    }
}

/// Thread 0 calls `add` (`|x: u64| x + 1`, which cannot fail) three times; served for
/// two calls, the third ends the launch with `EPIPE`, and the line after it never prints.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn lifetimes_strict(add: u64) {
    let add = HostFn::<(u64,), u64>::from_raw(add);
    if gpu::global_thread() == 0 {
        let mut x = 0;
        for _ in 0..3 {
            x = add.call((x,));
        }
        println!("lifetimes_strict: {x} (not reached)");
    }
}

/// Side of `stencil`'s square grid, and the grid and its result (device globals).
const GRID: usize = 128;
static CELLS: [AtomicU32; GRID * GRID] = [const { AtomicU32::new(0) }; GRID * GRID];
static NEXT: [AtomicU32; GRID * GRID] = [const { AtomicU32::new(0) }; GRID * GRID];
/// `stencil`'s stream tags: a cell read, a cell written.
const TAG_LOAD: u32 = 1;
const TAG_STORE: u32 = 2;

/// dh_comms's heat-map example: one step of a 5-point stencil over a `GRID` x `GRID`
/// grid, one GPU thread per cell, instrumented to stream the byte offset (from the
/// grid's start) of every cell it reads (`TAG_LOAD`) or writes (`TAG_STORE`) to
/// `stream`. A cell inside is read by five threads, one on an edge by four, a corner
/// by three. The last thread prints `stencil: <cells> cells, <sum> sum`.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn stencil(stream: u64) {
    // SAFETY: the host passed this launch's stream descriptor.
    let stream = unsafe { Stream::from_raw(stream) };
    let me = gpu::global_thread() as usize;
    if me < GRID * GRID {
        let (y, x) = (me / GRID, me % GRID);
        let base = CELLS.as_ptr() as u64;
        let read = |i: usize| {
            stream.send(TAG_LOAD, &(&CELLS[i] as *const AtomicU32 as u64 - base));
            f32::from_bits(CELLS[i].load(Ordering::Relaxed))
        };
        let mut sum = read(me) + me as f32;
        if y > 0 {
            sum += read(me - GRID);
        }
        if y + 1 < GRID {
            sum += read(me + GRID);
        }
        if x > 0 {
            sum += read(me - 1);
        }
        if x + 1 < GRID {
            sum += read(me + 1);
        }
        NEXT[me].store((sum / 5.0).to_bits(), Ordering::Relaxed);
        stream.send(
            TAG_STORE,
            &(&NEXT[me] as *const AtomicU32 as u64 - NEXT.as_ptr() as u64),
        );
        CHECKSUM.fetch_add(sum as u64, Ordering::Relaxed);
    }
    if FINISHED.fetch_add(1, Ordering::AcqRel) + 1 == gpu::launch_threads() {
        println!(
            "stencil: {} cells, {} sum",
            GRID * GRID,
            CHECKSUM.swap(0, Ordering::Relaxed)
        );
        FINISHED.store(0, Ordering::Release);
    }
}

/// Stream throughput: every thread submits `count` messages of `words` words (1, 2 or
/// 8; tag `words`), each holding the thread's index and the message's number, and
/// counts those dropped. The last thread prints
/// `stream: <dropped> <ns from the first start to the last end>`.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn kstream(stream: u64, words: u32, count: u32) {
    // SAFETY: the host passed this launch's stream descriptor.
    let stream = unsafe { Stream::from_raw(stream) };
    let me = gpu::global_thread();
    let started = gpu::now_ns();
    let mut dropped = 0;
    for i in 0..u64::from(count) {
        let sent = match words {
            1 => stream.send(1, &(me << 32 | i)),
            2 => stream.send(2, &[me, i]),
            _ => stream.send(8, &[me, i, 0, 0, 0, 0, 0, 0]),
        };
        dropped += u64::from(sent == Submitted::Dropped);
    }
    finish("stream", started, dropped);
}

/// Reports and resets what `add42` counted (module globals outlive a launch).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn add42_report() {
    let calls = FINISHED.swap(0, Ordering::Relaxed);
    let wrong = BAD.swap(0, Ordering::Relaxed);
    println!("add42: {calls} calls, {wrong} wrong");
}

/// Every thread makes `NULL_PINGS` round trips of tokens unique to (thread, iteration)
/// and counts the replies that are not its own: `null: <bad> <ns>`.
fn null_calls() {
    let me = gpu::global_thread();
    let started = gpu::now_ns();
    let mut bad = 0;
    for i in 0..NULL_PINGS {
        let token = token(me, i);
        if gpu::ping(token) != token {
            bad += 1;
        }
    }
    finish("null", started, bad);
}

/// Lanes of each warp mix posted stdout lines (`mixed <thread> <i>`) and token-checked
/// round trips at one call site, the choice varying by lane and iteration; lanes leave
/// after different numbers of calls. `mixed: <bad> <ns>` at the end.
fn mixed() {
    let me = gpu::global_thread();
    let lane = (gpu::thread() % 32) as u64;
    let started = gpu::now_ns();
    let mut bad = 0;
    for i in 0..MIXED_CALLS - lane % 3 {
        let posted = (lane * 7 + i).is_multiple_of(3);
        let line = format!("mixed {me} {i}\n");
        let token = token(me, i);
        let got = gpu::ping_or_post(token, posted.then_some(line.as_bytes()));
        if !posted && got != token {
            bad += 1;
        }
    }
    finish("mixed", started, bad);
}

/// Recurses `n` deep with a 1 KiB frame that the optimizer cannot drop: 256 KiB of
/// stack, past the default.
fn deep(n: u32) -> u64 {
    let mut frame = [0u8; 1024];
    frame[n as usize % 1024] = n as u8;
    let frame = std::hint::black_box(frame);
    if n == 0 {
        return frame.iter().map(|&b| u64::from(b)).sum();
    }
    deep(n - 1) + u64::from(frame[n as usize % 1024])
}

/// Every thread's allocation fails at once, each of its own size: std's runtime
/// writes `memory allocation of <size> bytes failed` to stderr, a piece at a time, and
/// aborts.
fn alloc_fail() -> ! {
    let size = 1000 + 8 * gpu::global_thread() as usize;
    let layout = std::alloc::Layout::from_size_align(size, 8).expect("a valid layout");
    std::alloc::handle_alloc_error(layout)
}

/// Bytes thread 0 writes to stdout in one `write_all` in `MODE_BIG_WRITE`: more than
/// 65,536 pieces, the ticket window before posted writes waited for room.
const BIG_WRITE_BYTES: usize = 300 << 20;
/// Lines every other thread prints meanwhile.
const BIG_LINES: u64 = 8;

/// Thread 0 writes `BIG_WRITE_BYTES` of `x` and a newline to fd 1 with one
/// `write_all` while every other thread prints `BIG_LINES` lines (`big <thread> <i>`);
/// then `big: <failed> <ns>`.
fn big_write() {
    let me = gpu::global_thread();
    if me != 0 {
        for i in 0..BIG_LINES {
            println!("big {me} {i}");
        }
        return;
    }
    let data = vec![b'x'; BIG_WRITE_BYTES];
    // Through fd 1 as a `File`: std's `Stdout` is line-buffered and would first scan
    // all 300 MiB for a newline on this one GPU thread (about 3 s on an H100), which
    // times std, not the transport.
    // SAFETY: fd 1 is open for the whole program, and `ManuallyDrop` never closes it.
    let mut out = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
    let started = gpu::now_ns();
    let written = out.write_all(&data).and_then(|()| out.write_all(b"\n"));
    let ns = gpu::now_ns() - started;
    println!("big: {} {ns}", u64::from(written.is_err()));
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
/// Every thread evaluates float function `f` (`sin`, `exp`, `ln`, `powf(_, 1.7)` of
/// `f64`, then of `f32`) [`MATH_EVALS`] times at `0.5 + k * 1e-7`, as `bench/limits.cu`
/// times CUDA's (`hostcall_bench`'s part `math`). No hostcall.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn kmath(f: u32) {
    let t = gpu::global_thread();
    let mut acc = 0.0f64;
    for i in 0..MATH_EVALS {
        let x = 0.5 + (t * MATH_EVALS + i) as f64 * 1e-7;
        let y = x as f32;
        acc += match f {
            0 => x.sin(),
            1 => x.exp(),
            2 => x.ln(),
            3 => x.powf(1.7),
            4 => f64::from(y.sin()),
            5 => f64::from(y.exp()),
            6 => f64::from(y.ln()),
            _ => f64::from(y.powf(1.7)),
        };
    }
    if acc == 12345.0 {
        CHECKSUM.fetch_add(1, Ordering::Relaxed);
    }
}

fn malloc_pairs() {
    let mut sum = 0u64;
    for i in 0..ALLOCS_PER_THREAD {
        let b = std::hint::black_box(Box::new([i as u8; 64]));
        sum += b[63] as u64;
    }
    CHECKSUM.fetch_add(sum, Ordering::Relaxed);
}

/// Never returns and never calls the host: only the host's timeout, and the end of the
/// host process, stop it.
fn spin_forever() -> ! {
    loop {
        if BAD.load(Ordering::Relaxed) == u64::MAX {
            BAD.store(0, Ordering::Relaxed);
        }
        core::hint::spin_loop();
    }
}

/// Never returns; calls the host over and over, checking every reply.
fn call_forever() -> ! {
    let me = gpu::global_thread();
    let mut i = 0u64;
    loop {
        let t = token(me, i % (1 << TOKEN_SHIFT));
        if gpu::ping(t) != t {
            BAD.fetch_add(1, Ordering::Relaxed);
        }
        i += 1;
    }
}
