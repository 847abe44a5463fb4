//! `serve_cost`: the host's cost of serving one lane, in nanoseconds, for the null call
//! (std's `Ping`) and beside it a typed call of a declared service and of a host closure
//! (`hostcall_bench`'s typed rows), measured in the same run on one thread through a port
//! in host memory (no GPU: the consumer's work alone).
//! `cargo run --release -p hostcall-fuzz --bin serve_cost`.

use std::time::{Duration, Instant};

use hostcall_abi::typed::{Encoder, NAMED_IDS, closure_fingerprint};
use hostcall_abi::{LaneSlot, Service};
use hostcall_runtime::Host;
use hostcall_runtime::fuzzing::PortBench;

hostcall_client::service! {
    /// The typed call measured: a value in, the same value out.
    pub trait Echo {
        /// Returns `x`.
        fn echo(&self, x: u32) -> u32;
    }
}

struct HostEcho;

impl Echo for HostEcho {
    fn echo(&self, x: u32) -> u32 {
        x
    }
}

/// Packets of 32 lanes served per round.
const PACKETS: u32 = 200_000;

/// The best of five rounds of `PACKETS` packets of 32 lanes calling `service` with
/// `args`: nanoseconds per lane.
fn per_lane(bench: &mut PortBench, service: u32, args: [u64; 6]) -> f64 {
    (0..5)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..PACKETS {
                let seq = bench.next_seq();
                for lane in 0..32 {
                    let slot = LaneSlot {
                        service,
                        seq,
                        block: 0,
                        thread: lane as u32,
                        args,
                    };
                    bench.write_slot(lane, slot);
                }
                let served =
                    bench.publish_and_serve(u32::MAX, u32::MAX, Duration::from_secs(1), &mut || {});
                assert!(served, "a packet was not answered");
            }
            started.elapsed().as_nanos() as f64 / (PACKETS as f64 * 32.0)
        })
        .fold(f64::MAX, f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut host = Host::builder()
        .echo_output(false)
        .capture_output(true)
        .serve::<dyn Echo, _>(HostEcho)
        .build()?;
    let closure = host.hostcall(|x: u64| x);
    let mut bench = PortBench::with_host(host)?;
    let null = per_lane(&mut bench, Service::Ping as u32, [7, 0, 0, 0, 0, 0]);
    // The first by-name id is Echo.echo's; its fixed part is `x` in args[1].
    let typed = per_lane(&mut bench, NAMED_IDS.start, [0, 7, 0, 0, 0, 0]);
    assert_eq!(
        bench.answer(0).and_then(|a| a.inline),
        Some(7),
        "echo answered 7"
    );
    // A closure's fixed part, as its GPU stub lays it out: its types' fingerprint, then
    // the arguments.
    let mut e = Encoder::<'_, 5>::default();
    e.plain(&(closure_fingerprint::<(u64,), u64>() as u32));
    e.plain(&7u64);
    let mut args = [0u64; 6];
    args[1..].copy_from_slice(&e.fixed_words());
    let closure = per_lane(&mut bench, closure.id(), args);
    assert_eq!(
        bench.answer(0).and_then(|a| a.inline),
        Some(7),
        "the closure answered 7"
    );
    println!(
        "serve_cost: null call {null:.1} ns per lane, typed call {typed:.1} ns, closure call {closure:.1} ns"
    );
    Ok(())
}
