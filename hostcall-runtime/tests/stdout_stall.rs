//! The reader of the host's stdout stops reading for a while. The
//! GPU's output then waits, but nothing else does: a consumer thread wrote stdout itself,
//! under the lock that puts posted writes in order, so every port of that consumer
//! waited with it (an unrelated `ping` waited 1.6 s of a 2 s pause). A test binary of its
//! own: its tests make the process's stdout a pipe they read themselves, one at a time.

mod common;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::within;
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch, Outcome};

/// The launch's stdout tickets (libc keeps them in the launch state).
static TICKETS: AtomicU64 = AtomicU64::new(0);

/// Lines thread 0 prints: 4 MiB, far more than a pipe holds.
const LINES: usize = 64 << 10;
const LINE: &[u8] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";

/// The tests take the process's stdout in turn.
static STDOUT: Mutex<()> = Mutex::new(());

#[test]
fn a_stalled_stdout_holds_up_only_the_output() {
    let _stdout = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    let (read, write) = rustix::pipe::pipe().unwrap();
    let saved: OwnedFd = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    rustix::stdio::dup2_stdout(&write).unwrap();
    drop(write);
    // The reader pauses 2 s before it reads anything, then reads everything.
    let reading = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let mut all = Vec::new();
        std::fs::File::from(read).read_to_end(&mut all).unwrap();
        all
    });
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    let s = slowest.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block == 0 {
            for _ in 0..LINES {
                fd_io::write_posted::<Emu>(ch, 1, LINE, &TICKETS);
            }
        } else {
            // Pings while the output waits for its reader.
            let until = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < until {
                let t0 = Instant::now();
                assert_eq!(ch.ping::<Emu>(5), 5);
                let took = t0.elapsed();
                let mut s = s.lock().unwrap();
                *s = (*s).max(took);
                drop(s);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    let report = within(Duration::from_secs(60), "Host::run", move || {
        Host::builder()
            .consumers(1)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 2, 1, vec![]))
            .unwrap()
    });
    rustix::stdio::dup2_stdout(&saved).unwrap();
    let out = reading.join().unwrap();
    assert_eq!(report.outcome, Outcome::Completed);
    assert_eq!(out.len(), LINES * LINE.len(), "every line arrived");
    let slowest = *slowest.lock().unwrap();
    assert!(
        slowest < Duration::from_millis(200),
        "a ping waited {slowest:?} while stdout was stalled"
    );
}

/// Issue 47's F3: several threads print far past what the host holds (64 MiB) while the
/// reader pauses longer than a GPU thread's wait limit. Their pieces wait on their ports;
/// a thread that never prints must still get a port at once, and no thread may give up
/// (the launch traps: every printer's output lost with it).
#[test]
fn printers_past_the_bound_leave_a_port_to_the_rest() {
    let _stdout = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    const PRINTERS: u32 = 8;
    /// Each printer's 4 KiB pieces: 96 MiB in all.
    const PIECES: usize = 3 << 10;
    let mut piece = vec![b'x'; 4095];
    piece.push(b'\n');
    let (read, write) = rustix::pipe::pipe().unwrap();
    let saved: OwnedFd = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    rustix::stdio::dup2_stdout(&write).unwrap();
    drop(write);
    // The reader pauses 3 s, three times the GPU's wait limit, then reads everything.
    let reading = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        let mut all = Vec::new();
        std::fs::File::from(read).read_to_end(&mut all).unwrap();
        // The test harness may have printed its own lines in between.
        all.split(|&b| b == b'\n')
            .filter(|l| l.len() == 4095 && l.iter().all(|&b| b == b'x'))
            .count()
    });
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    let s = slowest.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < PRINTERS {
            for _ in 0..PIECES {
                fd_io::write_posted::<Emu>(ch, 1, &piece, &TICKETS);
            }
        } else {
            // Pings from before the stall until after it.
            let until = Instant::now() + Duration::from_millis(3500);
            while Instant::now() < until {
                let t0 = Instant::now();
                assert_eq!(ch.ping::<Emu>(5), 5);
                let took = t0.elapsed();
                let mut s = s.lock().unwrap();
                *s = (*s).max(took);
                drop(s);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    let report = within(Duration::from_secs(90), "Host::run", move || {
        Host::builder()
            .ports(16)
            .wait_limit(Duration::from_secs(1))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", PRINTERS + 1, 1, vec![]))
            .unwrap()
    });
    rustix::stdio::dup2_stdout(&saved).unwrap();
    let got = reading.join().unwrap();
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    assert_eq!(got, PRINTERS as usize * PIECES, "every piece arrived");
    let slowest = *slowest.lock().unwrap();
    assert!(
        slowest < Duration::from_millis(200),
        "a ping waited {slowest:?} while stdout was stalled"
    );
}
