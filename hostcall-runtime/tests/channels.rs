//! Channels and consumers on the emulated backend (AMD's hostcall buffers):
//! a launch's channel, with services of its own, is registered while another launch
//! runs and retired while it runs on; and no port is ever served by two consumer
//! threads at once.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::quiet;
use hostcall_abi::errno::ENOSYS;
use hostcall_abi::typed::Errno;
use hostcall_client::service;
use hostcall_client::typed::{CallHostFn, HostFn};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Error, KernelArg, Launch, Outcome, Unserved};

type Doubler = HostFn<(u64,), Result<u64, Errno>>;

/// Waits up to 20 s for `done`.
fn until(done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(20), "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Launch A calls the host until told to stop. While it runs, launch B starts with a
/// channel of its own that serves a doubling closure, calls it, and ends: its channel
/// is retired while A goes on being served. A then calls B's closure, which its own
/// channel never served: `ENOSYS`.
#[test]
fn a_channel_with_its_own_service_is_registered_and_retired_while_another_launch_runs() {
    let host = quiet().unserved(Unserved::Enosys).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let a_calls = Arc::new(AtomicU64::new(0));
    let doubler: Arc<Mutex<Option<u64>>> = Arc::default();
    let a_tried: Arc<Mutex<Option<Result<u64, Errno>>>> = Arc::default();
    let mut a = EmulatedModule::new(WarpMode::Independent).kernel("a", {
        let (stop, a_calls) = (stop.clone(), a_calls.clone());
        let (doubler, a_tried) = (doubler.clone(), a_tried.clone());
        move |t: &EmuThread| {
            while !stop.load(Acquire) {
                assert_eq!(t.channel().ping::<Emu>(5), 5);
                a_calls.fetch_add(1, Relaxed);
            }
            if t.thread == 0 {
                let raw = doubler.lock().unwrap().expect("B's closure");
                let tried = Doubler::from_raw(raw).call_on::<Emu>(t.channel(), (7,));
                *a_tried.lock().unwrap() = Some(tried);
            }
        }
    });
    let mut b = EmulatedModule::new(WarpMode::Independent).kernel("b", |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the closure's handle")
        };
        let x = u64::from(t.block * 8 + t.thread);
        assert_eq!(
            Doubler::from_raw(raw).call_on::<Emu>(t.channel(), (x,)),
            Ok(2 * x)
        );
    });
    host.scope(|s| {
        let running_a = s
            .launch(&mut a, &Launch::linear("a", 1, 4, vec![]))
            .unwrap();
        until(|| a_calls.load(Relaxed) > 100);

        let mut services = host.launch_services();
        let double = services.hostcall(|x: u64| -> Result<u64, Errno> { Ok(2 * x) });
        *doubler.lock().unwrap() = Some(double.raw());
        let launch_b = Launch::linear("b", 2, 8, vec![KernelArg::U64(double.raw())]);
        let b_report = s
            .launch_on(&mut b, &launch_b, services)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(b_report.outcome, Outcome::Completed);
        assert!(!running_a.is_finished(), "A ended with B");

        let after_b = a_calls.load(Relaxed);
        until(|| a_calls.load(Relaxed) > after_b + 100);
        stop.store(true, Release);
        let a_report = running_a.wait().unwrap();
        assert_eq!(a_report.outcome, Outcome::Completed);
    });
    assert_eq!(*a_tried.lock().unwrap(), Some(Err(Errno(ENOSYS))));
}

/// Counts the calls on each port by consumer thread, and calls that found their port
/// already being served.
#[derive(Default)]
struct Watch {
    inside: Mutex<BTreeSet<u32>>,
    overlaps: AtomicU64,
    served_by: Mutex<BTreeMap<u32, BTreeSet<String>>>,
}

impl Handler for Watch {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        if !self.inside.lock().unwrap().insert(call.port) {
            self.overlaps.fetch_add(1, Relaxed);
        }
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        self.served_by
            .lock()
            .unwrap()
            .entry(call.port)
            .or_default()
            .insert(name);
        // Long enough for another thread to come in, if one could.
        std::thread::sleep(Duration::from_micros(50));
        self.inside.lock().unwrap().remove(&call.port);
        Ok(Reply::value(call.args[0] as i64))
    }
}

/// 256 threads in warps of 32 call through 8 ports served by 3 consumer threads: each
/// port is served by one consumer only (`hostcall-{port % 3}`), never by two at once.
#[test]
fn a_port_is_served_by_one_consumer_thread_and_never_by_two_at_once() {
    let watch = Arc::new(Watch::default());
    let host = quiet()
        .ports(8)
        .consumers(3)
        .service(4000, watch.clone())
        .build()
        .unwrap();
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("k", |t: &EmuThread| {
        for i in 0..20 {
            let r = t
                .channel()
                .call::<Emu>(4000, [i, 0, 0, 0, 0, 0], &[], &mut [], None);
            assert_eq!(r.result, i as i64);
        }
    });
    let r = host
        .run(&mut m, &Launch::linear("k", 2, 128, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(watch.overlaps.load(Relaxed), 0);
    let served_by = watch.served_by.lock().unwrap();
    for (port, names) in served_by.iter() {
        let expected = BTreeSet::from([format!("hostcall-{}", port % 3)]);
        assert_eq!(*names, expected, "port {port}");
    }
    let consumers: BTreeSet<_> = served_by.values().flatten().collect();
    assert!(consumers.len() > 1, "one consumer served every port");
}

service! {
    /// Served by the host, and by one launch's channel otherwise.
    pub trait Greeting {
        /// Who answers.
        fn who(&self) -> u32;
    }
}

service! {
    /// Served by one launch's channel only.
    pub trait Seven {
        /// Seven.
        fn seven(&self) -> u32;
    }
}

struct Answer(u32);

impl Greeting for Answer {
    fn who(&self) -> u32 {
        self.0
    }
}

impl Seven for Answer {
    fn seven(&self) -> u32 {
        self.0
    }
}

/// A module whose kernel records what `Greeting.who` (and, with `seven`, `Seven.seven`)
/// answered.
fn greeter(seven: bool, into: &Arc<Mutex<Vec<u32>>>) -> EmulatedModule {
    let into = into.clone();
    let m = EmulatedModule::new(WarpMode::Independent).uses(<dyn Greeting>::SERVICES);
    let m = if seven {
        m.uses(<dyn Seven>::SERVICES)
    } else {
        m
    };
    m.kernel("k", move |t: &EmuThread| {
        let mut got = vec![t.client::<dyn Greeting>().who()];
        if seven {
            got.push(t.client::<dyn Seven>().seven());
        }
        into.lock().unwrap().extend(got);
    })
}

/// Declared services of a channel: one replaces the host's for its launch only, another
/// the host does not serve at all, and a module calling that one is refused at load
/// anywhere else.
#[test]
fn a_channels_declared_services_serve_its_launch_only() {
    let host = quiet().serve::<dyn Greeting, _>(Answer(1)).build().unwrap();
    let launch = Launch::linear("k", 1, 2, vec![]);
    let (host_got, own_got) = (Arc::default(), Arc::default());
    let (mut plain, mut own) = (greeter(false, &host_got), greeter(true, &own_got));
    let mut refused = greeter(true, &Arc::default());
    host.scope(|s| {
        let services = host
            .launch_services()
            .serve::<dyn Greeting, _>(Answer(2))
            .serve::<dyn Seven, _>(Answer(7));
        let own_run = s.launch_on(&mut own, &launch, services).unwrap();
        let plain_run = s.launch(&mut plain, &launch).unwrap();
        assert_eq!(own_run.wait().unwrap().outcome, Outcome::Completed);
        assert_eq!(plain_run.wait().unwrap().outcome, Outcome::Completed);
        match s.launch(&mut refused, &launch).unwrap().wait() {
            Err(Error::Service(why)) => assert!(why.contains("Seven.seven"), "{why}"),
            other => panic!("{other:?}"),
        }
    });
    assert_eq!(*host_got.lock().unwrap(), [1, 1]);
    let mut own_got = own_got.lock().unwrap().clone();
    own_got.sort();
    assert_eq!(own_got, [2, 2, 7, 7]);
}
