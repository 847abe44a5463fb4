//! The host's memory for a call that waits is what the call needs: a thread waiting in a
//! 64-byte `read` of an empty FIFO, or in a FIFO's `open` (which answers no bytes, and
//! waits inside its service on a pool thread), keeps its request, not a buffer as large
//! as its port's bulk area (128 KiB for a lane alone in its packet). A test binary of
//! its own: it counts every allocation of the process, one test at a time.

mod common;

use std::io::Write;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::time::Duration;

use common::counting::{Counting, live};
use common::{c, c0, mkfifo, quiet, svc, within};
use hostcall_abi::fcntl::{AT_FDCWD, O_RDONLY, O_RDWR};
use hostcall_abi::std_services::Fs;
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Launch, Outcome};

#[global_allocator]
static A: Counting = Counting;

/// Each test counts the whole process's live bytes: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// GPU threads, each waiting in one read.
const WAITERS: u32 = 64;
/// Bytes each reads.
const READ: usize = 64;

#[test]
fn threads_waiting_in_small_reads_hold_little_host_memory() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let host = quiet().preopen_dir(dir.path(), "/data");
    // Every thread opens the FIFO (`O_RDWR` never waits), then all meet, and then read.
    let opened = Arc::new(Barrier::new(WAITERS as usize + 1));
    let reading = Arc::new(AtomicU32::new(0));
    let (o, r) = (opened.clone(), reading.clone());
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let fd = c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, b"/data/fifo", O_RDWR, 0)) as i32;
        o.wait();
        let mut buf = [0u8; READ];
        r.fetch_add(1, Relaxed);
        let n = fd_io::read::<Emu>(t.channel(), fd, &mut buf);
        assert_eq!(n, READ as i64, "read");
        c0(svc::<dyn Fs>(t.channel()).close(fd));
    });
    let runner = std::thread::spawn(move || {
        within(Duration::from_secs(30), "Host::run", move || {
            host.timeout(Duration::from_secs(20))
                .build()
                .unwrap()
                .run(&mut m, &Launch::linear("k", 1, WAITERS, vec![]))
                .unwrap()
        })
    });
    opened.wait();
    let before = live();
    while reading.load(Relaxed) < WAITERS {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every read waits (nothing is written yet), parked after its first look.
    std::thread::sleep(Duration::from_millis(500));
    let waiting = live() - before;
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    w.write_all(&vec![7u8; WAITERS as usize * READ]).unwrap();
    let report = runner.join().unwrap();
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let per_call = waiting / WAITERS as isize;
    assert!(
        per_call < 8 << 10,
        "{WAITERS} threads waiting in {READ}-byte reads held {waiting} bytes of host memory, \
         {per_call} per call"
    );
}

/// GPU threads, each waiting in a FIFO's `open` for a writer.
const OPENERS: u32 = 64;

#[test]
fn threads_waiting_in_fifo_opens_hold_little_host_memory() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let host = quiet()
        .timeout(Duration::from_secs(20))
        .preopen_dir(dir.path(), "/data");
    let met = Arc::new(Barrier::new(OPENERS as usize + 1));
    let opening = Arc::new(AtomicU32::new(0));
    let (b, o) = (met.clone(), opening.clone());
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let fs = svc::<dyn Fs>(t.channel());
        b.wait();
        o.fetch_add(1, Relaxed);
        let fd = c(fs.openat(AT_FDCWD, b"/data/fifo", O_RDONLY, 0));
        assert!(fd >= 3, "open: {fd}");
        assert_eq!(c0(fs.close(fd as i32)), 0);
    });
    let runner = std::thread::spawn(move || {
        within(Duration::from_secs(30), "Host::run", move || {
            host.build()
                .unwrap()
                .run(&mut m, &Launch::linear("k", 1, OPENERS, vec![]))
                .unwrap()
        })
    });
    met.wait();
    let before = live();
    while opening.load(Relaxed) < OPENERS {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every open waits (nobody writes yet), parked long since.
    std::thread::sleep(Duration::from_millis(500));
    let waiting = live() - before;
    // The writer comes: every reader's open returns, and the program completes.
    let w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(w);
    let report = runner.join().unwrap();
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let per_call = waiting / OPENERS as isize;
    assert!(
        per_call < 8 << 10,
        "{OPENERS} threads waiting in a FIFO's open held {waiting} bytes of host memory, \
         {per_call} per call"
    );
}
