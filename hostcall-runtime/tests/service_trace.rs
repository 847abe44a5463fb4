//! `HOSTCALL_DEBUG=1` traces declared services and host closures with their decoded
//! arguments and results, the GPU thread and the latency. A test binary of its own: it
//! installs a logger that keeps the lines, and the logger is process-wide.

mod common;

use std::sync::Mutex;

use common::quiet;
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::std_services::Fs;
use hostcall_client::typed::{CallHostFn, HostFn};
use hostcall_client::{Errno, service};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{KernelArg, Launch, Outcome};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Keep;

impl log::Log for Keep {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == "hostcall"
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            LINES.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

service! {
    /// A service to trace.
    pub trait Shop {
        /// The price of `count` items named `item`.
        fn price(&self, item: &str, count: u32) -> Result<f64, Errno>;
    }
}

struct HostShop;

impl Shop for HostShop {
    fn price(&self, item: &str, count: u32) -> Result<f64, Errno> {
        match item {
            "apple" => Ok(0.5 * count as f64),
            _ => Err(Errno(hostcall_abi::errno::ENOENT)),
        }
    }
}

#[test]
fn declared_services_and_closures_are_traced_decoded() {
    log::set_logger(&Keep).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let mut host = quiet()
        .trace(true)
        .serve::<dyn Shop, _>(HostShop)
        .build()
        .unwrap();
    let twice = host.hostcall(|x: i32| x * 2);
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Shop>::SERVICES)
        .kernel("k", |t: &EmuThread| {
            let shop = t.client::<dyn Shop>();
            assert_eq!(shop.price("apple", 3), Ok(1.5));
            assert_eq!(
                shop.price("pear", 1),
                Err(Errno(hostcall_abi::errno::ENOENT))
            );
            let KernelArg::U64(raw) = t.args[0] else {
                panic!()
            };
            assert_eq!(
                HostFn::<(i32,), i32>::from_raw(raw).call_on::<Emu>(t.channel(), (21,)),
                42
            );
            // std's own declared services are traced the same way, paths shown.
            let r = t.client::<dyn Fs>().openat(AT_FDCWD, b"/nowhere\x01", 0, 0);
            assert!(r.is_err());
        });
    let r = host
        .run(
            &mut m,
            &Launch::linear("k", 1, 2, vec![KernelArg::U64(twice.raw())]),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let lines = LINES.lock().unwrap();
    for thread in 0..2 {
        for want in [
            format!("block 0 thread {thread} Shop.price price(\"apple\", 3) -> Ok(1.5) Ok in "),
            format!("block 0 thread {thread} Shop.price price(\"pear\", 1) -> Err(ENOENT) Ok in "),
            format!("block 0 thread {thread} closure#1 (21,) -> 42 Ok in "),
            format!(
                "block 0 thread {thread} Fs.openat openat(-100, b\"/nowhere\\x01\", 0, 0) -> Err(EACCES) Ok in "
            ),
        ] {
            // The closure's name is its place among the host's named ids (Shop.price
            // took the first).
            assert!(
                lines.iter().any(|l| l.starts_with(&want)),
                "no line starting {want:?} in {lines:#?}"
            );
        }
    }
}
