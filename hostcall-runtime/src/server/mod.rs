//! The hostcall server: consumer threads that poll the channel's ports, serve each lane
//! of a published packet and answer it (step 5 of the protocol in `hostcall_abi`). Port
//! `p` belongs to consumer `p % consumers`, so no two host threads ever serve one port.
//!
//! No system call that can block runs on a consumer. A lane whose call may block is
//! handed to the blocking [`pool`], one job per lane: one that only takes time (a file
//! system) to its workers, one that may wait on another party (a FIFO's open) to a
//! thread of its own; a lane whose fd (a socket, a pipe, stdin) is not ready waits in
//! the [`reactor`], which runs the call again once it is. Either way its packet stays
//! [`hold`]'s until every lane has its answer, and the last answer stores `response`. A
//! stop (the timeout, a kill, an `exit` on another GPU) answers every lane still
//! outstanding `Killed` at once, wherever it waits; a handler still inside a system call
//! is abandoned, its late answer dropped.
//!
//! A port is GPU-writable, so the server treats it as untrusted input: each lane's slot
//! and its declared input bytes are copied into host memory once ([`ports`],
//! [`shared`]), the service runs on the copy and writes its output into host memory,
//! which is copied back before the answer word. A handler that panics answers `EIO`.

mod handoff;
mod hold;
mod idle;
mod lane;
mod parked;
mod pool;
mod ports;
mod reactor;
mod report;
mod shared;

use std::collections::HashMap;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use hostcall_abi::answer::{Answer, seq_tag};
use hostcall_abi::errno::{EAGAIN, EIO};
use hostcall_abi::park::Ticket;
use hostcall_abi::{LaneSlot, PORT_BULK, Service, Status, WARP_SIZE, continuation_ports};

use crate::guest_log::{GuestLog, Kind};
use crate::services::wait::{self};
use crate::services::{Entry, Malformed, Reply, ServiceTable};
use handoff::{Pooled, hand_off, to_pool, wait_for};
use hold::{Holds, PostedOut};
use idle::{Backoff, IDLE_PARK_POLLS, Parking};
use lane::{Deferred, Ran, copy_input, malformed, run_lane};
use pool::{BlockingPool, PortsAlive};

pub(crate) use ports::Ports;
pub(crate) use reactor::Reactor;
pub use report::{InFlight, Tracing};
#[cfg(feature = "fuzzing")]
pub(crate) use shared::copy_in;

/// Handler panics caught since the process started (the fuzzer checks there are none).
pub(crate) static HANDLER_PANICS: AtomicU64 = AtomicU64::new(0);

/// What consumers, pool jobs and the reactor share.
pub(crate) struct Context {
    ports: Ports,
    pub(crate) services: Arc<ServiceTable>,
    debug: Tracing,
    /// Per service id, with [`Tracing::summary`].
    stats: Option<Mutex<HashMap<u32, report::Stat>>>,
    /// Why the run halted (a call nobody serves, under `Unserved::Halt`).
    halted: Mutex<Option<String>>,
    /// The launch's GPU-caused log lines.
    log: Arc<GuestLog>,
    /// Every call is answered `Killed` from now on.
    killing: AtomicBool,
    /// Calls no longer wait (the process is ending): one that would is answered
    /// `Killed`.
    waits_ended: AtomicBool,
    /// The run is over: pool jobs run no more handlers and answer nothing.
    ended: AtomicBool,
    pool: BlockingPool,
    /// Packets with lanes still to answer, one per port at most: a port is not served
    /// again until its held packet is answered, so the pool and the reactor never hold
    /// more than one packet of a port, however often a kernel rings its doorbell.
    holds: Holds,
    /// Calls answered with a ticket, their ports freed while they wait.
    parked: parked::Parked,
    /// Posted lanes handed off, which the run's end waits for.
    posted_out: PostedOut,
    alive: PortsAlive,
    reactor: Arc<Reactor>,
}

impl Context {
    /// Serving state for `ports`, with `blocking` pool workers, and `reactor` for calls
    /// that wait on an fd.
    pub fn new(
        ports: Ports,
        services: Arc<ServiceTable>,
        blocking: usize,
        debug: Tracing,
        log: Arc<GuestLog>,
        reactor: Arc<Reactor>,
    ) -> Arc<Context> {
        Arc::new(Context {
            ports,
            services,
            debug,
            stats: debug.summary.then(Default::default),
            halted: Mutex::new(None),
            log,
            killing: AtomicBool::new(false),
            waits_ended: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            // A job per lane of every port queued for the workers, beyond which packets
            // wait on their ports.
            pool: BlockingPool::new(blocking, ports.len * WARP_SIZE),
            holds: Holds::new(ports.len),
            parked: parked::Parked::new(ports.wake, ports.wake_words),
            posted_out: PostedOut::default(),
            alive: PortsAlive::new(),
            reactor,
        })
    }

    /// Jobs waiting in the blocking pool's queue.
    #[cfg(feature = "fuzzing")]
    pub fn queued_jobs(&self) -> usize {
        self.pool.queued()
    }

    /// Jobs the blocking pool has queued or is running.
    #[cfg(feature = "fuzzing")]
    pub fn busy_jobs(&self) -> usize {
        self.pool.busy()
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
        self.reactor.forget(self, true);
        self.alive.retire();
    }

    /// Halts the run for `why`: every call from now on is answered `Killed`, and the run
    /// reports `why` (the first reason given).
    fn halt(&self, why: String) {
        self.halted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        self.stop();
    }

    /// Answers every call handed off `Killed`, and every later call.
    fn stop(&self) {
        self.killing.store(true, Relaxed);
        self.end_waits();
    }

    /// Answers every call handed off (to the pool or the reactor) `Killed`, and any
    /// call that would wait from now on; posted calls, which nobody waits for, go on.
    fn end_waits(&self) {
        // Sequentially consistent with `hand_off`'s load (see there).
        self.waits_ended.store(true, SeqCst);
        self.holds.kill_all(self);
        if let Some(_alive) = self.alive.hold() {
            self.parked.kill_all();
        }
        self.reactor.forget(self, false);
    }

    /// Whether a pool job may still run a handler: not after the run (which is over
    /// before the ports retire), and not once the launch is being killed.
    fn may_serve(&self) -> bool {
        !self.ended.load(Acquire) && !self.killing.load(Relaxed)
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

/// Whether the launch is still running (calls may block or wait, and are handed off) or
/// has ended (what needs no waiting is served, and posted calls; nobody is left to wait
/// for the rest).
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
    /// Starts `consumers` threads serving `ports` with `services`, `blocking` pool
    /// workers for calls that may block and `reactor` for calls that wait on an fd;
    /// `debug` says what to report of the calls, `log` takes the lines the GPU causes.
    pub fn start(
        ports: Ports,
        services: Arc<ServiceTable>,
        (consumers, blocking): (usize, usize),
        reactor: Arc<Reactor>,
        debug: Tracing,
        log: Arc<GuestLog>,
    ) -> std::io::Result<Server> {
        let ctx = Context::new(ports, services, blocking, debug, log, reactor);
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

    /// Stops the launch: every call outstanding is answered [`Status::Killed`] now,
    /// wherever it waits, and every later one as it comes; the calling threads trap.
    pub fn kill(&self) {
        self.ctx.stop();
    }

    /// The process is ending (an `exit` or `abort` on this GPU): every call handed off
    /// to the pool or the reactor is answered `Killed` now, as a process's end stops
    /// its threads wherever they wait; the launch's other calls are served as before.
    pub fn end_waits(&self) {
        self.ctx.end_waits();
    }

    /// Why the run halted, if it did.
    pub fn halted(&self) -> Option<String> {
        self.ctx
            .halted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The summary table of the run's calls, with [`Tracing::summary`].
    pub fn summary(&self) -> Option<String> {
        let stats = self.ctx.stats.as_ref()?;
        let stats = stats.lock().unwrap_or_else(|p| p.into_inner());
        Some(report::summary(&stats, |id| self.ctx.services.name(id)))
    }

    /// The requests published and not yet answered.
    pub fn in_flight(&self) -> Vec<InFlight> {
        let ports = self.ctx.ports;
        let mut found = Vec::new();
        for p in 0..ports.len {
            let bell = ports.doorbell(p);
            let mask = ports.lane_mask(p);
            for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
                // Not `response`: it is stored once the host has answered every lane of
                // the packet, and some may be answered already.
                let answered = Answer::decode(ports.answer_word(p, lane))
                    .is_some_and(|a| a.seq == seq_tag(bell));
                let s = ports.slot(p, lane);
                if s.sequence() == bell && !answered {
                    found.push(InFlight {
                        port: p,
                        block: s.block,
                        thread: s.thread,
                        service: s.service,
                        name: self.ctx.services.name(s.service),
                        parked: false,
                    });
                }
            }
        }
        found.extend(self.ctx.parked.waiting().into_iter().map(|c| InFlight {
            port: c.port,
            block: c.block,
            thread: c.thread,
            service: c.service,
            name: self.ctx.services.name(c.service),
            parked: true,
        }));
        found
    }

    /// Stops the consumers, drops the pool's queued jobs and the reactor's waiting
    /// calls, serves what was published before the launch ended (until `deadline`),
    /// and forbids any later write to the ports (a pool worker may still be inside a
    /// service); returns how many lane calls were served.
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

/// The end of a run: calls still handed off are answered `Killed` (nobody waits for
/// them), every port with a packet published and not taken is served once more (posted
/// requests published just before the launch ended, or trapped, may not have been
/// served yet), except held ports; then, unless the launch was stopped, the posted
/// calls handed off are waited for; nothing after `deadline`. Then the pool drops what
/// is queued and the reactor what waits. Returns the lanes served.
pub(crate) fn drain(ctx: &Arc<Context>, deadline: Instant) -> u64 {
    // Nobody waits any more: a lane still handed off is answered `Killed`, so its job
    // runs nothing.
    ctx.end_waits();
    let mut scratch = Scratch::new();
    let ports = ctx.ports;
    let mut drained = 0;
    wait::serving_live(false);
    for p in 0..ports.len {
        let bell = ports.doorbell(p);
        if bell == ports.response(p) || ctx.holds.holds(p) {
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
        drained += serve_port(ctx, p, bell, &mut scratch, Mode::Drain).unwrap_or(0);
    }
    // A stopped launch's posted calls are dropped; a finished one's are served.
    if !ctx.killing.load(Relaxed) {
        let left = ctx.posted_out.wait(deadline);
        if left > 0 {
            ctx.log.warn(
                Kind::Unserved,
                format_args!(
                    "{left} posted calls were still being served when the end of the run passed its time limit; their answers are dropped"
                ),
            );
        }
    }
    ctx.end_pool();
    ctx.reactor.forget(ctx, true);
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
    wait::serving_live(true);
    let consumers = parking.parked.len();
    let ports = ctx.ports;
    let mut backoff = Backoff { idle: 0 };
    let mut scratch = Scratch::new();
    // The sequence this consumer last took on each of its ports: it alone serves them,
    // so its own record is the truth.
    let mut answered = vec![0u32; ports.len];
    let mut sweeps = 0u32;
    while !stop.load(Relaxed) {
        let mut served = 0;
        for p in (k..ports.len).step_by(consumers) {
            let bell = ports.doorbell(p);
            if bell != answered[p] && !ctx.holds.holds(p) {
                // A packet left on its port (no room for its output yet) is looked at
                // again on the next sweep.
                if let Some(n) = serve_port(ctx, p, bell, &mut scratch, Mode::Live) {
                    served += n;
                    answered[p] = bell;
                }
            }
        }
        sweeps = sweeps.wrapping_add(1);
        ctx.pool.unstick();
        // When its own sweep was empty, and every 64 sweeps while it is busy.
        if !others.is_empty() && (served == 0 || sweeps.is_multiple_of(64)) {
            parking.wake_pending(ctx, others);
        }
        if served > 0 {
            calls.fetch_add(served, Relaxed);
            backoff.idle = 0;
        } else if k > 0 && backoff.idle >= IDLE_PARK_POLLS {
            parking.park(k, || {
                (k..ports.len)
                    .step_by(consumers)
                    .any(|p| ports.doorbell(p) != answered[p] && !ctx.holds.holds(p))
            });
            // Woken, it polls its ports at once; if they are empty it parks again.
        } else {
            backoff.wait(&ctx.services);
        }
    }
}

/// Serves the packet published on port `p` as sequence `seq` (protocol step 5 in
/// `hostcall_abi`), lane by lane: a lane whose call may block goes to the pool, one
/// whose fd is not ready to the reactor, and the others are answered here. Returns the
/// lanes taken, not counting the collections of parked calls (part of the transport);
/// `None` for a packet left on its port for now ([`admitted`], or a lane for the pool's
/// workers while their queue is full: [`wants_worker`]).
pub(crate) fn serve_port(
    ctx: &Arc<Context>,
    p: usize,
    seq: u32,
    scratch: &mut Scratch,
    mode: Mode,
) -> Option<u64> {
    let ports = ctx.ports;
    let mask = ports.lane_mask(p);
    if mask == 0 {
        ctx.log.warn(
            Kind::Malformed,
            format_args!("malformed packet on port {p}: empty lane mask; answered without serving"),
        );
        ports.store_response(p, seq);
        return Some(0);
    }
    let alone = mask.count_ones() == 1;
    ports.prefetch(p, mask);
    let killing = ctx.killing.load(Relaxed);
    if mode == Mode::Live
        && !killing
        && (!admitted(ctx, p, mask) || (!ctx.pool.has_room() && wants_worker(ctx, p, seq, mask)))
    {
        ports.mark_held_back(p, seq);
        return None;
    }
    let mut held = None;
    let mut collected = 0;
    let mut lanes = mask;
    while lanes != 0 {
        let lane = lanes.trailing_zeros() as usize;
        lanes &= lanes - 1;
        if killing {
            answer_killed(ctx, (p, lane, seq), alone);
            continue;
        }
        // The one read of this lane's slot: everything below uses the copy.
        let slot = ports.slot(p, lane);
        if slot.service == Service::Collect as u32 {
            collect(ctx, (p, lane, seq), alone, &slot);
            collected += 1;
            continue;
        }
        let entry = ctx.services.serving(slot.service);
        if may_block(entry, &slot, seq) {
            // After the launch, a posted call is still served (the end waits for it);
            // nobody is left to wait for any other, which is answered as stopped.
            if mode == Mode::Drain && !slot.posted() {
                ctx.log.warn(
                    Kind::Unserved,
                    format_args!(
                        "a call that may block was published on port {p} as the launch ended; not served"
                    ),
                );
                answer_killed(ctx, (p, lane, seq), alone);
                continue;
            }
            let how = Pooled::of(entry, &slot);
            let h = held.get_or_insert_with(|| ctx.holds.hold(p, seq, alone));
            to_pool(ctx, Deferred::copy_out(ctx, h.clone(), lane, slot), how);
            continue;
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
        if let Some(park) = wait::parked() {
            let h = held.get_or_insert_with(|| ctx.holds.hold(p, seq, alone));
            let waiting = Deferred::copy_out(ctx, h.clone(), lane, slot);
            hand_off(ctx, &waiting);
            wait_for(ctx, waiting, park);
            continue;
        }
        let out = (&scratch.out[..], words.as_ref());
        answer(ctx, (p, lane, seq), alone, status, reply, out.0, out.1);
    }
    match held {
        None => ports.store_response(p, seq),
        // The consumer's share: the last answer, here or in a job, stores `response`.
        Some(h) => h.done(ctx),
    }
    Some((mask.count_ones() - collected) as u64)
}

/// Whether the packet of `mask`'s lanes on port `p` may be taken now: a posted piece
/// for stdout or stderr the host has no room for stays on its port, unserved, until it
/// has (the port waits; nothing is lost). Never so on a continuation port, which the
/// host never holds back (`hostcall_abi::continuation_ports`): there go the pieces that
/// must always find a port for the output to go on. Packets of other calls (their first
/// lane's) are taken at once.
fn admitted(ctx: &Context, p: usize, mask: u32) -> bool {
    let Some(admission) = &ctx.services.admission else {
        return true;
    };
    let kept = continuation_ports(ctx.ports.len as u32) as usize;
    if p >= ctx.ports.len - kept
        || ctx.ports.slot(p, mask.trailing_zeros() as usize).service != Service::WritePosted as u32
    {
        return true;
    }
    let mut lanes = (0..WARP_SIZE)
        .filter(|l| mask & (1 << l) != 0)
        .map(|l| ctx.ports.slot(p, l));
    admission.admits(&mut lanes)
}

/// Whether `slot`'s call, published as `seq`, may block: it is served off the consumer.
#[inline(always)]
fn may_block(entry: Option<&Entry>, slot: &LaneSlot, seq: u32) -> bool {
    slot.sequence() == seq
        && entry.is_some_and(|e| e.can_block && e.handler.may_block(slot.service, &slot.args))
}

/// Whether a lane of the packet of `mask`'s lanes on port `p` would be queued for the
/// blocking pool's workers: while their queue is full such a packet stays on its port,
/// unserved, until it has room (`pool`'s module doc says why that cannot deadlock).
#[cold]
fn wants_worker(ctx: &Context, p: usize, seq: u32, mask: u32) -> bool {
    (0..WARP_SIZE)
        .filter(|l| mask & (1 << l) != 0)
        .map(|l| ctx.ports.slot(p, l))
        .any(|slot| {
            let entry = ctx.services.serving(slot.service);
            may_block(entry, &slot, seq)
                && matches!(
                    Pooled::of(entry, &slot),
                    Pooled::TakesTime | Pooled::MayWait
                )
        })
}

/// Answers lane `lane`'s `Collect` of a parked call with that call's answer
/// (`hostcall_abi::park`); a collection the protocol does not allow (before the wake
/// word, twice, a forged ticket) is malformed.
#[cold]
fn collect(ctx: &Context, at: (usize, usize, u32), alone: bool, slot: &LaneSlot) {
    if slot.sequence() != at.2 {
        let (status, reply) = lane::stale(ctx, slot, at.2);
        return answer(ctx, at, alone, status, reply, &[], None);
    }
    match ctx.parked.collect(Ticket::decode(slot.args[0])) {
        Some(a) => answer(ctx, at, alone, a.status, a.reply, &a.out, a.words.as_ref()),
        None => {
            let why = Malformed(format!(
                "a parked call's answer collected with ticket {:#x}, which has none",
                slot.args[0]
            ));
            let (status, reply) = malformed(ctx, slot, &why);
            answer(ctx, at, alone, status, reply, &[], None);
        }
    }
}

/// Writes lane `lane`'s answer to packet `seq` on port `p` (`Killed` once the launch is
/// being killed).
#[inline]
fn answer(
    ctx: &Context,
    (p, lane, seq): (usize, usize, u32),
    alone: bool,
    status: Status,
    reply: Reply,
    out: &[u8],
    words: Option<&[u64; 4]>,
) {
    let status = if ctx.killing.load(Relaxed) {
        Status::Killed
    } else {
        status
    };
    ctx.ports
        .write_answer((p, lane, seq), alone, status, reply, out, words);
}

/// Answers lane `lane` [`Status::Killed`] without serving it: its thread traps.
fn answer_killed(ctx: &Context, at: (usize, usize, u32), alone: bool) {
    answer(ctx, at, alone, Status::Killed, Reply::errno(EIO), &[], None);
}
