//! The transport under load, on the emulated backend: thousands of concurrent callers,
//! lockstep warps sharing packets, a channel with far fewer ports than callers, unknown
//! services and malformed requests.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{declared_id, run_on};
use hostcall_abi::std_services::{Fs, Lifecycle};
use hostcall_abi::{BULK_PER_LANE, PORT_BULK, Status};
use hostcall_client::{Request, fd_io};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Error, Host, Launch, Outcome, Unserved};

/// A value unique to (thread, iteration), so a lost, duplicated or crossed reply shows.
fn token(t: &EmuThread, i: u64) -> u64 {
    ((t.block as u64) << 40) | ((t.thread as u64) << 20) | i
}

fn quiet() -> hostcall_runtime::HostBuilder {
    Host::builder()
        .echo_output(false)
        .capture_output(true)
        .timeout(Duration::from_secs(120))
}

fn ping_kernel(iterations: u64, errors: Arc<AtomicU64>) -> impl Fn(&EmuThread) + Send + Sync {
    move |t| {
        for i in 0..iterations {
            let v = token(t, i);
            if t.channel().ping::<Emu>(v) != v {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[test]
fn thousands_of_concurrent_callers_get_their_own_results() {
    let errors = Arc::new(AtomicU64::new(0));
    let mut m =
        EmulatedModule::new(WarpMode::Independent).kernel("k", ping_kernel(4, errors.clone()));
    let host = quiet().ports(64).consumers(2).build().unwrap();
    let r = host
        .run(&mut m, &Launch::linear("k", 32, 64, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(errors.load(Ordering::Relaxed), 0, "replies lost or crossed");
    assert_eq!(r.calls, 32 * 64 * 4, "every call served exactly once");
}

#[test]
fn lockstep_warps_share_packets_and_keep_lanes_apart() {
    let errors = Arc::new(AtomicU64::new(0));
    let e = errors.clone();
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("k", move |t: &EmuThread| {
        // Every lane sends a different payload size through the same packet.
        let len = (t.thread as usize * 131) % BULK_PER_LANE;
        let data: Vec<u8> = (0..len).map(|i| (i as u32 ^ t.thread) as u8).collect();
        if fd_io::write::<Emu>(t.channel(), 1, &data) != len as i64 {
            e.fetch_add(1, Ordering::Relaxed);
        }
        for i in 0..4 {
            let v = token(t, i);
            if t.channel().ping::<Emu>(v) != v {
                e.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let host = quiet().ports(4).build().unwrap();
    let r = host
        .run(&mut m, &Launch::linear("k", 4, 64, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(errors.load(Ordering::Relaxed), 0);
    let expected: usize = (0..64u32)
        .map(|t| (t as usize * 131) % BULK_PER_LANE)
        .sum::<usize>()
        * 4;
    assert_eq!(r.stdout.len(), expected, "every lane's bytes arrived once");
}

#[test]
fn full_channel_makes_callers_wait_and_loses_nothing() {
    let errors = Arc::new(AtomicU64::new(0));
    let mut m =
        EmulatedModule::new(WarpMode::Independent).kernel("k", ping_kernel(10, errors.clone()));
    // 2 ports for 256 callers: nearly every call first finds the channel full.
    let host = quiet().ports(2).build().unwrap();
    let r = host
        .run(&mut m, &Launch::linear("k", 4, 64, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(errors.load(Ordering::Relaxed), 0);
    assert_eq!(r.calls, 4 * 64 * 10);
}

/// Under `Unserved::Enosys` (the default halts the run: `user_services.rs`).
#[test]
fn unknown_service_is_an_error_for_the_caller_and_the_server_carries_on() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let reply = t
            .channel()
            .call::<Emu>(4242, [1, 2, 3, 0, 0, 0], &[], &mut [], None);
        let after = t.channel().ping::<Emu>(7);
        s.lock().unwrap().push((reply.status, reply.result, after));
    });
    let r = quiet()
        .unserved(Unserved::Enosys)
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 3, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for &(status, result, after) in seen.iter() {
        assert_eq!(status, Status::UnknownService);
        assert_eq!(result, -(hostcall_abi::errno::ENOSYS as i64));
        assert_eq!(
            after, 7,
            "the server still answers after an unknown service"
        );
    }
}

#[test]
fn malformed_request_is_rejected_and_the_server_carries_on() {
    let ((status, result, good), r) = run_on(quiet(), 1, |ch, _| {
        // `Fs.write` to stdout claiming to send more bytes than a bulk buffer holds.
        let write = declared_id(<dyn Fs>::SERVICES, "Fs.write");
        let args = [PORT_BULK as u64 + 1, 1, 1, 0, 0, 0];
        let bad = ch.call::<Emu>(write, args, b"x", &mut [], None);
        let good = fd_io::write::<Emu>(ch, 1, b"still here\n");
        (bad.status, bad.result, good)
    });
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(status, Status::Malformed);
    assert_eq!(result, -(hostcall_abi::errno::EINVAL as i64));
    assert_eq!(good, 11);
    assert_eq!(
        r.stdout, b"still here\n",
        "nothing of the malformed write reached stdout"
    );
}

#[test]
fn embedder_services_are_reached_by_id() {
    struct Double;
    impl Handler for Double {
        fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
            Ok(Reply::value(call.args[0] as i64 * 2))
        }
    }
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let r = t
            .channel()
            .call::<Emu>(1000, [21, 0, 0, 0, 0, 0], &[], &mut [], None);
        g.store(r.result as u64, Ordering::Relaxed);
    });
    let host = quiet().service(1000, Arc::new(Double)).build().unwrap();
    host.run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(got.load(Ordering::Relaxed), 42);
}

#[test]
fn a_module_of_another_abi_version_is_refused() {
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .with_abi_version(999)
        .kernel("k", |_: &EmuThread| {});
    let err = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap_err();
    assert!(matches!(err, Error::AbiMismatch { module: 999, .. }));
    assert!(err.to_string().contains("ABI 999"), "{err}");
}

#[test]
fn a_kernel_that_never_ends_times_out_instead_of_hanging() {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |_: &EmuThread| {
        std::thread::sleep(Duration::from_secs(3))
    });
    let host = quiet().timeout(Duration::from_millis(200)).build().unwrap();
    let err = host
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { kernel, still_running: true, in_flight, .. } if kernel == "k" && in_flight.is_empty()),
        "{err}"
    );
    assert!(
        err.to_string().contains("kernel `k` was stopped after"),
        "{err}"
    );
}

#[test]
fn a_missing_kernel_is_named() {
    let mut m = EmulatedModule::new(WarpMode::Independent);
    let err = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("nope", 1, 1, vec![]))
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

/// Posts `lines` lines per thread, each naming its ticket, and checks the host wrote
/// every ticket exactly once and in order.
fn posted_lines_come_out_in_ticket_order(mode: WarpMode, blocks: u32, threads: u32, lines: u64) {
    let tickets = Arc::new(AtomicU64::new(0));
    let t2 = tickets.clone();
    let mut m = EmulatedModule::new(mode).kernel("k", move |t: &EmuThread| {
        for _ in 0..lines {
            // Take the ticket and post under one lock, as std's stdout lock does.
            let line = format!(
                "ticket {} from {} {}\n",
                t2.load(Ordering::Relaxed),
                t.block,
                t.thread
            );
            let r = fd_io::write_posted::<Emu>(t.channel(), 1, line.as_bytes(), &t2);
            assert_eq!(r, line.len() as i64);
        }
    });
    let r = quiet()
        .ports(8)
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", blocks, threads, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let out = String::from_utf8(r.stdout).unwrap();
    let total = blocks as u64 * threads as u64 * lines;
    assert_eq!(out.lines().count() as u64, total);
    assert_eq!(tickets.load(Ordering::Relaxed), total);
    assert_eq!(r.calls, total);
    // Tickets were taken concurrently (the text's number may repeat); the order the host
    // wrote must be the ticket order, which is the order the data was posted in.
    let mut seen = std::collections::HashSet::new();
    for l in out.lines() {
        assert!(
            seen.insert(l.split(" from ").nth(1).unwrap().to_owned() + l),
            "a line twice: {l}"
        );
    }
}

#[test]
fn posted_writes_keep_ticket_order_with_one_lane_packets() {
    posted_lines_come_out_in_ticket_order(WarpMode::Independent, 8, 32, 4);
}

#[test]
fn posted_writes_keep_ticket_order_in_shared_packets() {
    posted_lines_come_out_in_ticket_order(WarpMode::Lockstep, 2, 64, 4);
}

#[test]
fn a_line_posted_just_before_a_trap_still_arrives() {
    let tickets = Arc::new(AtomicU64::new(0));
    let t2 = tickets.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        fd_io::write_posted::<Emu>(t.channel(), 2, b"panicked: last words\n", &t2);
        t.client::<dyn Lifecycle>().abort();
        t.trap();
    });
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(
        r.outcome,
        Outcome::Aborted {
            gpu: None,
            block: 0,
            thread: 0,
            panicked: false,
        }
    );
    assert_eq!(r.stderr, b"panicked: last words\n");
}

/// Lanes of divergent warps (random `activemask` groups, mask-matched barriers, exits
/// counted as arrival, random delays) mix posted stdout lines with token-checked pings,
/// the posted flag varying by lane and iteration: every ping must come back to its own
/// lane, every line must arrive once, and the launch must end.
#[test]
fn divergent_warps_mixing_posted_lines_and_waiting_calls_get_their_own_replies() {
    const ITERATIONS: u64 = 6;
    for seed in 0..3 {
        let errors = Arc::new(AtomicU64::new(0));
        let tickets = Arc::new(AtomicU64::new(0));
        let (e, t2) = (errors.clone(), tickets.clone());
        let mut m =
            EmulatedModule::new(WarpMode::Divergent { seed }).kernel("k", move |t: &EmuThread| {
                // Lanes leave after different numbers of calls: exits count as arrival.
                for i in 0..ITERATIONS - (t.thread as u64 % 3) {
                    let posted = (t.thread as u64 * 7 + i).is_multiple_of(3);
                    let line = format!("line {} {} {i}\n", t.block, t.thread);
                    let v = token(t, i);
                    let request = if posted {
                        fd_io::posted_write_request(1, line.as_bytes(), &t2, 1)
                    } else {
                        Request::ping(v)
                    };
                    // One call site; the posted flag varies by lane and iteration.
                    let r = t.channel().exchange::<Emu>(request);
                    if !posted && (r.status, r.result as u64) != (Status::Ok, v) {
                        e.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        let host = quiet()
            .ports(3)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let r = host
            .run(&mut m, &Launch::linear("k", 2, 40, vec![]))
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(r.outcome, Outcome::Completed, "seed {seed}");
        assert_eq!(
            errors.load(Ordering::Relaxed),
            0,
            "seed {seed}: crossed replies"
        );
        let out = String::from_utf8(r.stdout).unwrap();
        let mut expected = Vec::new();
        for b in 0..2u64 {
            for t in 0..40u64 {
                for i in (0..ITERATIONS - t % 3).filter(|i| (t * 7 + i).is_multiple_of(3)) {
                    expected.push(format!("line {b} {t} {i}"));
                }
            }
        }
        let mut got: Vec<&str> = out.lines().collect();
        got.sort_unstable();
        expected.sort_unstable();
        assert_eq!(got, expected, "seed {seed}: every posted line exactly once");
    }
}

/// A thread whose answer never comes gives up after the wait limit and the run says
/// which thread, port and sequence, instead of spinning until an outer timeout.
#[test]
fn a_wait_past_the_limit_ends_the_launch_naming_thread_port_and_sequence() {
    struct Stall;
    impl Handler for Stall {
        fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
            std::thread::sleep(Duration::from_millis(1500));
            Ok(Reply::value(0))
        }
    }
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        t.channel().ping::<Emu>(1);
        t.channel().call::<Emu>(900, [0; 6], &[], &mut [], None);
    });
    let host = quiet()
        .ports(1)
        .service(900, Arc::new(Stall))
        .wait_limit(Duration::from_millis(200))
        .build()
        .unwrap();
    let r = host
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    let Outcome::Faulted(why) = &r.outcome else {
        panic!("expected a fault, got {:?}", r.outcome)
    };
    assert!(
        why.contains("GPU thread (block 0, thread 0) gave up")
            && why.contains("no answer on port 0 for sequence 2"),
        "{why}"
    );
}
