//! Review findings that need a forged or concurrently rewritten port: what a hostile
//! kernel can do that the device half of the transport never would.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8};
use std::time::Duration;

use hostcall_abi::typed::{Answered, Arg, Encoder, bulk_len};
use hostcall_abi::{LaneSlot, Port, Service, Status};
use hostcall_client::std_services::Environment;
use hostcall_runtime::Host;
use hostcall_runtime::fuzzing::PortBench;

/// Publishes one lone-lane request with `input` in the bulk area; returns the answer's
/// status and result.
fn call(bench: &mut PortBench, service: u32, args: [u64; 6], input: &[u8]) -> (Status, i64) {
    let bulk = bulk(bench.port());
    for (i, b) in input.iter().enumerate() {
        // SAFETY: inside the port's bulk area.
        unsafe { &*bulk.add(i).cast::<AtomicU8>() }.store(*b, Relaxed);
    }
    let seq = bench.next_seq();
    bench.write_slot(
        0,
        LaneSlot {
            service,
            seq,
            block: 0,
            thread: 0,
            args,
        },
    );
    assert!(bench.publish_and_serve(1, 1, Duration::from_secs(10), &mut || {}));
    let a = bench.answer(0).expect("answered");
    let result = a.inline.unwrap_or(bench.slot(0).args[0] as i64);
    (a.status, result)
}

fn bulk(port: *mut Port) -> *mut u8 {
    // SAFETY: a field address inside the port.
    unsafe { (&raw mut (*port).bulk).cast::<u8>() }
}

/// Finding 2: a kernel that flips a granted variable's name to a secret one while the
/// host serves `getenv` never reads the secret: the name is copied out once, and the
/// copy is both checked and looked up.
#[test]
fn a_name_rewritten_during_getenv_never_reads_an_ungranted_variable() {
    // SAFETY: set before any other thread of this test binary reads them.
    unsafe {
        std::env::set_var("TOCTOU_A", "fine");
        std::env::set_var("TOCTOU_B", "secret");
    }
    let mut bench = PortBench::new(Host::builder().inherit_env("TOCTOU_A")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, last) = (stop.clone(), bulk(bench.port()) as usize + 7);
        std::thread::spawn(move || {
            let at = last as *const AtomicU8;
            while !stop.load(Relaxed) {
                for b in *b"AB" {
                    // SAFETY: the 8th byte of the bulk area; the bench outlives this
                    // thread (joined below).
                    unsafe { &*at }.store(b, Relaxed);
                }
            }
        })
    };
    // `Environment.getenv("TOCTOU_A", &mut [0; 64])` as its GPU stub sends it.
    let getenv = <dyn Environment>::SERVICES[0];
    assert_eq!(getenv.name, "Environment.getenv");
    let mut room = [0u8; 64];
    let mut e = Encoder::<'_, 5>::default();
    Arg::put(&b"TOCTOU_A"[..], &mut e);
    Arg::put(&mut room[..], &mut e);
    let mut args = [bulk_len(e.inputs()) as u64, 0, 0, 0, 0, 0];
    args[1..].copy_from_slice(&e.fixed_words());
    let (mut fine, mut refused) = (0, 0);
    for _ in 0..3000 {
        let (status, result) = call(&mut bench, getenv.id, args, b"TOCTOU_A");
        assert_eq!(status, Status::Ok);
        let words: [u64; 4] = bench.slot(0).args[1..5].try_into().unwrap();
        match Answered::decode::<usize>(result, Some(&words), &[]) {
            Ok(4) => fine += 1,
            Err(_) => refused += 1,
            Ok(n) => panic!("getenv returned {n} bytes: the ungranted value"),
        }
    }
    stop.store(true, Relaxed);
    flipper.join().unwrap();
    assert_eq!(fine + refused, 3000);
    assert!(fine > 0, "the granted name was never answered");
}

/// Finding 4: posted writes with tickets no device could send (far ahead, `u64::MAX`,
/// repeated) are refused as malformed instead of being held until the launch ends.
#[test]
fn forged_posted_tickets_are_malformed() {
    let mut bench = PortBench::new(Host::builder()).unwrap();
    let post = |bench: &mut PortBench, ticket: u64| {
        call(
            bench,
            Service::WritePosted as u32,
            [1, 4, ticket, 0, 0, 0],
            b"text",
        )
        .0
    };
    assert_eq!(post(&mut bench, 5), Status::Ok, "a little ahead: held");
    assert_eq!(
        post(&mut bench, 5),
        Status::Malformed,
        "the same ticket again"
    );
    assert_eq!(post(&mut bench, 1 << 40), Status::Malformed, "far ahead");
    assert_eq!(post(&mut bench, u64::MAX), Status::Malformed);
    assert_eq!(post(&mut bench, 0), Status::Ok);
    assert_eq!(post(&mut bench, 0), Status::Malformed, "already written");
    assert!(
        bench.held_bytes() <= 128,
        "only the held piece, charged its bookkeeping: {}",
        bench.held_bytes()
    );
}

/// Finding 2: an input length over the bulk buffer is malformed, and a stale slot (one
/// written for another sequence) is not served.
#[test]
fn lengths_and_sequences_are_checked_on_the_copy() {
    let mut bench = PortBench::new(Host::builder()).unwrap();
    let (status, _) = call(
        &mut bench,
        Service::WritePosted as u32,
        [1, 1 << 20, 0, 0, 0, 0],
        b"",
    );
    assert_eq!(status, Status::Malformed);
    let seq = bench.next_seq();
    bench.write_slot(
        0,
        LaneSlot {
            service: Service::Ping as u32,
            seq: seq.wrapping_add(3),
            block: 0,
            thread: 0,
            args: [0; 6],
        },
    );
    assert!(bench.publish_and_serve(1, 1, Duration::from_secs(10), &mut || {}));
    assert_eq!(bench.answer(0).unwrap().status, Status::Malformed);
}
