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
use hostcall_client::{Channel, fd_io};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch, Outcome};

/// The launch's stdout tickets (libc keeps them in the launch state).
static TICKETS: AtomicU64 = AtomicU64::new(0);

/// Lines thread 0 prints: 4 MiB, far more than a pipe holds.
const LINES: usize = 64 << 10;
const LINE: &[u8] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";

/// The tests take the process's stdout in turn.
static STDOUT: Mutex<()> = Mutex::new(());

/// Makes the process's stdout a pipe whose reader pauses `pause`, then reads it all:
/// returns the stdout to put back and the reader.
fn stalled_stdout(pause: Duration) -> (OwnedFd, std::thread::JoinHandle<Vec<u8>>) {
    let (read, write) = rustix::pipe::pipe().unwrap();
    let saved = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    rustix::stdio::dup2_stdout(&write).unwrap();
    drop(write);
    let reading = std::thread::spawn(move || {
        std::thread::sleep(pause);
        let mut all = Vec::new();
        std::fs::File::from(read).read_to_end(&mut all).unwrap();
        all
    });
    (saved, reading)
}

/// Pings on `ch` every 5 ms for `span`, keeping the slowest round trip in `slowest`.
fn ping_for(ch: &Channel, span: Duration, slowest: &Mutex<Duration>) {
    let until = Instant::now() + span;
    while Instant::now() < until {
        let t0 = Instant::now();
        assert_eq!(ch.ping::<Emu>(5), 5);
        let took = t0.elapsed();
        let mut s = slowest.lock().unwrap();
        *s = (*s).max(took);
        drop(s);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_stalled_stdout_holds_up_only_the_output() {
    let _stdout = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    let (saved, reading) = stalled_stdout(Duration::from_secs(2));
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
            ping_for(ch, Duration::from_millis(1500), &s);
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
    // The test harness may have printed its own lines in between; they hold no digit.
    let digits = |b: &[u8]| b.iter().filter(|b| b.is_ascii_digit()).count();
    assert_eq!(digits(&out), LINES * digits(LINE), "every line arrived");
    let slowest = *slowest.lock().unwrap();
    assert!(
        slowest < Duration::from_millis(200),
        "a ping waited {slowest:?} while stdout was stalled"
    );
}

/// How long the reader of [`printers_and_a_pinger`]'s stdout pauses: three times the
/// GPU's wait limit. A ping that waits for the stall waits most of it; the tests allow
/// half of it, for the pings that wait on printers busy at every port as they would with
/// a reader that never paused (on this machine's two cores the printing threads also
/// take the CPU from the ping's).
const STALL: Duration = Duration::from_secs(3);

/// `printers` GPU threads (a warp each) print 4 KiB pieces, `pieces` each, far past what
/// the host holds (64 MiB), while the reader of the process's stdout pauses [`STALL`];
/// another thread pings meanwhile. On `ports` ports. The run must complete, every piece
/// arrive, and no ping wait for the stall.
fn printers_and_a_pinger(ports: usize, printers: u32, pieces: usize) {
    let _stdout = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    TICKETS.store(0, std::sync::atomic::Ordering::Relaxed);
    let mut piece = vec![b'x'; 4095];
    piece.push(b'\n');
    let (saved, reading) = stalled_stdout(STALL);
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    let s = slowest.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < printers {
            for _ in 0..pieces {
                fd_io::write_posted::<Emu>(ch, 1, &piece, &TICKETS);
            }
        } else {
            // Pings from before the stall until after it.
            ping_for(ch, STALL + Duration::from_millis(500), &s);
        }
    });
    let report = within(Duration::from_secs(90), "Host::run", move || {
        Host::builder()
            .ports(ports)
            .wait_limit(Duration::from_secs(1))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", printers + 1, 1, vec![]))
            .unwrap()
    });
    rustix::stdio::dup2_stdout(&saved).unwrap();
    // The test harness may have printed its own lines in between, even inside a piece
    // (the writer's writes to a pipe are not atomic past 4 KiB); they hold no `x`.
    let got = reading
        .join()
        .unwrap()
        .iter()
        .filter(|&&b| b == b'x')
        .count()
        / 4095;
    let slowest = *slowest.lock().unwrap();
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    assert_eq!(got, printers as usize * pieces, "every piece arrived");
    assert!(
        slowest < STALL / 2,
        "{printers} printers on {ports} ports: a ping waited {slowest:?} while stdout was stalled"
    );
}

/// Eight threads print 96 MiB while the reader pauses longer than a GPU
/// thread's wait limit. Their pieces wait on their ports; a thread that never prints
/// must still get a port at once, and no thread may give up (the launch traps: every
/// printer's output lost with it), as one waiting on a held-back piece's port did.
#[test]
fn printers_past_the_bound_leave_a_port_to_the_rest() {
    printers_and_a_pinger(16, 8, 3 << 10);
}

/// More printers than ports: their held-back pieces can take every port but the
/// continuation port (a printer whose home port is busy posts on another), which the
/// host never holds back; a thread that finds no other port free takes that one. Four
/// printers on two normal ports (sixteen, at first, made pings wait past the stall on
/// a machine running other test binaries beside this one).
#[test]
fn printers_holding_back_every_port_leave_the_continuation_port_to_the_rest() {
    printers_and_a_pinger(3, 4, 6 << 10);
}

/// Printers whose home ports (the first port each tries) cover every port but the
/// continuation port: four one-thread printers on four ports, and thirty-six on
/// sixteen. Each posts on its home port while it is free, so held-back pieces end up
/// on every port a ping may take but the continuation port.
#[test]
fn printers_whose_home_ports_cover_the_channel_leave_a_port_to_the_rest() {
    for (ports, printers) in [(4, 4), (16, 36)] {
        printers_and_a_pinger(ports, printers, (96 << 20) / 4096 / printers as usize);
    }
}
