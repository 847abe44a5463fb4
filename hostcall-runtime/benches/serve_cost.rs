//! What serving costs the host per lane, on this CPU, through the real server and a port
//! in host memory: a full packet of null calls, a full packet of posted 48-byte lines,
//! and beside them the copy of each request's input into host memory alone (the price
//! of never reading a request twice). `cargo bench -p hostcall-runtime --features
//! fuzzing --bench serve_cost`.

use std::time::{Duration, Instant};

use hostcall_abi::{BULK_PER_LANE, LaneSlot, Service, WARP_SIZE};
use hostcall_runtime::Host;
use hostcall_runtime::fuzzing::PortBench;

const PACKETS: u32 = 20_000;
const LINE: &[u8] = b"block 1055 thread 255 sum 1234567890 checked ok\n";

/// Serves `PACKETS` full packets whose lane `l` of packet `k` is `slot(k, l)`; returns
/// nanoseconds per lane.
fn per_lane(bench: &mut PortBench, slot: &dyn Fn(u32, usize) -> LaneSlot) -> f64 {
    let started = Instant::now();
    for k in 0..PACKETS {
        let seq = bench.next_seq();
        for lane in 0..WARP_SIZE {
            bench.write_slot(
                lane,
                LaneSlot {
                    seq,
                    ..slot(k, lane)
                },
            );
        }
        assert!(bench.publish_and_serve(u32::MAX, u32::MAX, Duration::from_secs(5), &mut || {}));
    }
    started.elapsed().as_nanos() as f64 / (PACKETS as f64 * WARP_SIZE as f64)
}

fn main() {
    let mut bench = PortBench::new(Host::builder()).expect("a bench");
    let port = bench.port();
    for lane in 0..WARP_SIZE {
        for (i, b) in LINE.iter().enumerate() {
            // SAFETY: inside lane `lane`'s bulk buffer of the live port.
            unsafe {
                (&raw mut (*port).bulk)
                    .cast::<u8>()
                    .add(lane * BULK_PER_LANE + i)
                    .write_volatile(*b)
            };
        }
    }
    let null = per_lane(&mut bench, &|_, _| LaneSlot {
        service: Service::Ping as u32,
        args: [7, 0, 0, 0, 0, 0],
        ..LaneSlot::default()
    });
    let posted = per_lane(&mut bench, &|k, lane| LaneSlot {
        service: Service::WritePosted as u32,
        args: [
            1,
            LINE.len() as u64,
            (k as u64) * WARP_SIZE as u64 + lane as u64,
            0,
            0,
            0,
        ],
        ..LaneSlot::default()
    });
    let copy_line = bench.copy_in_ns(LINE.len(), 1_000_000);
    let copy_bulk = bench.copy_in_ns(BULK_PER_LANE, 100_000);
    println!("serve_null_call_ns_per_lane        {null:8.1} ns");
    println!(
        "serve_posted_line_ns_per_lane      {posted:8.1} ns   of which the {}-byte input copy {copy_line:.1} ns ({:.0}%)",
        LINE.len(),
        copy_line / posted * 100.0
    );
    println!(
        "copy_in_{BULK_PER_LANE}_bytes_ns             {copy_bulk:8.1} ns   ({:.1} GB/s)",
        BULK_PER_LANE as f64 / copy_bulk
    );
}
