//! What a run leaves behind, and what a kernel that ignores the protocol can make the
//! host queue: at most one blocking job per port, none after the run, no call served
//! twice, and a clean next run. The kernels here write ports and doorbells directly,
//! as a hostile GPU program can.

mod common;

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{c, declared_id, quiet, svc};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::fcntl::{O_CREAT, O_WRONLY};
use hostcall_abi::std_services::Fs;
use hostcall_abi::{Doorbell, LaneSlot, Port};
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Host, Launch, Outcome};

/// A service that blocks until the test opens its gate.
const GATE: u32 = 300;
/// A service that only counts its calls.
const COUNT: u32 = 301;

/// A blocking service: each call waits for the gate (at most 20 s, so a broken test
/// ends), counting calls.
#[derive(Default)]
struct Gate {
    calls: AtomicU64,
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Handler for Gate {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        self.calls.fetch_add(1, Relaxed);
        let open = self.open.lock().unwrap();
        let _ = self
            .opened
            .wait_timeout_while(open, Duration::from_secs(20), |o| !*o)
            .unwrap();
        Ok(Reply::value(0))
    }

    fn can_block(&self, _: u32) -> bool {
        true
    }
}

#[derive(Default)]
struct Counter(AtomicU64);

impl Handler for Counter {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        self.0.fetch_add(1, Relaxed);
        Ok(Reply::value(0))
    }
}

/// Writes `lanes` (service, arguments) into port `p` and rings its doorbell with `seq`,
/// as a kernel that ignores the protocol would: no port lock, no wait for an answer.
fn publish_raw(t: &EmuThread, p: usize, seq: u32, lanes: &[(u32, [u64; 6])]) {
    let c = t.config();
    let port = (c.ports as *mut Port).wrapping_add(p);
    // SAFETY: the emulator's device addresses are host addresses of the launch's ports
    // and doorbells, live for the launch; `p` is below the port count the test chose.
    unsafe {
        for (lane, &(service, args)) in lanes.iter().enumerate() {
            (&raw mut (*port).lanes[lane]).write_volatile(LaneSlot {
                service,
                seq,
                block: t.block,
                thread: t.thread,
                args,
            });
        }
        (*port)
            .header
            .lane_mask
            .store((1u32 << lanes.len()) - 1, Relaxed);
        (*(c.doorbells as *const Doorbell).add(p)).store(seq, Release);
    }
}

/// Whether this process holds `path` open.
fn held_open(path: &Path) -> bool {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|p| p == path)
}

fn run(host: &Host, kernel: impl Fn(&EmuThread) + Send + Sync + 'static) -> Outcome {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", kernel);
    host.run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap()
        .outcome
}

/// A kernel rewrites a doorbell 2,000 times without waiting,
/// each time a file write for the blocking pool, while the pool's one worker is held
/// by a call that blocks. Before: every rewrite queued another job (with its copied
/// input), and after `run` returned the queue went on writing into the mount with the
/// run's fd table still open. Now a port is not served again until its job answered,
/// queued jobs are dropped when the run ends, its files are closed, and the next run
/// on the same host starts clean.
#[test]
fn a_rewritten_doorbell_queues_one_job_and_nothing_outlives_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let gate = Arc::new(Gate::default());
    let host = quiet()
        .ports(8)
        .blocking_threads(1)
        .service(GATE, gate.clone())
        .preopen_dir(&root, "/data")
        .build()
        .unwrap();
    let outcome = run(&host, |t| {
        let fd = c(svc::<dyn Fs>(t.channel()).openat(
            AT_FDCWD,
            b"/data/keep.txt",
            O_WRONLY | O_CREAT,
            0o600,
        ));
        assert_eq!(fd, 3);
        publish_raw(t, 1, 1, &[(GATE, [0; 6])]);
        std::thread::sleep(Duration::from_millis(20));
        // `Fs.write(3, 4096 bytes)`: the bytes sent, then the fixed part (fd, length).
        let write = declared_id(<dyn Fs>::SERVICES, "Fs.write");
        for seq in 1..=2000 {
            publish_raw(t, 2, seq, &[(write, [4096, 3, 4096, 0, 0, 0])]);
        }
        std::thread::sleep(Duration::from_millis(50));
    });
    assert_eq!(outcome, Outcome::Completed);
    let keep = root.join("keep.txt");
    let written = std::fs::metadata(&keep).unwrap().len();
    let open_after = held_open(&keep);
    gate.open();
    std::thread::sleep(Duration::from_millis(300));
    let later = std::fs::metadata(&keep).unwrap().len();
    assert_eq!(
        later,
        written,
        "the finished run wrote {} more bytes into the mount",
        later - written
    );
    assert!(
        written <= 4096,
        "one job for port 2 at most: {written} bytes"
    );
    assert!(!open_after, "the run's files are closed when it returns");
    assert_eq!(gate.calls.load(Relaxed), 1);

    let outcome = run(&host, |t| {
        let fd = c(svc::<dyn Fs>(t.channel()).openat(
            AT_FDCWD,
            b"/data/next.txt",
            O_WRONLY | O_CREAT,
            0o600,
        ));
        assert_eq!(fd, 3, "the next run's fd table starts empty");
        assert_eq!(fd_io::write::<Emu>(t.channel(), fd as i32, b"clean"), 5);
    });
    assert_eq!(outcome, Outcome::Completed);
    assert_eq!(std::fs::read(root.join("next.txt")).unwrap(), b"clean");
}

/// Lane 0 of a packet is served inline, lane 1 goes to the pool and
/// blocks; the launch ends (as when another thread calls `exit`) while it does. The
/// end-of-run drain must not serve lane 0 again: before the fix of A, `response` was
/// stored only by the pool job, so the drain saw the packet as new. A kernel that
/// rings again with a new sequence once lane 1 is parked (its port freed) makes a new
/// call, served once: each publication is served once, never more.
#[test]
fn the_drain_never_serves_a_packet_the_pool_holds() {
    for rewrite in [false, true] {
        let gate = Arc::new(Gate::default());
        let count = Arc::new(Counter::default());
        let host = quiet()
            .ports(4)
            .blocking_threads(1)
            .service(GATE, gate.clone())
            .service(COUNT, count.clone())
            .build()
            .unwrap();
        let started = Instant::now();
        run(&host, move |t| {
            let lanes = [(COUNT, [0; 6]), (GATE, [0; 6])];
            publish_raw(t, 1, 1, &lanes);
            std::thread::sleep(Duration::from_millis(50));
            if rewrite {
                // A hostile kernel rings again while the pool holds the port.
                publish_raw(t, 1, 2, &lanes);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        gate.open();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            count.0.load(Relaxed),
            1 + u64::from(rewrite),
            "lane 0 was served more than once a publication (rewritten doorbell: {rewrite})"
        );
        // The second publication's gate call is a new call: it runs if a worker was
        // started for it (it waited 20 ms behind the first) before the run ended.
        assert!(
            (1..=1 + u64::from(rewrite)).contains(&gate.calls.load(Relaxed)),
            "gate calls {} (rewritten doorbell: {rewrite})",
            gate.calls.load(Relaxed)
        );
    }
}
