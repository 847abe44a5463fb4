//! Helpers the emulated end-to-end tests share.
#![allow(dead_code)] // each test binary uses the part it needs

pub mod counting;
pub mod sockets;

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use hostcall_abi::typed::{Errno, Signature};
use hostcall_client::Channel;
use hostcall_client::typed::{Client, OnChannel};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, HostBuilder, Launch, RunReport};

/// A host that captures output instead of echoing it, with a timeout far beyond any
/// test's needs (so a hang fails instead of stalling the suite).
pub fn quiet() -> HostBuilder {
    Host::builder()
        .echo_output(false)
        .capture_output(true)
        .timeout(Duration::from_secs(60))
}

/// `-errno` as `fd_io` returns it, and [`c`] a declared service's answer.
pub fn neg(e: i32) -> i64 {
    -(e as i64)
}

/// The fixed id of the service `name` (`"Fs.write"`) among a declaration's `sigs`
/// (`<dyn Fs>::SERVICES`), for a request written by hand.
pub fn declared_id(sigs: &[Signature], name: &str) -> u32 {
    sigs.iter().find(|s| s.name == name).expect(name).id
}

/// The declared services `S` (`dyn Fs`, ...) over `ch`.
pub fn svc<S: ?Sized>(ch: &Channel) -> Client<Emu, S> {
    Client::new(OnChannel::new(*ch))
}

/// A declared service's answer as one number: its value, or `-errno` (as [`neg`]), so
/// that a test compares it with one literal.
pub fn c<T: TryInto<i64>>(r: Result<T, Errno>) -> i64 {
    r.map_or_else(|e| neg(e.0), |v| v.try_into().unwrap_or(i64::MAX))
}

/// [`c`] of a service that answers nothing: 0, or `-errno`.
pub fn c0(r: Result<(), Errno>) -> i64 {
    c(r.map(|()| 0))
}

/// Runs `body` on `threads` emulated GPU threads of one block; returns thread 0's value
/// with the report.
pub fn run_on<T: Send + 'static>(
    host: HostBuilder,
    threads: u32,
    body: impl Fn(&Channel, &EmuThread) -> T + Send + Sync + 'static,
) -> (T, RunReport) {
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let v = body(t.channel(), t);
        if t.thread == 0 {
            *o.lock().unwrap() = Some(v);
        }
    });
    let report = host
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, threads, vec![]))
        .unwrap();
    let v = out.lock().unwrap().take().expect("thread 0 finished");
    (v, report)
}

static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A process-wide logger that keeps every warning it is given.
struct Keep;

impl log::Log for Keep {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            WARNINGS.lock().unwrap().push(r.args().to_string());
        }
    }

    fn flush(&self) {}
}

/// The warnings logged in this test binary so far, from the first call on (which
/// installs the logger that keeps them: a binary that uses it must install no other).
pub fn warnings() -> Vec<String> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Keep).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
    WARNINGS.lock().unwrap().clone()
}

/// Runs `f` on a thread of its own and returns its value; fails the test if `f` has not
/// returned within `limit`, so that a hang fails the test rather than stalling the
/// suite (the stuck thread is left behind).
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what} had not returned after {limit:?}"),
    }
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &std::path::Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, 0o600.into()).expect("mkfifo");
}

/// The names of this process's threads that the host starts (`hostcall-…`).
pub fn host_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| name.starts_with("hostcall-"))
        .collect()
}
