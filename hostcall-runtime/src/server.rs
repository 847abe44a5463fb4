//! The hostcall server: consumer threads that poll the channel's ports, serve each lane
//! of a published packet and hand the port back (steps 4 of the protocol in
//! `hostcall_abi`). Port `p` belongs to consumer `p % consumers`, so no two host threads
//! ever serve one port.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostcall_abi::errno::{EINVAL, ENOSYS};
use hostcall_abi::{BULK_PER_LANE, LaneSlot, PORT_BULK, Port, Service, Status, WARP_SIZE};

use crate::services::{Call, Reply, ServiceTable};

/// The host's view of the channel: `len` ports from `base`.
#[derive(Clone, Copy)]
pub(crate) struct Ports {
    pub base: *mut Port,
    pub len: usize,
}

// SAFETY: the ports live in memory owned by the GPU module for the whole run; host threads
// access them only as the protocol allows (one consumer per port, atomics for the header).
unsafe impl Send for Ports {}
// SAFETY: as for Send.
unsafe impl Sync for Ports {}

/// Polls spin first, then yield, then sleep with a doubling delay up to
/// `MAX_IDLE_SLEEP`, so an idle GPU costs the host almost no CPU.
struct Backoff {
    idle: u32,
}

const SPIN_POLLS: u32 = 4096;
const YIELD_POLLS: u32 = 256;
const MAX_IDLE_SLEEP: Duration = Duration::from_micros(500);

impl Backoff {
    fn wait(&mut self) {
        self.idle = self.idle.saturating_add(1);
        if self.idle < SPIN_POLLS {
            std::hint::spin_loop();
        } else if self.idle < SPIN_POLLS + YIELD_POLLS {
            std::thread::yield_now();
        } else {
            let doublings = (self.idle - SPIN_POLLS - YIELD_POLLS).min(6);
            let sleep = Duration::from_micros(8 << doublings).min(MAX_IDLE_SLEEP);
            std::thread::sleep(sleep);
        }
    }
}

/// Running consumer threads.
pub(crate) struct Server {
    services: Arc<ServiceTable>,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts `consumers` threads serving `ports` with `services`; `trace` logs each call.
    pub fn start(
        ports: Ports,
        services: Arc<ServiceTable>,
        consumers: usize,
        trace: bool,
    ) -> std::io::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let consumers = consumers.clamp(1, ports.len.max(1));
        let spawned = (0..consumers)
            .map(|k| {
                let (stop, calls, services) = (stop.clone(), calls.clone(), services.clone());
                std::thread::Builder::new()
                    .name(format!("hostcall-{k}"))
                    .spawn(move || {
                        let mut backoff = Backoff { idle: 0 };
                        while !stop.load(Relaxed) {
                            let mut served = 0;
                            for p in (k..ports.len).step_by(consumers) {
                                served += serve_port(ports, p, &services, trace);
                            }
                            if served > 0 {
                                calls.fetch_add(served, Relaxed);
                                backoff.idle = 0;
                            } else {
                                backoff.wait();
                            }
                        }
                    })
            })
            .collect::<Vec<_>>();
        let mut server = Server {
            services,
            stop,
            calls,
            threads: Vec::new(),
        };
        for t in spawned {
            match t {
                Ok(t) => server.threads.push(t),
                Err(e) => {
                    server.stop(); // ends the consumers already started
                    return Err(e);
                }
            }
        }
        Ok(server)
    }

    /// The services the consumers dispatch to.
    pub fn services(&self) -> Arc<ServiceTable> {
        self.services.clone()
    }

    /// Stops the consumers and returns how many lane calls they served.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Relaxed);
        for t in self.threads {
            // A consumer that panicked has already reported through the panic hook.
            let _ = t.join();
        }
        self.calls.load(Relaxed)
    }
}

/// One pass over every port after the consumers stopped (the launch has ended, so no
/// new request can appear); returns the lane calls served.
pub(crate) fn drain(ports: Ports, services: &ServiceTable, trace: bool) -> u64 {
    (0..ports.len)
        .map(|p| serve_port(ports, p, services, trace))
        .sum()
}

/// Serves port `p` if the GPU published a request on it; returns the lanes served.
fn serve_port(ports: Ports, p: usize, services: &ServiceTable, trace: bool) -> u64 {
    // SAFETY: `p < ports.len`; the header is accessed only through atomics.
    let port = unsafe { ports.base.add(p) };
    // SAFETY: as above.
    let header = unsafe { &(*port).header };
    let request = header.request.load(Acquire);
    if request == header.response.load(Relaxed) {
        return 0;
    }
    let mask = header.lane_mask.load(Relaxed);
    if mask == 0 {
        log::warn!("malformed packet on port {p}: empty lane mask; answered without serving");
    }
    let mut served = 0;
    let alone = mask.count_ones() == 1;
    for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
        // SAFETY: the GPU published the port (request != response, observed with acquire),
        // so until we store `response` its slots and bulk buffers are ours alone. A lone
        // lane's buffer is the port's whole bulk area, a shared packet's lane has its own.
        let (slot, bulk) = unsafe {
            let area = (&raw mut (*port).bulk).cast::<u8>();
            let bulk = if alone {
                std::slice::from_raw_parts_mut(area, PORT_BULK)
            } else {
                std::slice::from_raw_parts_mut(area.add(lane * BULK_PER_LANE), BULK_PER_LANE)
            };
            (
                &mut *(&raw mut (*port).lanes).cast::<LaneSlot>().add(lane),
                bulk,
            )
        };
        serve_lane(slot, bulk, services, trace);
        served += 1;
    }
    header.response.store(request, Release);
    served
}

fn serve_lane(slot: &mut LaneSlot, bulk: &mut [u8], services: &ServiceTable, trace: bool) {
    let started = trace.then(Instant::now);
    let mut call = Call {
        service: slot.service,
        block: slot.block,
        thread: slot.thread,
        args: slot.args,
        bulk,
    };
    let name = Service::from_id(slot.service).map_or("custom", Service::name);
    let (status, reply) = match services.get(slot.service) {
        None => {
            log::warn!(
                "unknown hostcall service id {} from GPU thread (block {}, thread {}): answered ENOSYS",
                slot.service,
                slot.block,
                slot.thread
            );
            (Status::UnknownService, Reply::errno(ENOSYS))
        }
        Some(h) => match h.call(&mut call) {
            Ok(r) => (Status::Ok, r),
            Err(m) => {
                log::warn!(
                    "malformed {name} request from GPU thread (block {}, thread {}): {}",
                    slot.block,
                    slot.thread,
                    m.0
                );
                (Status::Malformed, Reply::errno(EINVAL))
            }
        },
    };
    if let Some(t) = started {
        log::info!(
            target: "hostcall",
            "block {} thread {} {name}#{}({:#x}, {:#x}, {:#x}) -> {} {:?} in {:.1?}",
            slot.block,
            slot.thread,
            slot.service,
            slot.args[0],
            slot.args[1],
            slot.args[2],
            reply.result,
            status,
            t.elapsed()
        );
    }
    slot.args[0] = reply.result as u64;
    slot.args[5] = reply.bulk_out.min(call.bulk.len()) as u64;
    // The status goes last: a lane that polls its own slot (see hostcall_client) takes
    // a non-pending status as "my results are there". x86-64 keeps stores in order;
    // this fence keeps the compiler from reordering them (the Release store of
    // `response` that follows orders them for the protocol proper).
    std::sync::atomic::compiler_fence(Ordering::Release);
    slot.status = status as u32;
}
