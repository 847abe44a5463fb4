//! The hostcall server: consumer threads that poll the channel's ports, serve each lane
//! of a published packet and answer it (step 5 of the protocol in `hostcall_abi`). Port `p` belongs to consumer `p % consumers`, so no two host threads
//! ever serve one port.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostcall_abi::answer::Answer;
use hostcall_abi::errno::{EINVAL, ENOSYS};
use hostcall_abi::{
    BULK_PER_LANE, Doorbell, LaneSlot, PORT_BULK, Port, Service, Status, WARP_SIZE,
};

use crate::services::{Call, Reply, ServiceTable};

/// The host's view of the channel: `len` ports from `base`, their doorbells from
/// `doorbells`.
#[derive(Clone, Copy)]
pub(crate) struct Ports {
    pub base: *mut Port,
    pub doorbells: *const Doorbell,
    pub len: usize,
}

impl Ports {
    /// The sequence last published on port `p` (acquire: the packet is visible).
    fn doorbell(&self, p: usize) -> u32 {
        // SAFETY: `p < len`, the length of the doorbell array; doorbells are atomics.
        unsafe { &*self.doorbells.add(p) }.load(Acquire)
    }
}

// SAFETY: the ports live in memory owned by the GPU module for the whole run; host threads
// access them only as the protocol allows (one consumer per port, atomics for the header).
unsafe impl Send for Ports {}
// SAFETY: as for Send.
unsafe impl Sync for Ports {}

/// Polls spin first, then yield, then sleep with a doubling delay up to
/// `MAX_IDLE_SLEEP`, so an idle GPU costs the host almost no CPU. Leaving the spin phase
/// counts as going idle: the services' idle hooks run then (buffered output is written).
struct Backoff {
    idle: u32,
}

const SPIN_POLLS: u32 = 4096;
const YIELD_POLLS: u32 = 256;
const MAX_IDLE_SLEEP: Duration = Duration::from_millis(1);

impl Backoff {
    fn wait(&mut self, services: &ServiceTable) {
        self.idle = self.idle.saturating_add(1);
        if self.idle == SPIN_POLLS {
            services.idle();
        }
        if self.idle < SPIN_POLLS {
            std::hint::spin_loop();
        } else if self.idle < SPIN_POLLS + YIELD_POLLS {
            std::thread::yield_now();
        } else {
            let doublings = (self.idle - SPIN_POLLS - YIELD_POLLS).min(7);
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
                        // The sequence this consumer last answered on each of its ports
                        // (it alone serves them, so its own record is the truth).
                        let mut answered = vec![0u32; ports.len];
                        while !stop.load(Relaxed) {
                            let mut served = 0;
                            for p in (k..ports.len).step_by(consumers) {
                                let bell = ports.doorbell(p);
                                if bell != answered[p] {
                                    served += serve_port(ports, p, bell, &services, trace);
                                    answered[p] = bell;
                                }
                            }
                            if served > 0 {
                                calls.fetch_add(served, Relaxed);
                                backoff.idle = 0;
                            } else {
                                backoff.wait(&services);
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
        .map(|p| {
            let bell = ports.doorbell(p);
            // SAFETY: `p < len`; the header is accessed only through atomics.
            let answered = unsafe { &(*ports.base.add(p)).header }
                .response
                .load(Relaxed);
            if bell == answered {
                0
            } else {
                serve_port(ports, p, bell, services, trace)
            }
        })
        .sum()
}

/// Serves the packet published on port `p` as sequence `request` (protocol step 5 in
/// `hostcall_abi`); returns the lanes served.
fn serve_port(ports: Ports, p: usize, request: u32, services: &ServiceTable, trace: bool) -> u64 {
    // SAFETY: `p < ports.len`; the header is accessed only through atomics.
    let port = unsafe { ports.base.add(p) };
    // SAFETY: as above.
    let header = unsafe { &(*port).header };
    let mask = header.lane_mask.load(Relaxed);
    if mask == 0 {
        log::warn!("malformed packet on port {p}: empty lane mask; answered without serving");
    }
    let alone = mask.count_ones() == 1;
    prefetch_packet(port, mask);
    for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
        // SAFETY: the GPU published the packet (its doorbell, observed with acquire, moved
        // past the last answer), so until this lane's answer word is written its slot and
        // bulk buffer are the host's alone. A lone lane's buffer is the port's whole bulk area, a
        // shared packet's lane has its own.
        let (slot, bulk) = unsafe {
            let area = (&raw mut (*port).bulk).cast::<u8>();
            let bulk = if alone {
                std::slice::from_raw_parts_mut(area, PORT_BULK)
            } else {
                std::slice::from_raw_parts_mut(area.add(lane * BULK_PER_LANE), BULK_PER_LANE)
            };
            ((&raw mut (*port).lanes).cast::<LaneSlot>().add(lane), bulk)
        };
        // The request is copied out once: what is served is what was checked.
        // SAFETY: see above; volatile, as the GPU wrote it.
        let request_slot = unsafe { slot.read_volatile() };
        let (status, reply) = if request_slot.seq == request {
            serve_lane(&request_slot, bulk, services, trace)
        } else {
            log::warn!(
                "malformed slot {lane} on port {p}: written for sequence {}, published as {request}",
                request_slot.seq
            );
            (Status::Malformed, Reply::errno(EINVAL))
        };
        let bulk_out = reply.bulk_out.min(bulk.len());
        let inline = (bulk_out == 0 && Answer::fits(reply.result)).then_some(reply.result);
        if inline.is_none() {
            // SAFETY: the slot is still the host's (see above).
            unsafe {
                (&raw mut (*slot).args[0]).write_volatile(reply.result as u64);
                (&raw mut (*slot).args[5]).write_volatile(bulk_out as u64);
            }
        }
        let word = Answer {
            seq: request,
            status,
            inline,
        }
        .encode();
        // The answer word goes last, with release: a lane that reads it (acquire) then
        // reads this answer's slot and bulk bytes, never older ones.
        // SAFETY: `lane < WARP_SIZE`; answer words are accessed only through atomics.
        unsafe { (*port).answers[lane].store(word, Release) };
    }
    header.response.store(request, Release);
    mask.count_ones() as u64
}

/// Asks the CPU to fetch the slots and answer words of `mask`'s lanes now: the GPU wrote
/// every one of those cache lines, so each is a miss, and fetched one lane at a time they
/// would be taken one after another instead of all at once.
fn prefetch_packet(port: *mut Port, mask: u32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
            // SAFETY: prefetching is a hint and never faults; the addresses are inside
            // the port (`lane < WARP_SIZE`).
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>((&raw const (*port).lanes[lane]).cast());
                _mm_prefetch::<_MM_HINT_T0>((&raw const (*port).answers[lane]).cast());
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (port, mask);
}

/// Runs one lane's request; returns the transport status and the service's reply.
fn serve_lane(
    slot: &LaneSlot,
    bulk: &mut [u8],
    services: &ServiceTable,
    trace: bool,
) -> (Status, Reply) {
    let started = trace.then(Instant::now);
    let mut call = Call {
        service: slot.service,
        block: slot.block,
        thread: slot.thread,
        args: slot.args,
        bulk,
    };
    let name = || Service::from_id(slot.service).map_or("custom", Service::name);
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
                    "malformed {} request from GPU thread (block {}, thread {}): {}",
                    name(),
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
            "block {} thread {} {}#{}({:#x}, {:#x}, {:#x}) -> {} {:?} in {:.1?}",
            slot.block,
            slot.thread,
            name(),
            slot.service,
            slot.args[0],
            slot.args[1],
            slot.args[2],
            reply.result,
            status,
            t.elapsed()
        );
    }
    (status, reply)
}
