//! The reader of the host's stdout stops reading for a while. The
//! GPU's output then waits, but nothing else does: a consumer thread wrote stdout itself,
//! under the lock that puts posted writes in order, so every port of that consumer
//! waited with it (an unrelated `ping` waited 1.6 s of a 2 s pause). A test binary of its
//! own: it makes the process's stdout a pipe it reads itself.

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

#[test]
fn a_stalled_stdout_holds_up_only_the_output() {
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
