//! Calls that wait on a peer (a FIFO's other end) beside calls that only take time, on
//! the emulated backend: however many wait, and however few ports, consumers and pool
//! workers the host has, the calls that only take time are served, the peers' own calls
//! get through, and the run ends. On Linux each of these programs completes.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{c, c0, mkfifo, quiet, svc, within};
use hostcall_abi::fcntl::{AT_FDCWD, O_RDONLY, O_WRONLY};
use hostcall_abi::std_services::Fs;
use hostcall_abi::typed::Signature;
use hostcall_client::{fd_io, service};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{HostBuilder, Launch, Outcome, RunReport};

service! {
    /// A call that only takes time.
    pub trait Nap {
        /// Sleeps 10 ms on the host; returns `x`.
        fn nap(&self, x: u32) -> u32, blocks;
    }
}

/// [`Nap`], noting the name of each host thread that served a call.
struct HostNap(Arc<Mutex<Vec<String>>>);

impl Nap for HostNap {
    fn nap(&self, x: u32) -> u32 {
        std::thread::sleep(Duration::from_millis(10));
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.0.lock().unwrap().push(name);
        x
    }
}

/// How long the readers' opens are given to reach the host before the writers come.
const READERS_FIRST: Duration = Duration::from_millis(300);

/// Runs `threads` emulated GPU threads of one block, of a module that uses the declared
/// services `uses`, on `host` with a 5 s timeout; fails unless they complete, and if
/// `Host::run` has not returned within 20 s.
fn run(
    host: HostBuilder,
    threads: u32,
    uses: &[Signature],
    body: impl Fn(&EmuThread) + Send + Sync + 'static,
) -> RunReport {
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(uses)
        .kernel("k", body);
    let run = within(Duration::from_secs(20), "Host::run", move || {
        host.timeout(Duration::from_secs(5))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, threads, vec![]))
            .map_err(|e| e.to_string())
    });
    let report = run.unwrap_or_else(|e| panic!("the run: {e}"));
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    report
}

/// Makes FIFOs `fifo0` to `fifo{n-1}` and a regular file `file` in a new directory.
fn fifos(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        mkfifo(&dir.path().join(format!("fifo{i}")));
    }
    std::fs::write(dir.path().join("file"), b"data").unwrap();
    dir
}

/// Opens `/data/fifo{i}` with `flags` (waiting for the other end, as on Linux).
fn open_fifo(t: &EmuThread, i: usize, flags: i32) -> i32 {
    let path = format!("/data/fifo{i}");
    let fd = c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, path.as_bytes(), flags, 0));
    assert!(fd >= 3, "open {path}: {fd}");
    fd as i32
}

/// Reads `fd` to its end; returns the bytes read.
fn read_to_end(t: &EmuThread, fd: i32) -> u64 {
    let mut buf = [0u8; 64];
    let mut got = 0;
    loop {
        match fd_io::read::<Emu>(t.channel(), fd, &mut buf) {
            0 => break,
            n if n > 0 => got += n as u64,
            e => panic!("read: {e}"),
        }
    }
    c0(svc::<dyn Fs>(t.channel()).close(fd));
    got
}

/// Four GPU threads open FIFOs for reading, each waiting for a writer, as many as the
/// pool has workers; a fifth states a regular file, then opens the write ends. The
/// `stat` only takes time and must be answered while the opens wait.
#[test]
fn a_stat_is_answered_while_as_many_fifo_opens_as_pool_workers_wait() {
    let dir = fifos(4);
    let stat = Arc::new(AtomicU64::new(u64::MAX));
    let s = stat.clone();
    let host = quiet().preopen_dir(dir.path(), "/data");
    run(host, 5, &[], move |t| {
        let i = t.thread as usize;
        if i < 4 {
            let fd = open_fifo(t, i, O_RDONLY);
            assert_eq!(read_to_end(t, fd), 0);
            return;
        }
        std::thread::sleep(READERS_FIRST);
        let mut out = [0u8; 256];
        let r = svc::<dyn Fs>(t.channel()).statat(AT_FDCWD, b"/data/file", 1, &mut out);
        s.store(c0(r) as u64, Relaxed);
        for w in 0..4 {
            let fd = open_fifo(t, w, O_WRONLY);
            c0(svc::<dyn Fs>(t.channel()).close(fd));
        }
    });
    assert_eq!(stat.load(Relaxed), 0, "the stat's answer");
}

/// Sixteen GPU threads each open a FIFO for reading, and sixteen others open the write
/// ends once the readers wait: thirty-two calls waiting on each other, on four ports.
/// Every pair meets and its byte goes through.
#[test]
fn sixteen_fifo_pairs_meet_on_four_ports() {
    let dir = fifos(16);
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    let host = quiet().ports(4).preopen_dir(dir.path(), "/data");
    run(host, 32, &[], move |t| {
        let i = t.thread as usize;
        if i < 16 {
            let fd = open_fifo(t, i, O_RDONLY);
            g.fetch_add(read_to_end(t, fd), Relaxed);
        } else {
            std::thread::sleep(READERS_FIRST);
            let fd = open_fifo(t, i - 16, O_WRONLY);
            assert_eq!(fd_io::write::<Emu>(t.channel(), fd, b"x"), 1);
            c0(svc::<dyn Fs>(t.channel()).close(fd));
        }
    });
    assert_eq!(got.load(Relaxed), 16, "a byte through each FIFO");
}

/// Seventy GPU threads open one FIFO for reading and one opens it for writing, on a
/// host of two ports, one consumer and one pool worker: far more waiting opens than the
/// pool's queue holds for two ports. The writer keeps its end open until every reader
/// has opened, then closes it, and every reader reads the end of the FIFO.
#[test]
fn seventy_readers_of_one_fifo_on_two_ports_one_consumer_and_one_worker() {
    const READERS: u64 = 70;
    let dir = fifos(1);
    let opened = Arc::new(AtomicU64::new(0));
    let o = opened.clone();
    let host = quiet()
        .ports(2)
        .consumers(1)
        .blocking_threads(1)
        .preopen_dir(dir.path(), "/data");
    run(host, READERS as u32 + 1, &[], move |t| {
        if u64::from(t.thread) < READERS {
            let fd = open_fifo(t, 0, O_RDONLY);
            o.fetch_add(1, Relaxed);
            assert_eq!(read_to_end(t, fd), 0);
            return;
        }
        std::thread::sleep(READERS_FIRST);
        let fd = open_fifo(t, 0, O_WRONLY);
        let started = Instant::now();
        while o.load(Acquire) < READERS && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        c0(svc::<dyn Fs>(t.channel()).close(fd));
    });
    assert_eq!(opened.load(Relaxed), READERS);
}

/// Four GPU threads open FIFOs for reading, each waiting for a writer; a fifth prints
/// more than one posted piece holds (a copy from GPU memory in its turn), then a line,
/// then opens the write ends. The output is written whole while the opens wait.
#[test]
fn a_long_print_is_written_while_as_many_fifo_opens_as_pool_workers_wait() {
    const LONG: usize = 8 << 10;
    let dir = fifos(4);
    let tickets = Arc::new(AtomicU64::new(0));
    let host = quiet().preopen_dir(dir.path(), "/data");
    let report = run(host, 5, &[], move |t| {
        let i = t.thread as usize;
        if i < 4 {
            let fd = open_fifo(t, i, O_RDONLY);
            assert_eq!(read_to_end(t, fd), 0);
            return;
        }
        std::thread::sleep(READERS_FIRST);
        fd_io::write_posted::<Emu>(t.channel(), 1, &vec![b'x'; LONG], &tickets);
        fd_io::write_posted::<Emu>(t.channel(), 1, b"done\n", &tickets);
        for w in 0..4 {
            let fd = open_fifo(t, w, O_WRONLY);
            c0(svc::<dyn Fs>(t.channel()).close(fd));
        }
    });
    let mut want = vec![b'x'; LONG];
    want.extend_from_slice(b"done\n");
    assert!(
        report.stdout == want,
        "{} bytes of stdout",
        report.stdout.len()
    );
}

/// Eighty GPU threads call a service that only takes time, on one port with one pool
/// worker: each call is parked once it has waited, freeing the port for the next, so
/// more calls come than the worker's queue holds (32 for one port). Past that the
/// packets wait on the port until the queue has room; every call is served, and each on
/// the worker, never on the consumer, which keeps serving its port meanwhile.
#[test]
fn calls_past_the_workers_queue_wait_on_their_port_and_run_on_the_worker() {
    let served = Arc::new(Mutex::new(Vec::new()));
    let host = quiet()
        .ports(1)
        .consumers(1)
        .blocking_threads(1)
        .serve::<dyn Nap, _>(HostNap(served.clone()));
    run(host, 80, <dyn Nap>::SERVICES, |t| {
        assert_eq!(svc::<dyn Nap>(t.channel()).nap(t.thread), t.thread);
    });
    let names = served.lock().unwrap().clone();
    assert_eq!(names.len(), 80);
    let elsewhere: Vec<&String> = names
        .iter()
        .filter(|n| !n.starts_with("hostcall-blocking"))
        .collect();
    assert!(elsewhere.is_empty(), "calls served on {elsewhere:?}");
}

/// Sixteen GPU threads read files on a hung network mount (calls that
/// only take time, and never end) on eight ports; another thread's ping must be answered
/// while they hang. A call that only takes time kept its port until answered, so every
/// port was held and the ping waited for the mount.
#[test]
fn calls_on_a_hung_mount_leave_the_ports_to_other_calls() {
    let host = quiet().ports(8).blocking_threads(16);
    let took = ping_beside_hung_reads(host, 16, Duration::from_millis(300), 4);
    assert!(
        took < Duration::from_secs(1),
        "the ping waited {took:?} for the hung mount"
    );
}

/// Runs `hung` GPU threads (a warp each) reading a mount that hangs for `secs` s, and
/// one more that pings `after` into the run, on `host`; returns how long the ping took.
fn ping_beside_hung_reads(host: HostBuilder, hung: u32, after: Duration, secs: u64) -> Duration {
    const READ: u32 = 30;
    let ping = Arc::new(Mutex::new(None));
    let p = ping.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < hung {
            ch.call::<Emu>(READ, [0; 6], &[], &mut [], None);
            return;
        }
        std::thread::sleep(after);
        let t0 = Instant::now();
        assert_eq!(ch.ping::<Emu>(7), 7);
        *p.lock().unwrap() = Some(t0.elapsed());
    });
    let until = Instant::now() + Duration::from_secs(secs);
    let host = host.service(READ, Arc::new(HungUntil(until)));
    let report = within(Duration::from_secs(60), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", hung + 1, 1, vec![]))
            .unwrap()
    });
    let took = *ping.lock().unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Completed,
        "ping: {took:?}; {report:?}"
    );
    took.expect("the ping was answered")
}

/// As many GPU threads read files on a hung mount as the pool has workers; another then
/// `stat`s a healthy file system. The hung reads held every worker, and the `stat`
/// waited behind them in the queue for as long as the mount hung: a job that has waited
/// 20 ms with no worker idle now gets a worker of its own.
#[test]
fn a_stat_behind_as_many_hung_reads_as_workers_is_answered() {
    const WORKERS: u32 = 2;
    const READ: u32 = 30;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    let stat = Arc::new(Mutex::new(None));
    let s = stat.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Fs>::SERVICES)
        .kernel("k", move |t: &EmuThread| {
            let ch = t.channel();
            if t.block < WORKERS {
                ch.call::<Emu>(READ, [0; 6], &[], &mut [], None);
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
            let t0 = Instant::now();
            let mut out = [0u8; 256];
            let r = svc::<dyn Fs>(ch).statat(AT_FDCWD, b"/data/file", 1, &mut out);
            *s.lock().unwrap() = Some((c0(r), t0.elapsed()));
        });
    let host = quiet()
        .preopen_dir(dir.path(), "/data")
        .blocking_threads(WORKERS as usize)
        .service(
            READ,
            Arc::new(HungUntil(Instant::now() + Duration::from_secs(4))),
        );
    let report = within(Duration::from_secs(60), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", WORKERS + 1, 1, vec![]))
            .unwrap()
    });
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let (r, took) = stat.lock().unwrap().expect("the stat was answered");
    assert_eq!(r, 0, "the stat's answer");
    assert!(
        took < Duration::from_secs(1),
        "the stat waited {took:?} behind the hung reads"
    );
}

/// A file system that hangs until `.0`, then answers every call at once.
struct HungUntil(Instant);

impl Handler for HungUntil {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        std::thread::sleep(self.0.saturating_duration_since(Instant::now()));
        Ok(Reply::value(0))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
    fn only_takes_time(&self, _: u32, _: &[u64; 6]) -> bool {
        true
    }
}

/// Reads on a hung mount were parked after 20 ms, and their ports freed, only while
/// the workers' queue has room (32 jobs per port). Past it (`wants_worker`), each further
/// read stays on its port, unserved, its thread waiting for its answer with the wait
/// limit: the hung mount holds every port again, and a thread that never touches it
/// waits for a port. Two ports (one normal), one worker, 70 threads reading a mount
/// that hangs for 6 s: the 66th read's packet stays on the one port, and a ping made
/// 2 s in waits for the mount (or a thread gives up at the wait limit and the launch
/// traps).
#[test]
fn reads_on_a_hung_mount_past_the_workers_queue_leave_the_ports_to_other_calls() {
    let host = quiet()
        .ports(2)
        .blocking_threads(1)
        .wait_limit(Duration::from_secs(20))
        .timeout(Duration::from_secs(30));
    let took = ping_beside_hung_reads(host, 70, Duration::from_secs(2), 6);
    assert!(
        took < Duration::from_secs(1),
        "the ping waited {took:?} for the hung mount"
    );
}
