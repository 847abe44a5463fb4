//! The blocking pool's growth past its set workers (a worker for a job stuck behind
//! calls that never end), seen from outside: slow but working file calls do not grow it,
//! the workers it adds leave once idle, and waiting output does not keep a run past its
//! limit.

mod common;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{host_threads, quiet, within};
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Host, Launch, Outcome};

/// A working but slow file system (a loaded NFS server): every call takes 25 ms, and
/// ends. Counts how many calls run at once.
struct Slow {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Handler for Slow {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        let n = self.now.fetch_add(1, Relaxed) + 1;
        self.most.fetch_max(n, Relaxed);
        std::thread::sleep(Duration::from_millis(25));
        self.now.fetch_sub(1, Relaxed);
        Ok(Reply::value(0))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
    fn only_takes_time(&self, _: u32, _: &[u64; 6]) -> bool {
        true
    }
}

const SLOW: u32 = 30;
const WORKERS: usize = 4;

/// The tests count the process's pool threads: one at a time.
static ALONE: Mutex<()> = Mutex::new(());

/// 512 GPU threads each make 4 calls on a file system that answers every call in
/// 25 ms (it never hangs). The pool took "the first queued job waited 20 ms with no
/// worker idle" for "the workers are in calls that never end", and started a worker per
/// consumer sweep while that held: a thread per queued job (82 calls at once on 4
/// workers). Now every worker must have been in its call 20 ms.
#[test]
fn a_burst_of_slow_but_working_file_calls_keeps_to_about_the_set_workers() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let slow = Arc::new(Slow {
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let threads_seen = Arc::new(AtomicUsize::new(0));
    let seen = threads_seen.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        for _ in 0..4 {
            ch.call::<Emu>(SLOW, [0; 6], &[], &mut [], None);
        }
        let blocking = host_threads()
            .iter()
            .filter(|n| n.starts_with("hostcall-blocki"))
            .count();
        seen.fetch_max(blocking, Relaxed);
    });
    let host = quiet()
        .blocking_threads(WORKERS)
        .service(SLOW, slow.clone());
    let t0 = Instant::now();
    let report = within(Duration::from_secs(120), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 512, 1, vec![]))
            .unwrap()
    });
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let most = slow.most.load(Relaxed);
    eprintln!(
        "2,048 calls of 25 ms on {WORKERS} workers: {most} ran at once, {} hostcall-blocking threads seen, {:?}",
        threads_seen.load(Relaxed),
        t0.elapsed()
    );
    assert!(
        most <= 4 * WORKERS,
        "{most} calls of a working file system ran at once on a pool of {WORKERS} workers: \
         unstick started a thread per queued job"
    );
}

/// The extra workers leave once idle for 1 s, within one launch: a burst of 25 ms calls,
/// then, once every call is answered, 2.5 s of nothing, then the threads are counted.
#[test]
fn extra_workers_leave_after_a_second_idle() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let slow = Arc::new(Slow {
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let left = Arc::new(Mutex::new(None));
    let l = left.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        for _ in 0..2 {
            ch.call::<Emu>(SLOW, [0; 6], &[], &mut [], None);
        }
        done.fetch_add(1, Relaxed);
        if t.block == 0 {
            // Every call answered (however slowly a loaded machine ran them), then the
            // workers' idle second and a half more.
            while done.load(Relaxed) < 128 {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(2500));
            let blocking = host_threads()
                .iter()
                .filter(|n| n.starts_with("hostcall-blocki"))
                .count();
            *l.lock().unwrap() = Some(blocking);
        }
    });
    let host = quiet()
        .blocking_threads(WORKERS)
        .service(SLOW, slow.clone());
    let report = within(Duration::from_secs(120), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 128, 1, vec![]))
            .unwrap()
    });
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let most = slow.most.load(Relaxed);
    let left = left.lock().unwrap().unwrap();
    eprintln!("{most} ran at once; {left} hostcall-blocking threads 2.5 s after the burst");
    assert!(
        left <= WORKERS,
        "{left} workers were still there 2.5 s after the burst ({most} at once)"
    );
}

/// The reader of the process's stdout never reads while printers print far past what the
/// host holds (their pieces held back, then sent again as waiting writes parked on the
/// host); the run's time limit is 2 s. `Host::run` promises to return within the limit
/// and a second (OUTPUT_GRACE).
#[test]
fn a_run_whose_stdout_never_reads_returns_within_its_limit_and_a_second() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    let mut piece = vec![b'y'; 4095];
    piece.push(b'\n');
    let (read, write) = rustix::pipe::pipe().unwrap();
    let saved: OwnedFd = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    rustix::stdio::dup2_stdout(&write).unwrap();
    drop(write);
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        // 16 printers of 12 MiB each: 192 MiB, three times what the host holds.
        let _ = t;
        for _ in 0..3 << 10 {
            fd_io::write_posted::<Emu>(ch, 1, &piece, &TICKETS);
        }
    });
    let called = Instant::now();
    let report = within(Duration::from_secs(60), "Host::run", move || {
        Host::builder()
            .ports(4)
            .wait_limit(Duration::from_secs(30))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 16, 1, vec![]))
            .map(|r| format!("{:?}", r.outcome))
            .map_err(|e| e.to_string())
    });
    let took = called.elapsed();
    rustix::stdio::dup2_stdout(&saved).unwrap();
    // Now read what is left, so that the process's echo thread is not stuck.
    let reading = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::fs::File::from(read).read_to_end(&mut all);
    });
    drop(reading);
    let tickets = TICKETS.load(Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let later = TICKETS.load(Relaxed);
    eprintln!("outcome {report:?} after {took:?}; tickets {tickets} then {later} a second later");
    assert!(
        took < Duration::from_secs(3),
        "Host::run returned {took:?} after its call, past its 2 s limit and a second"
    );
}
