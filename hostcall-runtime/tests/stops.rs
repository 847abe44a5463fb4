//! Every stop reaches every call: a timeout, a kill and an `exit` on another GPU answer
//! each GPU thread's outstanding call `Killed` within half a second, wherever the host
//! keeps it (waiting for stdin, a FIFO's other end, a connection), and `Host::run`
//! returns within its timeout and a second whatever the program did. A test binary of
//! its own: it makes the process's stdin a pipe nobody writes, so that a read of it
//! waits.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use common::{c, c0, mkfifo, quiet, svc, within};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::fcntl::O_RDONLY;
use hostcall_abi::net::SOCKADDR_MAX;
use hostcall_abi::net::consts::*;
use hostcall_abi::std_services::{Fs, Lifecycle, Net};
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Error, HostBuilder, Launch, Outcome};

/// What a stop's end may take beyond its cause: half a second on an idle machine;
/// 2.0 and 2.5 s were seen while Buck2 ran about 90 other tests on two cores. The bugs
/// these tests guard against waited 5.9 s (a socket), the timeout (stdin) or for ever.
const SLOW_MACHINE: Duration = Duration::from_millis(3500);

/// The tests here look at the process's threads: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Waits up to a second for the host's threads to be gone; returns those left.
fn threads_left() -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        let left = common::host_threads();
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Makes fd 0 the read end of a pipe whose write end stays open and unwritten: a read
/// of stdin waits for ever.
fn stdin_that_waits() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let (read, write) = rustix::pipe::pipe().unwrap();
        rustix::stdio::dup2_stdin(&read).unwrap();
        std::mem::forget(write);
    });
}

/// A GPU thread whose call waits on the host, by kind.
fn wait_in(t: &EmuThread, what: u32) {
    let ch = t.channel();
    match what {
        0 => {
            let mut buf = [0u8; 16];
            fd_io::read::<Emu>(ch, 0, &mut buf);
        }
        1 => {
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/fifo", O_RDONLY, 0));
        }
        _ => {
            let net = svc::<dyn Net>(ch);
            let fd = net.socket(AF_INET, SOCK_STREAM, 0).unwrap();
            let mut any = [0u8; SOCKADDR_MAX];
            hostcall_abi::net::encode(&"127.0.0.1:0".parse().unwrap(), &mut any);
            net.bind(fd, &any).unwrap();
            net.listen(fd, 1).unwrap();
            let mut peer = [0u8; SOCKADDR_MAX];
            let _ = net.accept(fd, 0, &mut peer);
        }
    }
}

/// A host whose GPU may wait on each: stdin, `/data` (with a FIFO nobody opens for
/// writing) and a listening socket.
fn waiting_host(dir: &std::path::Path) -> HostBuilder {
    stdin_that_waits();
    mkfifo(&dir.join("fifo"));
    quiet()
        .stdin(true)
        .preopen_dir(dir, "/data")
        .allow_listen("127.0.0.1:*")
        .wait_limit(Duration::ZERO)
}

/// At its timeout a launch whose threads wait in stdin, a FIFO's
/// `open` and `accept` is stopped: each call is answered `Killed`, each thread traps,
/// and the run ends soon after the timeout (within a second of it on an idle machine), leaving
/// no host thread behind. Such calls sat in the blocking pool, which the kill did not reach: the launch
/// was reported still running, its threads never answered, with no wait limit they
/// never ended, and a pool thread stayed blocked in the FIFO's `open`.
#[test]
fn a_timeout_answers_calls_waiting_in_stdin_a_fifo_and_accept() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // The limit counts the launch's set-up too: long enough that, on a loaded machine,
    // every thread is in its call when it comes.
    let limit = Duration::from_secs(2);
    let host = waiting_host(dir.path()).timeout(limit);
    let mut m =
        EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| wait_in(t, t.block));
    let (err, took) = within(Duration::from_secs(10), "Host::run", move || {
        let host = host.build().unwrap();
        let started = Instant::now();
        let err = host
            .run(&mut m, &Launch::linear("k", 3, 1, vec![]))
            .unwrap_err();
        (err, started.elapsed())
    });
    let Error::Timeout {
        in_flight,
        still_running,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert!(!still_running, "every thread trapped on its answer: {err}");
    let mut names: Vec<_> = in_flight.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["Fs.openat", "Fs.read", "Net.accept"], "{err}");
    assert!(took < limit + SLOW_MACHINE, "{took:?}");
    assert_eq!(threads_left(), Vec::<String>::new());
}

/// An `exit` on one GPU ends the other GPU's launch, whose thread
/// waits in stdin, in a FIFO's `open` or in `accept`, within half a second: it waited
/// for the call to return (5.9 s for a socket, up to the timeout for stdin).
#[test]
fn an_exit_on_one_gpu_answers_the_other_gpus_waiting_calls() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for what in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let host = waiting_host(dir.path()).timeout(Duration::from_secs(20));
        let module = || {
            EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
                if t.config().gpu == 1 {
                    std::thread::sleep(Duration::from_millis(200));
                    svc::<dyn Lifecycle>(t.channel()).exit(3);
                    t.trap()
                }
                wait_in(t, what);
            })
        };
        let launch = Launch::linear("k", 1, 1, vec![]);
        let mut runs = [(module(), launch.clone()), (module(), launch)];
        let (outcomes, took) = within(Duration::from_secs(30), "Host::run_all", move || {
            let host = host.build().unwrap();
            let started = Instant::now();
            let outcomes = host
                .run_all(&mut runs)
                .into_iter()
                .map(|r| r.map(|r| r.outcome).map_err(|e| e.to_string()))
                .collect::<Vec<_>>();
            (outcomes, started.elapsed())
        });
        assert_eq!(
            outcomes,
            [Ok(Outcome::Exited(3)), Ok(Outcome::Exited(3))],
            "waiting in {what}"
        );
        assert!(
            took < Duration::from_millis(200) + SLOW_MACHINE,
            "waiting in {what}: {took:?}"
        );
    }
}

/// Opens each path (read and write, non-blocking: it never waits) on drop, so that an
/// `open` a host thread may still wait in on that FIFO returns: the other tests here
/// count the host's threads.
struct Unblock(Vec<std::path::PathBuf>);

impl Drop for Unblock {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        for p in &self.0 {
            let _ = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p);
        }
    }
}

/// An `exit` ends a wait in a FIFO's `open` whatever the FIFO is named by then: GPU
/// thread 0 opens a FIFO for reading and waits for a writer, thread 1 renames the FIFO
/// (as a program that moves its files into place does) and exits. Each run ends
/// `Exited(0)`, and no host thread is left waiting in the open, nor the launch it holds.
#[test]
fn an_exit_ends_a_fifo_open_whatever_the_fifo_is_named_by_then() {
    const RUNS: usize = 2;
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let moved = (0..RUNS).map(|run| dir.path().join(format!("moved{run}")));
    let _unblock = Unblock(moved.collect());
    for run in 0..RUNS {
        mkfifo(&dir.path().join(format!("fifo{run}")));
        let host = quiet()
            .timeout(Duration::from_secs(10))
            .preopen_dir(dir.path(), "/data");
        let fifo = format!("/data/fifo{run}");
        let moved = format!("/data/moved{run}");
        let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
            let fs = svc::<dyn Fs>(t.channel());
            if t.thread == 0 {
                // Waits for a writer; the exit answers it `Killed`.
                let _ = fs.openat(AT_FDCWD, fifo.as_bytes(), O_RDONLY, 0);
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(c0(fs.rename(fifo.as_bytes(), moved.as_bytes())), 0);
            svc::<dyn Lifecycle>(t.channel()).exit(0);
            t.trap()
        });
        let outcome = within(Duration::from_secs(20), "Host::run", move || {
            host.build()
                .unwrap()
                .run(&mut m, &Launch::linear("k", 1, 2, vec![]))
                .map(|r| r.outcome)
                .map_err(|e| e.to_string())
        });
        assert_eq!(outcome, Ok(Outcome::Exited(0)), "run {run}");
        assert_eq!(threads_left(), Vec::<String>::new(), "run {run}");
    }
}

/// A launch stopped at its timeout whose threads never call the host
/// keeps running on the device. A second run on its module rewrote the configuration
/// and the service ids under it; it is refused, and says why.
#[test]
fn a_module_whose_stopped_kernel_still_runs_refuses_another_run() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let spin = Arc::new(AtomicBool::new(true));
    let s = spin.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |_: &EmuThread| {
        while s.load(Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let host = quiet().timeout(Duration::from_millis(200)).build().unwrap();
    let launch = Launch::linear("k", 1, 1, vec![]);
    let first = host.run(&mut m, &launch).unwrap_err();
    assert!(
        matches!(
            first,
            Error::Timeout {
                still_running: true,
                ..
            }
        ),
        "{first}"
    );
    let again = host.run(&mut m, &launch).unwrap_err().to_string();
    assert!(
        again.contains("still runs") && again.contains("`k`"),
        "{again}"
    );
    spin.store(false, Release);
    // Once it has ended, the module runs again (under a limit that a loaded machine's
    // set-up, which the limit counts, never reaches).
    let patient = quiet().timeout(Duration::from_secs(10)).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let ran = loop {
        match patient.run(&mut m, &launch) {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                assert!(e.to_string().contains("still runs"), "{e}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(ran.outcome, Outcome::Completed);
}
