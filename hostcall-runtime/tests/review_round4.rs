//! Review of issue 47's F3 (a posted piece held back for a stalled stdout marks its
//! port, `PortHeader::held`) and F8 (calls that only take time are parked after
//! `TAKES_TIME_PARK_AFTER_NS`): scenarios that break their promises. Each test fails on
//! the commit it reviews. A test binary of its own: the stall test makes the process's
//! stdout a pipe it reads itself.

mod common;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{quiet, within};
use hostcall_abi::Status;
use hostcall_client::{Request, fd_io};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Host, Launch, Outcome};

/// The tests that take the process's stdout take it in turn.
static STDOUT: Mutex<()> = Mutex::new(());

/// F3: the fix relies on printers not filling every port: a printer whose *home* port
/// (the first `acquire` tries) holds a held-back piece comes back unsent and waits
/// elsewhere. But every printer whose home port is free posts there. With four printers
/// on a channel of four ports (three that are not continuation ports, and the four
/// printers' home ports cover all three), every port a ping may take ends up holding a
/// held-back piece, and the ping waits for the whole stall: "a stalled reader holds up
/// only the threads that print" does not hold once the printing warps' home ports
/// cover the channel (with the default 128 ports, some 650 printing warps; any
/// GPU program whose warps all print).
#[test]
fn four_printers_on_four_ports_leave_no_port_to_a_thread_that_never_prints() {
    printers_stall_a_ping(4, 4);
}

/// The same on the sixteen ports of `stdout_stall.rs`'s F3 test, with 36 printers
/// (one thread each) rather than its 8: their home ports cover the fifteen normal ones.
#[test]
fn thirty_six_printers_on_sixteen_ports_leave_no_port_to_a_thread_that_never_prints() {
    printers_stall_a_ping(16, 36);
}

/// `printers` one-thread blocks print 96 MiB to a stdout whose reader pauses 3 s, on
/// `ports` ports; another block pings every 5 ms meanwhile. Asserts that every piece
/// arrives and that no ping waited 200 ms.
fn printers_stall_a_ping(ports: usize, printers: u32) {
    let _stdout = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    TICKETS.store(0, SeqCst);
    // Each printer's 4 KiB pieces: 96 MiB in all, past the host's 64 MiB bound.
    let pieces: usize = (96 << 20) / 4096 / printers as usize;
    let mut piece = vec![b'x'; 4095];
    piece.push(b'\n');
    let (read, write) = rustix::pipe::pipe().unwrap();
    let saved: OwnedFd = rustix::io::dup(rustix::stdio::stdout()).unwrap();
    rustix::stdio::dup2_stdout(&write).unwrap();
    drop(write);
    // The reader pauses 3 s, then reads everything.
    let reading = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        let mut all = Vec::new();
        std::fs::File::from(read).read_to_end(&mut all).unwrap();
        all.split(|&b| b == b'\n')
            .filter(|l| l.len() == 4095 && l.iter().all(|&b| b == b'x'))
            .count()
    });
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    let s = slowest.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < printers {
            for _ in 0..pieces {
                fd_io::write_posted::<Emu>(ch, 1, &piece, &TICKETS);
            }
        } else {
            let until = Instant::now() + Duration::from_millis(3500);
            while Instant::now() < until {
                let t0 = Instant::now();
                assert_eq!(ch.ping::<Emu>(5), 5);
                let took = t0.elapsed();
                let mut s = s.lock().unwrap();
                *s = (*s).max(took);
                drop(s);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    let report = within(Duration::from_secs(90), "Host::run", move || {
        Host::builder()
            .ports(ports)
            .wait_limit(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", printers + 1, 1, vec![]))
            .unwrap()
    });
    rustix::stdio::dup2_stdout(&saved).unwrap();
    let got = reading.join().unwrap();
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    assert_eq!(got, printers as usize * pieces, "every piece arrived");
    let slowest = *slowest.lock().unwrap();
    assert!(
        slowest < Duration::from_millis(200),
        "a ping waited {slowest:?} while stdout was stalled"
    );
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

/// F3: `exchange_once` packs lanes by `posted` alone (`match_any(.., posted)`), and the
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

/// A file system that answers after `.0` (for ever, as far as the run can tell),
/// counting the calls it has begun.
struct HungMount(Duration, Arc<AtomicUsize>);

impl Handler for HungMount {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        self.1.fetch_add(1, SeqCst);
        std::thread::sleep(self.0);
        Ok(Reply::value(0))
    }
    fn can_block(&self, _: u32) -> bool {
        true
    }
    fn only_takes_time(&self, _: u32, _: &[u64; 6]) -> bool {
        true
    }
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

/// F8: reads on a hung mount are parked after 20 ms, and their ports freed, only while
/// the workers' queue has room (32 jobs per port). Past it (`wants_worker`), each further
/// read stays on its port, unserved, its thread waiting for its answer with the wait
/// limit: the hung mount holds every port again, and a thread that never touches it
/// waits for a port. Two ports (one normal), one worker, 70 threads reading a mount
/// that hangs for 6 s: the 66th read's packet stays on the one port, and a ping made
/// 2 s in waits for the mount (or a thread gives up at the wait limit and the launch
/// traps).
#[test]
fn reads_on_a_hung_mount_past_the_workers_queue_leave_the_ports_to_other_calls() {
    const HUNG: u32 = 70;
    const READ: u32 = 30;
    let ping = Arc::new(Mutex::new(None));
    let p = ping.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < HUNG {
            ch.call::<Emu>(READ, [0; 6], &[], &mut [], None);
            return;
        }
        std::thread::sleep(Duration::from_millis(2000));
        let t0 = Instant::now();
        assert_eq!(ch.ping::<Emu>(7), 7);
        *p.lock().unwrap() = Some(t0.elapsed());
    });
    let host = quiet()
        .ports(2)
        .blocking_threads(1)
        .wait_limit(Duration::from_secs(20))
        .timeout(Duration::from_secs(30))
        .service(
            READ,
            Arc::new(HungUntil(Instant::now() + Duration::from_secs(6))),
        );
    let report = within(Duration::from_secs(60), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", HUNG + 1, 1, vec![]))
            .unwrap()
    });
    let took = *ping.lock().unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Completed,
        "ping: {took:?}; {report:?}"
    );
    let took = took.expect("the ping was answered");
    assert!(
        took < Duration::from_secs(1),
        "the ping waited {took:?} for the hung mount"
    );
}

/// F8, the workers: a call that only takes time runs on one of the pool's workers (4
/// by default), parked or not. Four reads on a hung mount take all four, and a read of
/// a healthy file by another thread, which takes a millisecond, waits in the queue
/// behind them for as long as the mount hangs: its port is freed after 20 ms, but the
/// thread itself hangs, where Linux would have answered it at once.
#[test]
fn reads_on_a_hung_mount_leave_a_worker_to_other_files() {
    const HUNG: u32 = 4;
    const READ: u32 = 30;
    const HEALTHY: u32 = 31;
    let healthy = Arc::new(Mutex::new(None));
    let h = healthy.clone();
    let begun = Arc::new(AtomicUsize::new(0));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let ch = t.channel();
        if t.block < HUNG {
            ch.call::<Emu>(READ, [0; 6], &[], &mut [], None);
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        ch.call::<Emu>(HEALTHY, [0; 6], &[], &mut [], None);
        *h.lock().unwrap() = Some(t0.elapsed());
    });
    let host = quiet()
        .ports(8)
        .timeout(Duration::from_secs(30))
        .service(
            READ,
            Arc::new(HungMount(Duration::from_secs(4), begun.clone())),
        )
        .service(
            HEALTHY,
            Arc::new(HungMount(
                Duration::from_millis(1),
                Arc::new(AtomicUsize::new(0)),
            )),
        );
    let report = within(Duration::from_secs(60), "Host::run", move || {
        host.build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", HUNG + 1, 1, vec![]))
            .unwrap()
    });
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    let took = healthy
        .lock()
        .unwrap()
        .expect("the healthy read was answered");
    assert!(
        took < Duration::from_secs(1),
        "a read of a healthy file waited {took:?} behind the hung mount"
    );
}
