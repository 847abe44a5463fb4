//! The hostcall server: consumer threads that poll the channel's ports, serve each lane
//! of a published packet and answer it (step 5 of the protocol in `hostcall_abi`). Port
//! `p` belongs to consumer `p % consumers`, so no two host threads ever serve one port.
//!
//! A port is GPU-writable, so the server treats it as untrusted input: each lane's slot
//! and its declared input bytes are copied into host memory once ([`shared`]), the
//! service runs on the copy and writes its output into host memory, which is copied back
//! before the answer word. A handler that panics answers `EIO`. Calls that may block run
//! on the [`pool`], and once the launch is being killed every packet is answered
//! [`Status::Killed`].

mod pool;
mod shared;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostcall_abi::answer::{Answer, seq_tag};
use hostcall_abi::errno::{EINVAL, EIO, ENOSYS, EPIPE};
use hostcall_abi::{BULK_PER_LANE, Doorbell, LaneSlot, PORT_BULK, Port, Status, WARP_SIZE};

use crate::guest_log::{GuestLog, Kind, escaped};
use crate::services::{Call, Entry, Handler, Malformed, Reply, ServiceTable, Unserved};
use pool::{BlockingPool, PortsAlive};
#[cfg(feature = "fuzzing")]
pub(crate) use shared::copy_in;

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

    /// The sequence last answered on port `p`.
    fn response(&self, p: usize) -> u32 {
        // SAFETY: `p < len`; the header is accessed only through atomics.
        unsafe { &(*self.base.add(p)).header }
            .response
            .load(Relaxed)
    }

    /// Where lane `lane`'s bulk bytes start, and how many it may use: a lone lane has
    /// the port's whole bulk area, a lane of a shared packet its own part.
    fn bulk(&self, p: usize, lane: usize, alone: bool) -> (*mut u8, usize) {
        // SAFETY: `p < len` and `lane < WARP_SIZE`: the address is inside the port.
        let area = unsafe { (&raw mut (*self.base.add(p)).bulk).cast::<u8>() };
        if alone {
            (area, PORT_BULK)
        } else {
            // SAFETY: as above.
            (unsafe { area.add(lane * BULK_PER_LANE) }, BULK_PER_LANE)
        }
    }

    /// A copy of lane `lane`'s slot on port `p`.
    fn slot(&self, p: usize, lane: usize) -> LaneSlot {
        // SAFETY: `p < len`, `lane < WARP_SIZE`; volatile, as the GPU writes it: the copy
        // is taken once and everything after reads the copy.
        unsafe { (&raw const (*self.base.add(p)).lanes[lane]).read_volatile() }
    }
}

// SAFETY: the ports live in memory owned by the GPU module for the whole run; host threads
// access them only through atomics and copies, one consumer (or its pool job) per port.
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
/// Idle polls after which a consumer other than the first parks (about 60 ms asleep).
const PARK_AFTER: u32 = SPIN_POLLS + YIELD_POLLS + 64;
/// Longest a parked consumer sleeps before it looks at its ports itself.
const PARK_LIMIT: Duration = Duration::from_millis(10);

/// Consumers that have gone idle long park, and the first consumer, which never parks,
/// wakes each when one of its ports has a packet: while the GPU computes without
/// calling, the host pays for one polling thread, not one per consumer. A consumer
/// wakes on its own after [`PARK_LIMIT`] too, so a wake-up the first misses costs at
/// most that.
struct Parking {
    parked: Vec<AtomicBool>,
}

impl Parking {
    fn new(consumers: usize) -> Parking {
        Parking {
            parked: (0..consumers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Consumer `k` parks until woken, or for [`PARK_LIMIT`], unless `pending` finds
    /// work after it said it parks.
    fn park(&self, k: usize, pending: impl Fn() -> bool) {
        self.parked[k].store(true, SeqCst);
        // Its ports are read after the flag is visible: a packet published after this
        // read is seen by the first consumer, which then finds the flag set.
        std::sync::atomic::fence(SeqCst);
        if !pending() {
            std::thread::park_timeout(PARK_LIMIT);
        }
        self.parked[k].store(false, Relaxed);
    }

    /// Run by the first consumer, again and again: wakes each parked consumer one of
    /// whose ports has a packet not yet answered (`others[j - 1]` is consumer `j`). A
    /// flag set after this read is seen at the next.
    fn wake_pending(&self, ctx: &Context, others: &[std::thread::Thread]) {
        let consumers = others.len() + 1;
        for (j, thread) in (1..).zip(others) {
            if !self.parked[j].load(SeqCst) {
                continue;
            }
            let ports = ctx.ports;
            let pending = (j..ports.len)
                .step_by(consumers)
                .any(|p| ports.doorbell(p) != ports.response(p) && !ctx.pool_holds(p));
            if pending {
                self.parked[j].store(false, Relaxed);
                thread.unpark();
            }
        }
    }
}

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

/// A lane's request still waiting for its answer, for the report of a killed launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The port it was published on.
    pub port: usize,
    /// The caller's linear block index.
    pub block: u32,
    /// The caller's thread index within its block.
    pub thread: u32,
    /// The service id it asked for.
    pub service: u32,
    /// The service's name.
    pub name: String,
}

impl std::fmt::Display for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}#{:#x} by block {} thread {} on port {}",
            self.name, self.service, self.block, self.thread, self.port
        )
    }
}

/// What the server reports of the calls it serves (`HOSTCALL_DEBUG`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Debug {
    /// A log line per call.
    pub trace: bool,
    /// A table per run: calls, errors and host time per service.
    pub summary: bool,
    /// The GPU's place in a run over several (`Host::run_all`), named in every line.
    pub gpu: Option<u32>,
}

/// A GPU thread as the host's lines name it: `block B, thread T`, after `GPU G, ` in a
/// run over several GPUs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub gpu: Option<u32>,
    pub block: u32,
    pub thread: u32,
}

impl Who {
    fn of(ctx: &Context, slot: &LaneSlot) -> Who {
        Who {
            gpu: ctx.debug.gpu,
            block: slot.block,
            thread: slot.thread,
        }
    }
}

impl std::fmt::Display for Who {
    /// `block B, thread T`; with `{:#}`, a trace line's `block B thread T`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if f.alternate() { "" } else { "," };
        if let Some(g) = self.gpu {
            write!(f, "GPU {g}{sep} ")?;
        }
        write!(f, "block {}{sep} thread {}", self.block, self.thread)
    }
}

/// One service's line of the summary table.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    calls: u64,
    errors: u64,
    time: Duration,
}

/// Handler panics caught since the process started (the fuzzer checks there are none).
pub(crate) static HANDLER_PANICS: AtomicU64 = AtomicU64::new(0);

/// What consumers and pool jobs share.
pub(crate) struct Context {
    ports: Ports,
    services: Arc<ServiceTable>,
    debug: Debug,
    /// Per service id, with [`Debug::summary`].
    stats: Option<Mutex<HashMap<u32, Stat>>>,
    /// Why the run halted (a call nobody serves, under [`Unserved::Halt`]).
    halted: Mutex<Option<String>>,
    /// The launch's GPU-caused log lines.
    log: Arc<GuestLog>,
    killing: AtomicBool,
    /// The run is over: pool jobs run no more handlers and answer nothing.
    ended: AtomicBool,
    pool: BlockingPool,
    /// Per port: a pool job holds its packet. The port is not served again until the
    /// job has answered (or was dropped), so the pool never holds more than one job per
    /// port, however often a kernel rings the doorbell.
    pool_holds: Vec<AtomicBool>,
    alive: PortsAlive,
}

impl Context {
    /// Serving state for `ports`, with `blocking` pool workers.
    pub fn new(
        ports: Ports,
        services: Arc<ServiceTable>,
        blocking: usize,
        debug: Debug,
        log: Arc<GuestLog>,
    ) -> Arc<Context> {
        Arc::new(Context {
            ports,
            services,
            debug,
            stats: debug.summary.then(Default::default),
            halted: Mutex::new(None),
            log,
            killing: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            // A worker per port at most, and a job per lane of each queued.
            pool: BlockingPool::new(blocking, ports.len, ports.len * WARP_SIZE),
            pool_holds: (0..ports.len).map(|_| AtomicBool::new(false)).collect(),
            alive: PortsAlive::new(),
        })
    }

    /// Jobs waiting in the blocking pool's queue.
    #[cfg(feature = "fuzzing")]
    pub fn queued_jobs(&self) -> usize {
        self.pool.queued()
    }

    /// Whether a pool job holds port `p`'s packet.
    fn pool_holds(&self, p: usize) -> bool {
        self.pool_holds[p].load(Acquire)
    }

    /// Ends the run for the pool: queued jobs are dropped, and running ones run no
    /// further handler and answer nothing.
    fn end_pool(&self) {
        self.ended.store(true, Release);
        self.pool.close();
        if self.pool.busy() > 0 {
            log::warn!(
                "{} blocking hostcalls were still running when the launch ended; their answers are dropped",
                self.pool.busy()
            );
        }
    }

    /// Ends the run ([`Context::end_pool`]) and forbids any later write to the ports:
    /// what `drain` does for a launch, for the fuzzer's port, which has no launch.
    #[cfg(feature = "fuzzing")]
    pub fn retire(&self) {
        self.end_pool();
        self.alive.retire();
    }

    /// Halts the run for `why`: every call from now on is answered `Killed`, and the run
    /// reports `why` (the first reason given).
    fn halt(&self, why: String) {
        self.halted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        self.killing.store(true, Relaxed);
    }

    /// Whether a pool job may still run a handler: not after the run (which is over
    /// before the ports retire), and not once the launch is being killed.
    fn may_serve(&self) -> bool {
        !self.ended.load(Acquire) && !self.killing.load(Relaxed)
    }
}

/// Clears a port's pool hold when the job that took it ends, whether it ran, was
/// dropped from a closed queue, or panicked.
struct PoolHold {
    ctx: Arc<Context>,
    port: usize,
}

impl Drop for PoolHold {
    fn drop(&mut self) {
        self.ctx.pool_holds[self.port].store(false, Release);
    }
}

/// Host buffers a consumer reuses for every lane, so serving allocates nothing.
pub(crate) struct Scratch {
    input: Vec<u8>,
    out: Vec<u8>,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            input: Vec::with_capacity(PORT_BULK),
            out: vec![0; PORT_BULK],
        }
    }
}

/// Whether the launch is still running (packets may block and get pool workers) or has
/// ended (only what needs no waiting is served: nobody is left to wait for the rest).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Live,
    Drain,
}

/// Running consumer threads.
pub(crate) struct Server {
    ctx: Arc<Context>,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Starts `consumers` threads serving `ports` with `services`, and `blocking` pool
    /// workers for calls that may block; `debug` says what to report of the calls, `log`
    /// takes the lines the GPU causes.
    pub fn start(
        ports: Ports,
        services: Arc<ServiceTable>,
        consumers: usize,
        blocking: usize,
        debug: Debug,
        log: Arc<GuestLog>,
    ) -> std::io::Result<Server> {
        let ctx = Context::new(ports, services, blocking, debug, log);
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let consumers = consumers.clamp(1, ports.len.max(1));
        let parking = Arc::new(Parking::new(consumers));
        let mut server = Server {
            ctx,
            stop,
            calls,
            threads: Vec::new(),
        };
        // The others first: the first consumer wakes them by their threads' handles.
        for k in (0..consumers).rev() {
            let others = match k {
                0 => server
                    .threads
                    .iter()
                    .rev()
                    .map(|t| t.thread().clone())
                    .collect(),
                _ => Vec::new(),
            };
            let (stop, calls, ctx) = (
                server.stop.clone(),
                server.calls.clone(),
                server.ctx.clone(),
            );
            let parking = parking.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hostcall-{k}"))
                .spawn(move || consume(&ctx, k, &stop, &calls, &parking, &others));
            match spawned {
                Ok(t) => server.threads.push(t),
                Err(e) => {
                    server.finish(Instant::now()); // ends the consumers already started
                    return Err(e);
                }
            }
        }
        Ok(server)
    }

    /// From now on every packet is answered [`Status::Killed`]: its lanes trap.
    pub fn kill(&self) {
        self.ctx.killing.store(true, Relaxed);
    }

    /// Why the run halted, if it did.
    pub fn halted(&self) -> Option<String> {
        self.ctx
            .halted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The summary table of the run's calls, with [`Debug::summary`].
    pub fn summary(&self) -> Option<String> {
        let stats = self.ctx.stats.as_ref()?;
        let stats = stats.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<(String, Stat)> = stats
            .iter()
            .map(|(id, s)| (self.ctx.services.name(*id), *s))
            .collect();
        rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(&b.0)));
        let mut t = format!(
            "hostcall summary\n{:<28} {:>12} {:>10} {:>14} {:>12}\n",
            "service", "calls", "errors", "host time", "mean"
        );
        for (name, s) in rows {
            let mean = s.time / s.calls.max(1) as u32;
            t.push_str(&format!(
                "{name:<28} {:>12} {:>10} {:>14.3?} {:>12.3?}\n",
                s.calls, s.errors, s.time, mean
            ));
        }
        Some(t)
    }

    /// The requests published and not yet answered.
    pub fn in_flight(&self) -> Vec<InFlight> {
        let ports = self.ctx.ports;
        let mut found = Vec::new();
        for p in 0..ports.len {
            let bell = ports.doorbell(p);
            // SAFETY: `p < len`; the header and answer words are accessed only through
            // atomics.
            let port = unsafe { &*ports.base.add(p) };
            let mask = port.header.lane_mask.load(Relaxed);
            for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
                // Not `response`: it is stored once the host has taken the packet, and a
                // call handed to the pool may still be running.
                let answered = Answer::decode(port.answers[lane].load(Acquire))
                    .is_some_and(|a| a.seq == seq_tag(bell));
                let s = ports.slot(p, lane);
                if s.seq == bell && !answered {
                    found.push(InFlight {
                        port: p,
                        block: s.block,
                        thread: s.thread,
                        service: s.service,
                        name: self.ctx.services.name(s.service),
                    });
                }
            }
        }
        found
    }

    /// Stops the consumers, drops the pool's queued jobs, serves what was published
    /// before the launch ended (until `deadline`), and forbids any later write to the
    /// ports (a pool worker may still be blocked in a service); returns how many lane
    /// calls were served.
    pub fn finish(self, deadline: Instant) -> u64 {
        self.stop.store(true, Relaxed);
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads {
            // A consumer that panicked has already reported through the panic hook.
            let _ = t.join();
        }
        let drained = drain(&self.ctx, deadline);
        self.calls.load(Relaxed) + drained
    }
}

/// The end of a run: the pool takes no more work and drops what is queued, then every
/// port with a packet published and not taken is served once more (posted requests
/// published just before the launch ended, or trapped, may not have been served yet),
/// except ports a pool job still holds, and none after `deadline`. Returns the lanes
/// served.
pub(crate) fn drain(ctx: &Arc<Context>, deadline: Instant) -> u64 {
    ctx.end_pool();
    let mut scratch = Scratch::new();
    let ports = ctx.ports;
    let mut drained = 0;
    for p in 0..ports.len {
        let bell = ports.doorbell(p);
        if bell == ports.response(p) || ctx.pool_holds(p) {
            continue;
        }
        if Instant::now() > deadline {
            ctx.log.warn(
                Kind::Unserved,
                format_args!(
                    "the end-of-run drain passed its time limit; the remaining ports are not served"
                ),
            );
            break;
        }
        drained += serve_port(ctx, p, bell, &mut scratch, Mode::Drain);
    }
    ctx.alive.retire();
    drained
}

/// Consumer `k` of `parking`'s consumers: polls its ports until `stop`; idle long,
/// parks ([`Parking`]), except the first, which wakes the `others`.
fn consume(
    ctx: &Arc<Context>,
    k: usize,
    stop: &AtomicBool,
    calls: &AtomicU64,
    parking: &Parking,
    others: &[std::thread::Thread],
) {
    let consumers = parking.parked.len();
    let ports = ctx.ports;
    let mut backoff = Backoff { idle: 0 };
    let mut scratch = Scratch::new();
    // The sequence this consumer last answered (or handed to the pool) on each of its
    // ports: it alone serves them, so its own record is the truth.
    let mut answered = vec![0u32; ports.len];
    let mut sweeps = 0u32;
    while !stop.load(Relaxed) {
        let mut served = 0;
        for p in (k..ports.len).step_by(consumers) {
            let bell = ports.doorbell(p);
            if bell != answered[p] && !ctx.pool_holds(p) {
                served += serve_port(ctx, p, bell, &mut scratch, Mode::Live);
                answered[p] = bell;
            }
        }
        sweeps = sweeps.wrapping_add(1);
        // When its own sweep was empty, and every 64 sweeps while it is busy.
        if !others.is_empty() && (served == 0 || sweeps.is_multiple_of(64)) {
            parking.wake_pending(ctx, others);
        }
        if served > 0 {
            calls.fetch_add(served, Relaxed);
            backoff.idle = 0;
        } else if k > 0 && backoff.idle >= PARK_AFTER {
            parking.park(k, || {
                (k..ports.len)
                    .step_by(consumers)
                    .any(|p| ports.doorbell(p) != answered[p] && !ctx.pool_holds(p))
            });
            // Woken, it polls its ports at once; if they are empty it parks again.
        } else {
            backoff.wait(&ctx.services);
        }
    }
}

/// Serves the packet published on port `p` as sequence `seq` (protocol step 5 in
/// `hostcall_abi`), lane by lane; from the first lane whose call may block, the rest of
/// the packet goes to the pool. Returns the lanes taken.
pub(crate) fn serve_port(
    ctx: &Arc<Context>,
    p: usize,
    seq: u32,
    scratch: &mut Scratch,
    mode: Mode,
) -> u64 {
    let ports = ctx.ports;
    // SAFETY: `p < ports.len`; the header is accessed only through atomics.
    let header = unsafe { &(*ports.base.add(p)).header };
    let mask = header.lane_mask.load(Relaxed);
    if mask == 0 {
        ctx.log.warn(
            Kind::Malformed,
            format_args!("malformed packet on port {p}: empty lane mask; answered without serving"),
        );
        header.response.store(seq, Release);
        return 0;
    }
    let alone = mask.count_ones() == 1;
    prefetch_packet(ports.base.wrapping_add(p), mask);
    let killing = ctx.killing.load(Relaxed);
    let mut lanes = mask;
    while lanes != 0 {
        let lane = lanes.trailing_zeros() as usize;
        if killing {
            answer_killed(ctx, p, lane, seq, alone);
            lanes &= lanes - 1;
            continue;
        }
        // The one read of this lane's slot: everything below uses the copy.
        let slot = ports.slot(p, lane);
        let entry = ctx.services.serving(slot.service);
        let blocks = slot.seq == seq
            && entry.is_some_and(|e| e.can_block && e.handler.may_block(slot.service, &slot.args));
        if blocks {
            // The lanes before this one were served here.
            let taken = (mask & ((1u32 << lane) - 1)).count_ones() as u64;
            if mode == Mode::Drain {
                ctx.log.warn(
                    Kind::Unserved,
                    format_args!(
                        "a call that may block was published on port {p} as the launch ended; not served"
                    ),
                );
                return taken;
            }
            return taken + hand_to_pool(ctx, p, seq, alone, (lane, slot), lanes & (lanes - 1));
        }
        let (at, cap) = ports.bulk(p, lane, alone);
        let mut words = None;
        let (status, reply) = match copy_input(entry, &slot, at, cap, &mut scratch.input) {
            Ok(()) => run_lane(
                ctx,
                entry,
                (p, &slot),
                seq,
                &scratch.input,
                &mut scratch.out[..cap],
                &mut words,
            ),
            Err(m) => malformed(ctx, &slot, &m),
        };
        let out = (&scratch.out[..], words.as_ref());
        answer(ctx, p, lane, seq, alone, status, reply, out);
        lanes &= lanes - 1;
    }
    header.response.store(seq, Release);
    mask.count_ones() as u64
}

/// Copies lane `first`'s request (already read) and those of the lanes in `rest`, with
/// their input bytes, into jobs for the blocking pool, which answer them and then
/// release the port; returns the lanes taken.
fn hand_to_pool(
    ctx: &Arc<Context>,
    p: usize,
    seq: u32,
    alone: bool,
    first: (usize, LaneSlot),
    rest: u32,
) -> u64 {
    let ports = ctx.ports;
    let requests: Vec<Request> = std::iter::once(first)
        .chain(
            (0..WARP_SIZE)
                .filter(|l| rest & (1 << l) != 0)
                .map(|l| (l, ports.slot(p, l))),
        )
        .map(|(lane, slot)| {
            let (at, cap) = ports.bulk(p, lane, alone);
            let mut input = Vec::new();
            let entry = ctx.services.serving(slot.service);
            let copied = copy_input(entry, &slot, at, cap, &mut input);
            (lane, slot, copied.map(|()| input))
        })
        .collect();
    // Every request of the packet is now in host memory: the port's slots are read no
    // more, so `response` is stored here, by the consumer, in the order it takes packets.
    // Stored by the pool job after its answers, it could land after the consumer had
    // answered the port's next packet and set `response` back (a posted next owner then
    // waits for ever; hostcall-model's pooled host finds it).
    // SAFETY: `p < len`; the header is accessed only through atomics.
    unsafe { &(*ports.base.add(p)).header }
        .response
        .store(seq, Release);
    ctx.pool_holds[p].store(true, Release);
    let hold = Arc::new(PoolHold {
        ctx: ctx.clone(),
        port: p,
    });
    let taken = requests.len() as u64;
    let waits = requests.iter().any(|(_, slot, _)| {
        ctx.services
            .serving(slot.service)
            .is_some_and(|e| e.handler.waits_on_peer(slot.service, &slot.args))
    });
    // Calls that may wait on a peer are a job each: lanes of one packet may wait on one
    // another (one receives what the other sends). The port stays held until the last
    // job ends.
    let jobs: Vec<Vec<Request>> = if waits {
        requests.into_iter().map(|r| vec![r]).collect()
    } else {
        vec![requests]
    };
    for requests in jobs {
        let job = pool_job(hold.clone(), seq, alone, requests);
        match ctx.pool.submit(job, waits) {
            Ok(()) => {}
            Err(job) if !ctx.pool.is_closed() => {
                // No thread to run it on: serve it here rather than never.
                job();
            }
            Err(_) => return 0,
        }
    }
    taken
}

/// A lane's request copied out of its port: lane, slot, and input bytes (or why they
/// broke the service's rules).
type Request = (usize, LaneSlot, Result<Vec<u8>, Malformed>);

/// The job that serves `requests` of the packet `seq` on `hold`'s port, then answers
/// them; a run that ended or is being killed starts no more handlers.
fn pool_job(hold: Arc<PoolHold>, seq: u32, alone: bool, requests: Vec<Request>) -> pool::Job {
    Box::new(move || {
        let (ctx, p) = (&hold.ctx, hold.port);
        let lanes: u32 = requests.iter().map(|r| 1 << r.0).sum();
        let mut out = vec![0u8; if alone { PORT_BULK } else { BULK_PER_LANE }];
        let mut answers = Vec::with_capacity(requests.len());
        for (lane, slot, input) in requests {
            // Checked before each handler: a run that ended, or is being killed, starts
            // no more work (what is under way in a handler cannot be taken back).
            if !ctx.may_serve() {
                break;
            }
            let entry = ctx.services.serving(slot.service);
            let mut words = None;
            let (status, reply) = match input {
                Ok(input) => run_lane(ctx, entry, (p, &slot), seq, &input, &mut out, &mut words),
                Err(m) => malformed(ctx, &slot, &m),
            };
            let n = reply.bulk_out.min(out.len());
            answers.push((lane, status, reply, out[..n].to_vec(), words));
        }
        if ctx.ended.load(Acquire) {
            return;
        }
        let Some(_alive) = ctx.alive.hold() else {
            return;
        };
        if ctx.killing.load(Relaxed) {
            // Every lane traps on its answer; those whose handler did not run too.
            let served: u32 = answers.iter().map(|a| 1 << a.0).sum();
            for lane in (0..WARP_SIZE).filter(|l| lanes & (1 << l) != 0 && served & (1 << l) == 0) {
                answer_killed(ctx, p, lane, seq, alone);
            }
        }
        for (lane, status, reply, bytes, words) in answers {
            answer(
                ctx,
                p,
                lane,
                seq,
                alone,
                status,
                reply,
                (&bytes, words.as_ref()),
            );
        }
    })
}

/// Copies the input bytes `slot`'s service declares, from the lane's bulk buffer at `at`
/// (`cap` bytes), into `into`.
fn copy_input(
    entry: Option<&Entry>,
    slot: &LaneSlot,
    at: *const u8,
    cap: usize,
    into: &mut Vec<u8>,
) -> Result<(), Malformed> {
    into.clear();
    let Some(arg) = entry.and_then(|e| e.input_arg) else {
        return Ok(());
    };
    let n = slot.args.get(arg).copied().unwrap_or(0);
    if n > cap as u64 {
        return Err(Malformed(format!(
            "input length argument {arg} is {n}, over the {cap}-byte bulk buffer"
        )));
    }
    // SAFETY: `at..at + cap` is the lane's bulk buffer inside the port (`Ports::bulk`),
    // 8-byte aligned, of a multiple of 8 bytes, mapped for the launch; `n <= cap`.
    unsafe { shared::copy_in(at, n as usize, cap, into) };
    Ok(())
}

/// The answer to a request that broke its service's rules, with a log line.
fn malformed(ctx: &Context, slot: &LaneSlot, m: &Malformed) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Malformed,
        format_args!(
            "malformed {} request from GPU thread ({}): {}",
            ctx.services.name(slot.service),
            Who::of(ctx, slot),
            escaped(m.0.as_bytes())
        ),
    );
    (Status::Malformed, Reply::errno(EINVAL))
}

/// Writes lane `lane`'s answer: output bytes (`out.0`), then the result where it does
/// not fit the word, with a typed value's words (`out.1`), then the answer word itself,
/// last, with release.
#[allow(clippy::too_many_arguments)] // one answer's parts, each from a different place
#[inline]
fn answer(
    ctx: &Context,
    p: usize,
    lane: usize,
    seq: u32,
    alone: bool,
    status: Status,
    reply: Reply,
    (out, words): (&[u8], Option<&[u64; 4]>),
) {
    let ports = ctx.ports;
    let (at, cap) = ports.bulk(p, lane, alone);
    let status = if ctx.killing.load(Relaxed) {
        Status::Killed
    } else {
        status
    };
    let bulk_out = reply.bulk_out.min(cap).min(out.len());
    // SAFETY: the lane's bulk buffer holds `cap >= bulk_out` bytes; until this lane's
    // answer word is written the protocol gives it to the host.
    unsafe { shared::copy_out(&out[..bulk_out], at) };
    let inline =
        (bulk_out == 0 && words.is_none() && Answer::fits(reply.result)).then_some(reply.result);
    // SAFETY: `p < len`, `lane < WARP_SIZE`.
    let port = unsafe { ports.base.add(p) };
    if inline.is_none() {
        // SAFETY: the slot is still the host's (see above); volatile, as the GPU reads it.
        unsafe {
            let args = &raw mut (*port).lanes[lane].args;
            (&raw mut (*args)[0]).write_volatile(reply.result as u64);
            (&raw mut (*args)[5]).write_volatile(bulk_out as u64);
            for (i, w) in words.into_iter().flatten().enumerate() {
                (&raw mut (*args)[1 + i]).write_volatile(*w);
            }
        }
    }
    let word = Answer {
        seq,
        status,
        inline,
    }
    .encode();
    // The answer word goes last, with release: a lane that reads it (acquire) then reads
    // this answer's slot and bulk bytes, never older ones.
    // SAFETY: answer words are accessed only through atomics.
    unsafe { (*port).answers[lane].store(word, Release) };
}

/// Answers lane `lane` [`Status::Killed`] without serving it: its thread traps.
fn answer_killed(ctx: &Context, p: usize, lane: usize, seq: u32, alone: bool) {
    answer(
        ctx,
        p,
        lane,
        seq,
        alone,
        Status::Killed,
        Reply::errno(EIO),
        (&[], None),
    );
}

/// Asks the CPU to fetch the slots and answer words of `mask`'s lanes now: the GPU wrote
/// every one of those cache lines, so each is a miss, and fetched one lane at a time they
/// would be taken one after another instead of all at once. (Bulk bytes are not
/// prefetched: most calls send none, and the extra misses would queue behind these.)
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

/// Runs one lane's request (already copied into host memory); returns the transport
/// status and the service's reply, whose output bytes are in `out` (and a typed
/// value's words in `words`). The hot path of every call: what is rare (a stale slot,
/// tracing, the summary, an id nobody serves) is kept out of line, and this is inlined
/// into `serve_port` by force, with `run_handler` and the service lookup, so that a
/// lane's reply never takes a trip through memory. Left to LLVM, they were calls, and
/// null calls at 132×256 on the H100 ran at 24 M/s against 33 M/s inlined
/// (`bench-results/h100-issue15.md`).
#[inline(always)]
fn run_lane(
    ctx: &Context,
    entry: Option<&Entry>,
    (port, slot): (usize, &LaneSlot),
    seq: u32,
    input: &[u8],
    out: &mut [u8],
    words: &mut Option<[u64; 4]>,
) -> (Status, Reply) {
    if slot.seq != seq {
        return stale(ctx, slot, seq);
    }
    if let Some(life) = entry.and_then(|e| e.life.as_deref())
        && !life.take()
    {
        return finished(ctx, slot);
    }
    if ctx.debug.trace || ctx.debug.summary {
        return run_lane_observed(ctx, entry, (port, slot), (input, out, words));
    }
    match entry {
        None => unserved(ctx, slot),
        Some(e) => run_handler(
            ctx,
            e.handler.as_ref(),
            (port, slot),
            (input, out, words),
            &mut None,
        ),
    }
}

/// The answer to a call of a service whose lifetime has ended: `EPIPE`, and a line
/// naming the GPU thread and the service.
#[cold]
fn finished(ctx: &Context, slot: &LaneSlot) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Finished,
        format_args!(
            "GPU thread ({}) called {}, which has finished serving (its lifetime ended or the host called finish()): answered EPIPE",
            Who::of(ctx, slot),
            ctx.services.name(slot.service)
        ),
    );
    (Status::Ok, Reply::errno(EPIPE))
}

/// The answer to a slot written for another sequence than the one published.
#[cold]
fn stale(ctx: &Context, slot: &LaneSlot, seq: u32) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Malformed,
        format_args!(
            "malformed slot: written for sequence {}, published as {seq}",
            slot.seq
        ),
    );
    (Status::Malformed, Reply::errno(EINVAL))
}

/// [`run_lane`] under `HOSTCALL_DEBUG`: timed, traced (typed services with their decoded
/// arguments and result) and counted in the summary.
#[cold]
#[inline(never)]
fn run_lane_observed(
    ctx: &Context,
    entry: Option<&Entry>,
    (port, slot): (usize, &LaneSlot),
    lane: (&[u8], &mut [u8], &mut Option<[u64; 4]>),
) -> (Status, Reply) {
    let debug = ctx.debug;
    let started = Instant::now();
    let mut decoded = debug.trace.then(String::new);
    let (status, reply) = match entry {
        None => unserved(ctx, slot),
        Some(e) => run_handler(ctx, e.handler.as_ref(), (port, slot), lane, &mut decoded),
    };
    let took = started.elapsed();
    if let Some(stats) = &ctx.stats {
        let mut stats = stats.lock().unwrap_or_else(|p| p.into_inner());
        let s = stats.entry(slot.service).or_default();
        s.calls += 1;
        s.errors += (status != Status::Ok || reply.result < 0) as u64;
        s.time += took;
    }
    if debug.trace {
        let name = ctx.services.name(slot.service);
        match decoded.filter(|d| !d.is_empty()) {
            Some(d) => log::info!(
                target: "hostcall",
                "{:#} {name} {d} {status:?} in {took:.1?}",
                Who::of(ctx, slot),
            ),
            None => log::info!(
                target: "hostcall",
                "{:#} {name}#{:#x}({:#x}, {:#x}, {:#x}) -> {} {status:?} in {took:.1?}",
                Who::of(ctx, slot),
                slot.service,
                slot.args[0],
                slot.args[1],
                slot.args[2],
                reply.result,
            ),
        }
    }
    (status, reply)
}

/// The answer to a call of an id no handler serves (and no default handler catches),
/// by the table's [`Unserved`] policy.
#[cold]
fn unserved(ctx: &Context, slot: &LaneSlot) -> (Status, Reply) {
    match ctx.services.unserved {
        Unserved::Enosys => {
            ctx.log.warn(
                Kind::UnknownService,
                format_args!(
                    "unknown hostcall service id {:#x} from GPU thread ({}): answered ENOSYS",
                    slot.service,
                    Who::of(ctx, slot)
                ),
            );
            (Status::UnknownService, Reply::errno(ENOSYS))
        }
        Unserved::Halt => {
            ctx.halt(format!(
                "GPU thread ({}) called service id {:#x}, which no handler serves, and the run halts (HostBuilder::unserved or a default handler changes that)",
                Who::of(ctx, slot),
                slot.service
            ));
            (Status::Killed, Reply::errno(ENOSYS))
        }
    }
}

/// Calls `h`; a panic becomes `EIO` and a log line, and the consumer carries on.
#[inline(always)]
fn run_handler(
    ctx: &Context,
    h: &dyn Handler,
    (port, slot): (usize, &LaneSlot),
    (input, out, words): (&[u8], &mut [u8], &mut Option<[u64; 4]>),
    decoded: &mut Option<String>,
) -> (Status, Reply) {
    let mut call = Call {
        service: slot.service,
        port: port as u32,
        block: slot.block,
        thread: slot.thread,
        args: slot.args,
        input,
        out,
        trace: decoded.as_mut(),
        device: ctx
            .services
            .device
            .as_deref()
            .map(|d| d as &dyn hostcall_abi::typed::DeviceReader),
        words,
    };
    let served = std::panic::catch_unwind(AssertUnwindSafe(|| h.call(&mut call)));
    match served {
        Ok(Ok(r)) => (Status::Ok, r),
        Ok(Err(m)) => malformed(ctx, slot, &m),
        Err(panic) => {
            HANDLER_PANICS.fetch_add(1, Relaxed);
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".into());
            // The panic's text may quote what the GPU sent.
            ctx.log.warn(
                Kind::HandlerPanic,
                format_args!(
                    "the handler of service {} panicked serving GPU thread ({}): {}; answered EIO",
                    ctx.services.name(slot.service),
                    Who::of(ctx, slot),
                    escaped(why.as_bytes())
                ),
            );
            (Status::Ok, Reply::errno(EIO))
        }
    }
}
