//! What the GPU program prints is the program's: `Host::run` returns once it has ended
//! and everything it printed is written to the host's stdout and stderr, however slowly
//! their reader takes it, so a host that exits right after loses nothing; a reader
//! stalled past the run's time limit ends the wait a second after the limit, counted
//! from the call. The writers of the host's streams stay within their memory bound
//! across runs, leave no thread behind, and hold no lock of std's, so the host's own
//! logging never waits on the program's output. A test binary of its own: its tests
//! make the process's stdout or stderr a pipe (one test at a time), and one runs this
//! binary again as a child whose stdout it reads slowly.

mod common;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{host_threads, within};
use hostcall_abi::DeviceConfig;
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{
    DeviceHeap, DeviceMemory, Error, GpuModule, Host, HostMemory, Launch, LaunchEnd, ModuleSlot,
    Outcome, Result,
};

/// Set in the child's environment: the child half of the slow-reader test runs.
const CHILD: &str = "HOSTCALL_TEST_OUTPUT_CHILD";
/// What the child prints, in lines of [`PIECE`]: far more than a pipe holds.
const PRINTED: usize = 2 << 20;
const PIECE: usize = 4096;
/// What the parent reads at a time, each after a pause of [`READ_PAUSE`]: about 1.6 MB/s.
const READ_AT_ONCE: usize = 16 << 10;
const READ_PAUSE: Duration = Duration::from_millis(10);
/// A device heap these kernels do not use: the emulator's is host memory, zeroed.
const SMALL_HEAP: u64 = 1 << 20;

/// One test at a time: each makes the process's stdout or stderr a pipe.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Host threads writing the GPU's output to the host's streams.
fn echo_threads() -> usize {
    host_threads()
        .iter()
        .filter(|t| t.starts_with("hostcall-echo"))
        .count()
}

/// Makes the allocator hand large blocks back to the system as they are freed, so that
/// resident memory follows what is live: by default glibc raises its threshold for
/// mapping a block of its own as large blocks are freed, and keeps the freed ones of a
/// thread's arena resident.
fn allocator_returns_large_blocks() {
    // SAFETY: `mallopt` only sets the allocator's thresholds; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
    }
}

/// This process's resident memory, once the allocator has handed back what it holds
/// free.
fn rss() -> usize {
    // SAFETY: `malloc_trim` only returns free memory of the allocator to the system.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// The process's fd 1 or 2 made the write end of a pipe that nobody reads; on drop, the
/// pipe is read (and what it carries thrown away) until no writer of the GPU's output
/// is left, and the fd is given back.
struct Stalled {
    fd: i32,
    saved: Option<OwnedFd>,
    read: Option<OwnedFd>,
}

impl Stalled {
    fn new(fd: i32) -> Stalled {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let saved = if fd == 1 {
            let saved = rustix::io::dup(rustix::stdio::stdout()).unwrap();
            rustix::stdio::dup2_stdout(&write).unwrap();
            saved
        } else {
            let saved = rustix::io::dup(rustix::stdio::stderr()).unwrap();
            rustix::stdio::dup2_stderr(&write).unwrap();
            saved
        };
        Stalled {
            fd,
            saved: Some(saved),
            read: Some(read),
        }
    }
}

impl Drop for Stalled {
    fn drop(&mut self) {
        let mut read = std::fs::File::from(self.read.take().unwrap());
        let draining = std::thread::spawn(move || std::io::copy(&mut read, &mut std::io::sink()));
        let until = Instant::now() + Duration::from_secs(10);
        while echo_threads() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let saved = self.saved.take().unwrap();
        if self.fd == 1 {
            rustix::stdio::dup2_stdout(&saved).unwrap();
        } else {
            rustix::stdio::dup2_stderr(&saved).unwrap();
        }
        let _ = draining.join();
    }
}

/// An emulated module printing `bytes` to `fd` in lines of [`PIECE`], each a posted
/// write, as `print!` does.
fn printing(fd: i32, bytes: usize) -> EmulatedModule {
    let tickets = Arc::new(AtomicU64::new(0));
    let mut line = [b'@'; PIECE];
    line[PIECE - 1] = b'\n';
    EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        for _ in 0..bytes / PIECE {
            fd_io::write_posted::<Emu>(t.channel(), fd, &line, &tickets);
        }
    })
}

/// The child half of
/// [`everything_printed_reaches_a_slow_reader_before_the_process_exits`]: prints
/// [`PRINTED`] bytes and ends the process as soon as `Host::run` returns, as
/// `cargo gpu run` and a packaged program do. Does nothing in the test run itself.
#[test]
fn child_prints_and_exits_at_once() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let mut m = printing(1, PRINTED);
    let report = Host::builder()
        .timeout(Duration::from_secs(30))
        .heap_bytes(SMALL_HEAP)
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    std::process::exit(i32::from(report.outcome != Outcome::Completed));
}

#[test]
fn everything_printed_reaches_a_slow_reader_before_the_process_exits() {
    let _serial = serial();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_prints_and_exits_at_once"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0; READ_AT_ONCE];
    let mut printed = 0;
    loop {
        std::thread::sleep(READ_PAUSE);
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        printed += buf[..n].iter().filter(|&&b| b == b'@').count();
    }
    assert!(child.wait().unwrap().success(), "the child's run completed");
    assert_eq!(
        printed,
        PRINTED / PIECE * (PIECE - 1),
        "every byte the GPU printed arrived"
    );
}

#[test]
fn runs_printing_to_a_stalled_stdout_keep_the_writer_bounded() {
    const RUNS: usize = 3;
    const EACH: usize = 32 << 20;
    let _serial = serial();
    allocator_returns_large_blocks();
    let _stalled = Stalled::new(1);
    let mut first = None;
    for run in 0..RUNS {
        let mut m = printing(1, EACH);
        // The program may end, or be stopped at its limit while it still prints.
        let r = Host::builder()
            .timeout(Duration::from_secs(1))
            .heap_bytes(SMALL_HEAP)
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, 1, vec![]));
        assert!(
            matches!(r, Ok(_) | Err(Error::Timeout { .. })),
            "run {run}: {r:?}"
        );
        drop(m);
        let now = rss();
        let first = *first.get_or_insert(now);
        // A writer that kept what a run left would grow by about EACH a run; the
        // allocator's own arenas move the resident size by up to about half that.
        assert!(
            now < first + EACH,
            "after run {run}, resident memory grew {} MiB",
            (now - first) >> 20
        );
        assert!(
            echo_threads() <= 1,
            "after run {run}, {} writer threads stay",
            echo_threads()
        );
    }
}

/// An emulated module whose launch memory takes `setup` to allocate, as a large device
/// heap can: set-up counts against the time limit.
struct SlowSetUp {
    inner: EmulatedModule,
    setup: Duration,
}

impl GpuModule for SlowSetUp {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn abi_version(&mut self) -> Result<u32> {
        self.inner.abi_version()
    }
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMemory> {
        self.inner.alloc_host_mapped(len)
    }
    fn alloc_device(&mut self, len: usize, zeroed: usize) -> Result<u64> {
        self.inner.alloc_device(len, zeroed)
    }
    fn alloc_heap(&mut self, len: usize, zeroed: usize) -> Result<Arc<dyn DeviceHeap>> {
        std::thread::sleep(self.setup);
        self.inner.alloc_heap(len, zeroed)
    }
    fn end_launch(&mut self) {
        self.inner.end_launch();
    }
    fn alloc_device_copy(&mut self, bytes: &[u8]) -> Result<u64> {
        self.inner.alloc_device_copy(bytes)
    }
    fn write_config(&mut self, config: &DeviceConfig) -> Result<()> {
        self.inner.write_config(config)
    }
    fn launch(&mut self, launch: &Launch) -> Result<()> {
        self.inner.launch(launch)
    }
    fn device_memory(&self) -> Arc<dyn DeviceMemory> {
        self.inner.device_memory()
    }
    fn poll(&mut self) -> Result<Option<LaunchEnd>> {
        self.inner.poll()
    }
    fn still_running(&mut self) -> Result<Option<String>> {
        self.inner.still_running()
    }
    fn service_slots(&mut self) -> Result<Vec<ModuleSlot>> {
        self.inner.service_slots()
    }
    fn bind_service(&mut self, symbol: &str, id: u32) -> Result<()> {
        self.inner.bind_service(symbol, id)
    }
}

#[test]
fn a_run_returns_within_its_limit_and_a_second_of_the_call() {
    const LIMIT: Duration = Duration::from_secs(1);
    let _serial = serial();
    let _stalled = Stalled::new(1);
    let tickets = AtomicU64::new(0);
    // Thread 0 prints more than the pipe holds; thread 1 never calls the host, so the
    // kill cannot stop it.
    let inner = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        if t.thread == 0 {
            for _ in 0..64 {
                fd_io::write_posted::<Emu>(t.channel(), 1, &[b'@'; 64 << 10], &tickets);
            }
        } else {
            std::thread::sleep(Duration::from_millis(2500));
        }
    });
    let mut m = SlowSetUp {
        inner,
        setup: Duration::from_millis(600),
    };
    let called = Instant::now();
    let r = Host::builder()
        .timeout(LIMIT)
        .heap_bytes(SMALL_HEAP)
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 2, vec![]));
    let took = called.elapsed();
    assert!(
        matches!(r, Err(Error::Timeout { .. })),
        "the launch ran past its limit: {r:?}"
    );
    assert!(
        took < LIMIT + Duration::from_secs(1),
        "Host::run returned {took:?} after the call, with a limit of {LIMIT:?}"
    );
    // The module frees the launch's memory once its last thread has ended.
    while m.still_running().unwrap().is_some() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_stalled_stderr_holds_no_lock_of_std() {
    let _serial = serial();
    let _stalled = Stalled::new(2);
    let running = std::thread::spawn(|| {
        let mut m = printing(2, 256 << 10);
        Host::builder()
            .timeout(Duration::from_secs(1))
            .heap_bytes(SMALL_HEAP)
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
            .map(|r| r.outcome)
    });
    // The writer of fd 2 has filled the pipe and waits on it.
    std::thread::sleep(Duration::from_millis(300));
    within(Duration::from_millis(500), "locking std's stderr", || {
        drop(std::io::stderr().lock());
    });
    assert_eq!(running.join().unwrap().unwrap(), Outcome::Completed);
}
