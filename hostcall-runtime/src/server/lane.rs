//! One lane's request, served: the service looked up and called on a copy of the
//! request, a panic turned into `EIO`, the rare cases (a stale slot, a finished
//! service, an id nobody serves, tracing) kept out of line. And a lane handed off, to
//! the blocking pool or the reactor, with its request copied out of the port.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use hostcall_abi::errno::{EINVAL, EIO, ENOSYS, EPIPE};
use hostcall_abi::{LaneSlot, Status};

use super::hold::{Held, PostedLane};
use super::parked::Answered;
use super::{Context, HANDLER_PANICS, shared};
use crate::guest_log::{Kind, Who, escaped};
use crate::services::wait::{self, Attempt, Park};
use crate::services::{Call, Entry, Handler, Malformed, Reply, Unserved};

/// A lane handed off by its consumer: its request copied out of the port (the slot and
/// the input bytes its service declares, or why they broke its rules), and room for its
/// answer. Answered through its packet's [`Held`].
pub(crate) struct Deferred {
    pub held: Arc<Held>,
    pub lane: usize,
    pub slot: LaneSlot,
    input: Result<Vec<u8>, Malformed>,
    /// Room for the answer's bytes while the service runs: what its handler says the
    /// answer may fill ([`Handler::answer_len`], at most `cap`), so that a call waiting
    /// inside its handler keeps no more than its answer needs; emptied while the call
    /// waits in the reactor, and cut to the answer once answered.
    out: Vec<u8>,
    /// Bytes of the lane's bulk buffer.
    cap: usize,
    words: Option<[u64; 4]>,
    /// How far the call has come, for a call that waits on an fd and is tried again.
    pub attempt: Attempt,
    /// A posted lane's count in the run's posted lanes: it holds nothing on its port,
    /// is never parked, and its answer is dropped.
    posted: Option<PostedLane>,
}

/// What running a [`Deferred`] lane came to.
pub(crate) enum Ran {
    /// Its answer.
    Answered(Status, Reply),
    /// It waits until an fd is ready (or a deadline passes), to be run again.
    Parked(Park),
}

impl Deferred {
    /// Lane `lane` of `held`'s packet, its slot already read: copies its input bytes out
    /// of the port.
    pub fn copy_out(ctx: &Context, held: Arc<Held>, lane: usize, slot: LaneSlot) -> Deferred {
        let (at, cap) = ctx.ports.bulk(held.port, lane, held.alone);
        let mut input = Vec::new();
        let copied = copy_input(
            ctx.services.serving(slot.service),
            &slot,
            at,
            cap,
            &mut input,
        );
        Deferred {
            held,
            lane,
            slot,
            input: copied.map(|()| input),
            out: Vec::new(),
            cap,
            words: None,
            attempt: Attempt::first(true),
            posted: slot.posted().then(|| ctx.posted_out.track()),
        }
    }

    /// Whether the lane is posted: nobody waits for its answer.
    pub fn posted(&self) -> bool {
        self.posted.is_some()
    }

    /// Runs its service (again, for a lane that waited on an fd).
    pub fn run(&mut self, ctx: &Context) -> Ran {
        let entry = ctx.services.serving(self.slot.service);
        let (port, seq) = (self.held.port, self.held.seq);
        let attempt = wait::Attempting::enter(self.attempt);
        let room = match (&self.input, entry) {
            (Ok(input), Some(e)) => {
                let s = &self.slot;
                e.handler.answer_len(s.service, &s.args, input, self.cap)
            }
            _ => 0,
        };
        self.out.resize(room.min(self.cap), 0);
        let (status, reply) = match &self.input {
            Ok(input) => run_lane(
                ctx,
                entry,
                (port, &self.slot),
                seq,
                input,
                &mut self.out,
                &mut self.words,
            ),
            Err(m) => malformed(ctx, &self.slot, m),
        };
        match attempt.parked() {
            Some(park) => {
                // A call tried again writes its answer anew.
                self.out = Vec::new();
                self.attempt = park.attempt;
                Ran::Parked(park)
            }
            None => Ran::Answered(status, reply),
        }
    }

    /// Answers the lane: on its port, or, parked, in the parked calls' table; nothing
    /// once a stop has answered it, nor for a posted lane.
    pub fn answer(self, ctx: &Context, (status, reply): (Status, Reply)) {
        if self.posted() {
            return;
        }
        let mut out = self.out;
        out.truncate(reply.bulk_out.min(out.len()));
        out.shrink_to_fit();
        let answered = Answered {
            status,
            reply,
            out,
            words: self.words,
        };
        self.held.finish(ctx, self.lane, answered);
    }

    /// Whether it has not waited yet (handed off for the first time).
    pub fn attempt_is_first(&self) -> bool {
        self.attempt.is_first()
    }

    /// Whether the lane has had its final answer (a stop's): nothing more to do for it.
    pub fn stopped(&self) -> bool {
        self.held.answered(self.lane)
    }
}

/// Copies the input bytes `slot`'s service declares, from the lane's bulk buffer at `at`
/// (`cap` bytes), into `into`.
pub(crate) fn copy_input(
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
pub(crate) fn malformed(ctx: &Context, slot: &LaneSlot, m: &Malformed) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Malformed,
        format_args!(
            "malformed {} request from GPU thread ({}): {}",
            ctx.services.name(slot.service),
            who(ctx, slot),
            escaped(m.0.as_bytes())
        ),
    );
    (Status::Malformed, Reply::errno(EINVAL))
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
pub(crate) fn run_lane(
    ctx: &Context,
    entry: Option<&Entry>,
    (port, slot): (usize, &LaneSlot),
    seq: u32,
    input: &[u8],
    out: &mut [u8],
    words: &mut Option<[u64; 4]>,
) -> (Status, Reply) {
    if slot.sequence() != seq {
        return stale(ctx, slot, seq);
    }
    // A service with a lifetime is charged once per call (not again when a call that
    // waited is tried again), and not for a request it refuses as malformed.
    let charged = match entry.and_then(|e| e.life.as_deref()) {
        Some(life) if wait::first_attempt() => match life.take() {
            Some(epoch) => Some((life, epoch)),
            None => return finished(ctx, slot),
        },
        _ => None,
    };
    let answered = if ctx.debug.trace || ctx.debug.summary {
        run_lane_observed(ctx, entry, (port, slot), (input, out, words))
    } else {
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
    };
    if answered.0 == Status::Malformed
        && let Some((life, epoch)) = charged
    {
        life.refund(epoch);
    }
    answered
}

/// The answer to a call of a service whose lifetime has ended: `EPIPE`, and a line
/// naming the GPU thread and the service.
#[cold]
fn finished(ctx: &Context, slot: &LaneSlot) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Finished,
        format_args!(
            "GPU thread ({}) called {}, which has finished serving (its lifetime ended or the host called finish()): answered EPIPE",
            who(ctx, slot),
            ctx.services.name(slot.service)
        ),
    );
    (Status::Ok, Reply::errno(EPIPE))
}

/// The answer to a slot written for another sequence than the one published.
#[cold]
pub(crate) fn stale(ctx: &Context, slot: &LaneSlot, seq: u32) -> (Status, Reply) {
    ctx.log.warn(
        Kind::Malformed,
        format_args!(
            "malformed slot: written for sequence {}, published as {seq}",
            slot.sequence()
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
                who(ctx, slot),
            ),
            None => log::info!(
                target: "hostcall",
                "{:#} {name}#{:#x}({:#x}, {:#x}, {:#x}) -> {} {status:?} in {took:.1?}",
                who(ctx, slot),
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
                    who(ctx, slot)
                ),
            );
            (Status::UnknownService, Reply::errno(ENOSYS))
        }
        Unserved::Halt => {
            ctx.halt(format!(
                "GPU thread ({}) called service id {:#x}, which no handler serves, and the run halts (HostBuilder::unserved or a default handler changes that)",
                who(ctx, slot),
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
                    who(ctx, slot),
                    escaped(why.as_bytes())
                ),
            );
            (Status::Ok, Reply::errno(EIO))
        }
    }
}

/// The thread whose lane `slot` is, as the host's lines name it.
fn who(ctx: &Context, slot: &hostcall_abi::LaneSlot) -> Who {
    Who {
        gpu: ctx.debug.gpu,
        block: slot.block,
        thread: slot.thread,
    }
}
