//! Services whose calls may keep the host waiting, through the real device half of the
//! transport on the emulated backend: declared ones that say so (`, blocks`, `, waits`),
//! embedders' handlers that may block, posted calls of them, and which calls keep their
//! port while they wait.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::{quiet, within};
use hostcall_abi::Status;
use hostcall_abi::park::TAKES_TIME_PARK_AFTER_NS;
use hostcall_client::{Request, fd_io, service};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Launch, Outcome};

service! {
    /// A meeting point: each call returns once as many calls as the host's barrier
    /// counts have come, so every call waits on the others.
    pub trait Meet {
        /// Waits for the others; returns `x`. The declaration says it waits on them.
        fn meet(&self, x: u32) -> u32, waits;
        /// The same, declared as one that only blocks: it shares the pool's workers.
        fn meet_blocking(&self, x: u32) -> u32, blocks;
    }
}

struct HostMeet(Barrier);

impl Meet for HostMeet {
    fn meet(&self, x: u32) -> u32 {
        self.0.wait();
        x
    }
    fn meet_blocking(&self, x: u32) -> u32 {
        self.0.wait();
        x
    }
}

/// Runs four GPU threads of four warps that all call `meet` (or `meet_blocking`) on a
/// host with one consumer thread and one blocking-pool worker; returns whether all four
/// met within the run's 3 s.
fn four_meet(waits: bool) -> bool {
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Meet>::SERVICES)
        .kernel("k", move |t: &EmuThread| {
            let c = t.client::<dyn Meet>();
            let x = t.block;
            let got = if waits { c.meet(x) } else { c.meet_blocking(x) };
            assert_eq!(got, x);
        });
    let host = quiet()
        .consumers(1)
        .blocking_threads(1)
        .timeout(Duration::from_secs(3))
        .serve::<dyn Meet, _>(HostMeet(Barrier::new(4)));
    let run = host
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 4, 1, vec![]));
    matches!(run, Ok(r) if r.outcome == Outcome::Completed)
}

/// A declared method that says `waits` is served on a pool worker of its own for each
/// call, so four calls waiting on each other all meet on a host with one pool worker and
/// one consumer. One declared `blocks` (it only takes time) shares the workers; four
/// such calls that wait on each other (a declaration that does not say how the call
/// waits) meet all the same, once each queued call has waited 20 ms for the busy worker
/// and the pool has started one for it. Before declarations said how they wait, every
/// user-declared call ran on the thread that polled it; before the pool started workers
/// for stuck jobs, the four `blocks` calls never met.
#[test]
fn a_declared_method_that_waits_on_others_gets_a_worker_of_its_own() {
    assert!(four_meet(true), "calls declared `waits` meet");
    assert!(
        four_meet(false),
        "calls declared `blocks` that wait on each other meet too"
    );
}

/// A posted call of a service that may block. Its packet went to the
/// blocking pool with `response` already stored, so the port's next owner went ahead,
/// and the job's late answer landed on the next call's answer word (a `ForeignAnswer`
/// trap). The port now stays the job's until it has answered.
#[test]
fn a_posted_call_of_a_blocking_service_leaves_the_next_call_its_answer() {
    struct Slow;
    impl Handler for Slow {
        fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
            std::thread::sleep(std::time::Duration::from_millis(100));
            Ok(Reply::value(call.args[0] as i64 + 1000))
        }
        fn can_block(&self, _: u32) -> bool {
            true
        }
    }
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        for i in 0..3 {
            ch.post::<Emu>(12, [i, 0, 0, 0, 0, 0], &[], None);
            g.lock().unwrap().push(ch.ping::<Emu>(i));
        }
    });
    let r = quiet()
        .ports(1)
        .service(12, Arc::new(Slow))
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    assert_eq!(*got.lock().unwrap(), [0, 1, 2]);
}

/// A service that may block whose calls wait for each other: each returns once the
/// barrier's count of calls have come.
struct Rendezvous(std::sync::Barrier);

impl Handler for Rendezvous {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        self.0.wait();
        Ok(Reply::value(call.args[0] as i64))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
}

/// An embedder's service that may block, called by two lanes of one
/// warp at once, each waiting for the other (a rendezvous). The packet went to one pool
/// job that served its lanes one after the other: the first waited for ever for the
/// second, queued behind it. Each lane is a job of its own now.
#[test]
fn lanes_of_one_packet_calling_a_blocking_service_are_served_apart() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("k", move |t: &EmuThread| {
        let r =
            t.channel()
                .call::<Emu>(13, [u64::from(t.thread), 0, 0, 0, 0, 0], &[], &mut [], None);
        g.lock().unwrap().push(r.result);
    });
    let run = common::within(std::time::Duration::from_secs(30), "Host::run", move || {
        quiet()
            .service(13, Arc::new(Rendezvous(std::sync::Barrier::new(2))))
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, 2, vec![]))
            .map(|r| r.outcome)
            .map_err(|e| e.to_string())
    });
    assert_eq!(run, Ok(Outcome::Completed));
    let mut got = got.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got, [0, 1]);
}

/// A service whose calls may block and take `.0` milliseconds, counting its calls.
struct Slow(u64, Arc<AtomicUsize>);

impl Handler for Slow {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        std::thread::sleep(Duration::from_millis(self.0));
        self.1.fetch_add(1, SeqCst);
        Ok(Reply::value(call.args[0] as i64))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
}

/// A posted call of a service that may block was parked like a waiting one once it
/// took 100 µs: its ticket was never collected, since nobody waits for it, and its port
/// stayed held until it ended. Two such calls took both wake words of a two-thread
/// launch, so the rendezvous that follows on the one port could not be parked: its
/// first caller kept the port, its second never got one (`hostcall-model`'s holding
/// host finds both). A posted lane handed off now holds nothing.
#[test]
fn posted_calls_of_a_blocking_service_leave_the_wake_words_and_ports_to_waiting_calls() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.thread == 0 {
            for i in 0..2 {
                ch.post::<Emu>(12, [i, 0, 0, 0, 0, 0], &[], None);
            }
            std::thread::sleep(Duration::from_millis(100));
        } else {
            std::thread::sleep(Duration::from_millis(300));
        }
        let r = ch.call::<Emu>(13, [t.thread as u64, 0, 0, 0, 0, 0], &[], &mut [], None);
        g.lock().unwrap().push(r.result);
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let host = quiet()
        .ports(1)
        .timeout(Duration::from_secs(5))
        .service(12, Arc::new(Slow(5, calls.clone())))
        .service(13, Arc::new(Rendezvous(std::sync::Barrier::new(2))));
    let r = common::within(Duration::from_secs(10), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, 2, vec![]))
            .unwrap()
    });
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    let mut got = got.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [0, 1]);
    assert_eq!(calls.load(SeqCst), 2);
}

/// Posted calls of a service that may block, made just before the kernel ends: the
/// run's end dropped the pool's queued jobs, so with one pool thread all but one were
/// never served. The end now serves them (within its time limit).
#[test]
fn posted_calls_of_a_blocking_service_made_as_the_kernel_ends_are_served() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        t.channel()
            .post::<Emu>(12, [t.thread as u64, 0, 0, 0, 0, 0], &[], None);
    });
    let r = quiet()
        .ports(8)
        .blocking_threads(1)
        .service(12, Arc::new(Slow(20, calls.clone())))
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 8, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    assert_eq!(calls.load(SeqCst), 8);
}

/// A service whose calls may block and take 300 ms, and say whether they only take
/// time (`Handler::only_takes_time`).
struct Lasting(bool);

impl Handler for Lasting {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        std::thread::sleep(Duration::from_millis(300));
        Ok(Reply::value(0))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
    fn only_takes_time(&self, _: u32, _: &[u64; 6]) -> bool {
        self.0
    }
}

/// A service answered at once.
struct Quick;

impl Handler for Quick {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        Ok(Reply::value(1))
    }
}

/// On a channel of one port, thread 1's quick call, made 5 ms into thread 0's call of
/// `lasting` (300 ms): whether it is answered before that call is, and how long after
/// that call began.
fn quick_call(lasting: Lasting) -> (bool, Duration) {
    let order = Arc::new(Mutex::new(Vec::new()));
    let began = Arc::new(Mutex::new(None));
    let (o, b) = (order.clone(), began.clone());
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        if t.thread == 0 {
            *b.lock().unwrap() = Some(Instant::now());
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        let service = if t.thread == 0 { 14 } else { 15 };
        t.channel().call::<Emu>(service, [0; 6], &[], &mut [], None);
        o.lock().unwrap().push((t.thread, Instant::now()));
    });
    let host = quiet()
        .ports(1)
        .timeout(Duration::from_secs(10))
        .service(14, Arc::new(lasting))
        .service(15, Arc::new(Quick));
    let r = common::within(Duration::from_secs(20), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, 2, vec![]))
            .unwrap()
    });
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), 2);
    let began = began.lock().unwrap().expect("thread 0 called");
    let quick = order
        .iter()
        .find(|(t, _)| *t == 1)
        .expect("thread 1 answered");
    (order[0].0 == 1, quick.1 - began)
}

/// A call that may block is parked once it has waited 100 µs, its port freed for other
/// calls; one that only takes time (a regular file's write) keeps its port for 20 ms
/// (`TAKES_TIME_PARK_AFTER_NS`), since a parked call's wake-up and collection cost it
/// (an 8 MiB file write's throughput fell by 40 % on the H100 when every one was
/// parked), and is parked after that (a hung mount must not hold the port).
#[test]
fn a_call_that_only_takes_time_keeps_its_port_a_while_and_any_other_gives_it_back() {
    let (first, _) = quick_call(Lasting(false));
    assert!(
        first,
        "the port of a call that may wait serves others meanwhile"
    );
    let (first, after) = quick_call(Lasting(true));
    let kept = Duration::from_nanos(TAKES_TIME_PARK_AFTER_NS);
    assert!(
        after >= kept,
        "a call that only takes time keeps its port {kept:?}: the quick call was answered {after:?} after it began"
    );
    assert!(first, "then it gives the port back");
}

/// A service that may block: each call waits until `open` (or 10 s), counting itself.
struct Gate {
    open: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

impl Handler for Gate {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        let until = Instant::now() + Duration::from_secs(10);
        while !self.open.load(SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.calls.fetch_add(1, SeqCst);
        Ok(Reply::value(0))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
}

/// A service answered at once, counting its calls.
struct Counted(Arc<AtomicUsize>);

impl Handler for Counted {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        self.0.fetch_add(1, SeqCst);
        Ok(Reply::value(0))
    }
}

/// `exchange_once` packed lanes by `posted` alone (`match_any(.., posted)`), and the
/// leader alone decides `unsent_if_held` for the packet. Two lanes of one warp post at
/// once: lane 0 a line to stdout (`unsent_if_held`), lane 1 a posted call of another
/// service (`Channel::post`'s kind of request, `unsent_if_held: false`). The one normal
/// port holds a posted packet held back (the workers' queue is full: `wants_worker`,
/// which marks the port too). The leader's `acquire` returns `None`, so lane 1 comes
/// back `-EAGAIN`, unsent, though nothing in its request asked for that and its caller
/// does not look for it: its call is lost (`Channel::post` returns `usize::MAX - 10`
/// as "the bytes that went").
#[test]
fn a_posted_call_in_a_packet_led_by_a_stdout_write_is_not_dropped() {
    let open = Arc::new(AtomicBool::new(false));
    let gate_calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::new(AtomicUsize::new(0));
    let lane1 = Arc::new(AtomicI64::new(i64::MIN));
    let tickets = Arc::new(AtomicU64::new(0));
    let (o, l1, tk) = (open.clone(), lane1.clone(), tickets.clone());
    /// Posted calls of `Gate`: past the workers' queue (32 per port, two ports).
    const FILL: u64 = 80;
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block == 1 {
            // Both lanes post together: packets of two calls.
            for i in 0..FILL / 2 {
                ch.post::<Emu>(12, [i, 0, 0, 0, 0, 0], &[], None);
            }
            return;
        }
        // Block 0: two lanes that post together once the port is held back.
        std::thread::sleep(Duration::from_millis(500));
        let line = b"lane 0's line\n";
        let request = if t.thread == 0 {
            fd_io::posted_write_request(1, line, &tk, 1)
        } else {
            Request {
                posted: true,
                ..Request::bare(13, [7, 0, 0, 0, 0, 0])
            }
        };
        let reply = ch.exchange::<Emu>(request);
        if t.thread == 0 {
            // Lane 0 handles its unsent reply as libc does; it waits for the gate.
            let opener = o.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                opener.store(true, SeqCst);
            });
            fd_io::post_or_wait::<Emu>(ch, reply, 1, line, &tk);
        } else {
            assert_eq!(reply.status, Status::Ok);
            l1.store(reply.result, SeqCst);
        }
    });
    let host = quiet()
        .ports(2)
        .blocking_threads(1)
        .timeout(Duration::from_secs(20))
        .service(
            12,
            Arc::new(Gate {
                open: open.clone(),
                calls: gate_calls.clone(),
            }),
        )
        .service(13, Arc::new(Counted(counted.clone())));
    let r = within(Duration::from_secs(40), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 2, 2, vec![]))
            .unwrap()
    });
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    assert_eq!(
        gate_calls.load(SeqCst),
        FILL as usize,
        "every gate call ran"
    );
    assert_eq!(r.stdout, b"lane 0's line\n");
    let result = lane1.load(SeqCst);
    assert_eq!(
        (counted.load(SeqCst), result),
        (1, 0),
        "lane 1's posted call ran (calls, its reply's result)"
    );
}
