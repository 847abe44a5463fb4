//! Packets whose lanes are answered after their consumer moved on: a lane handed to the
//! blocking pool, or waiting for its fd in the reactor. The port stays the packet's
//! until every lane has an answer on it: its consumer does not serve it again, and the
//! last answer stores `response` (protocol step 5). Stored earlier, a posted packet's
//! next owner would reuse the slots while a late answer was still to be written into
//! them (`hostcall-model`'s pooled host checks this order).
//!
//! A lane handed off is answered on its port exactly once, by whoever moves its state
//! first: the job or waiter that served it (its result), the reactor's timer once it has
//! waited [`hostcall_abi::park::PARK_AFTER_NS`] (a ticket: the call is parked, its port
//! freed, and its result goes to the parked calls' table when it comes), or a stop
//! (`Killed`). A late result of a lane answered otherwise is dropped.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hostcall_abi::WARP_SIZE;
use hostcall_abi::park::Ticket;

use super::Context;
use super::parked::{Answered, Caller};

/// A lane's state: its answer is still to come, on the port.
const WAITING: u64 = 0;
/// A lane's state: it has its answer on the port.
const ANSWERED: u64 = 1;
/// A lane's state bit: it is parked, the rest of the state its ticket.
const PARKED_BIT: u64 = 1 << 63;

/// One packet held past its consumer's sweep.
pub(crate) struct Held {
    pub port: usize,
    pub seq: u32,
    pub alone: bool,
    /// Lanes handed off.
    handed: AtomicU32,
    /// Each lane's state: [`WAITING`], [`ANSWERED`], or parked with a ticket.
    states: [AtomicU64; WARP_SIZE],
    /// Answers on the port not yet written, and one more while the consumer still
    /// serves the packet's other lanes.
    left: AtomicU32,
}

impl Held {
    /// One answer on the port (or the consumer's share) is written: the last stores
    /// `response` and frees the port for its consumer.
    pub fn done(&self, ctx: &Context) {
        if self.left.fetch_sub(1, AcqRel) == 1 {
            // Under the launch's memory: after the run no one writes the ports.
            if let Some(_alive) = ctx.alive.hold() {
                ctx.ports.store_response(self.port, self.seq);
            }
            ctx.holds.release(self.port);
        }
    }

    /// Writes an answer on lane `lane`'s port (its state already moved) and counts it.
    fn answer_port(&self, ctx: &Context, lane: usize, a: &Answered) {
        if let Some(_alive) = ctx.alive.hold() {
            let at = (self.port, lane, self.seq);
            let n = a.reply.bulk_out.min(a.out.len());
            super::answer(
                ctx,
                at,
                self.alone,
                a.status,
                a.reply,
                &a.out[..n],
                a.words.as_ref(),
            );
        }
        self.done(ctx);
    }

    /// Gives lane `lane` its answer: on its port if it still waits there, to the
    /// parked calls' table if it was parked; dropped if a stop answered it.
    pub fn finish(&self, ctx: &Context, lane: usize, a: Answered) {
        let state = &self.states[lane];
        loop {
            let s = state.load(Acquire);
            if s == ANSWERED
                || state
                    .compare_exchange(s, ANSWERED, AcqRel, Acquire)
                    .is_err()
            {
                if s == ANSWERED {
                    return;
                }
                continue;
            }
            if s == WAITING {
                self.answer_port(ctx, lane, &a);
            } else if let Some(_alive) = ctx.alive.hold() {
                ctx.parked.complete(Ticket::decode(s & !PARKED_BIT), a);
            }
            return;
        }
    }

    /// Parks lane `lane` if it still waits for its answer on the port: answers it a
    /// ticket there, which frees the port once the packet's other lanes have theirs.
    /// Nothing when every wake word is taken (it keeps its port).
    pub fn park(&self, ctx: &Context, lane: usize, caller: Caller) {
        if self.states[lane].load(Acquire) != WAITING {
            return;
        }
        let Some(t) = ctx.parked.take(caller) else {
            return;
        };
        let parked = PARKED_BIT | t.encode();
        if self.states[lane]
            .compare_exchange(WAITING, parked, AcqRel, Acquire)
            .is_err()
        {
            ctx.parked.put_back(t);
            return;
        }
        if let Some(_alive) = ctx.alive.hold() {
            ctx.ports.write_parked((self.port, lane, self.seq), t);
        }
        self.done(ctx);
    }

    /// Whether lane `lane` has had its final answer (a result, or a stop's).
    pub fn answered(&self, lane: usize) -> bool {
        self.states[lane].load(Acquire) == ANSWERED
    }

    /// Answers every lane handed off and not yet answered `Killed` (on its port, or in
    /// the parked calls' table). Sequentially consistent with [`Holds::add`], so that
    /// a lane added as a stop comes is seen here or sees the stop.
    fn kill(&self, ctx: &Context) {
        let mut lanes = self.handed.load(SeqCst);
        while lanes != 0 {
            let lane = lanes.trailing_zeros() as usize;
            lanes &= lanes - 1;
            self.finish(ctx, lane, Answered::killed());
        }
    }
}

/// The held packet of each port, if any.
pub(crate) struct Holds {
    /// Per port: whether a packet holds it (read on every sweep of the consumer).
    held: Vec<AtomicBool>,
    packets: Vec<Mutex<Option<Arc<Held>>>>,
}

impl Holds {
    pub fn new(ports: usize) -> Holds {
        Holds {
            held: (0..ports).map(|_| AtomicBool::new(false)).collect(),
            packets: (0..ports).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn slot(&self, p: usize) -> MutexGuard<'_, Option<Arc<Held>>> {
        self.packets[p].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a packet holds port `p`: its consumer must not serve the port.
    pub fn holds(&self, p: usize) -> bool {
        self.held[p].load(Acquire)
    }

    /// Holds port `p` for packet `seq`, whose lanes are handed off with [`Holds::add`];
    /// the consumer's share is released by [`Held::done`] once it has served the rest.
    pub fn hold(&self, p: usize, seq: u32, alone: bool) -> Arc<Held> {
        let held = Arc::new(Held {
            port: p,
            seq,
            alone,
            handed: AtomicU32::new(0),
            states: std::array::from_fn(|_| AtomicU64::new(WAITING)),
            left: AtomicU32::new(1),
        });
        *self.slot(p) = Some(held.clone());
        self.held[p].store(true, Release);
        held
    }

    /// Adds lane `lane` to the lanes `held` hands off (see [`Held::kill`] for the
    /// ordering).
    pub fn add(held: &Held, lane: usize) {
        held.left.fetch_add(1, AcqRel);
        held.handed.fetch_or(1 << lane, SeqCst);
    }

    /// Port `p` is free again.
    fn release(&self, p: usize) {
        *self.slot(p) = None;
        self.held[p].store(false, Release);
    }

    /// Answers every held lane not yet answered `Killed`.
    pub fn kill_all(&self, ctx: &Context) {
        for p in 0..self.packets.len() {
            let held = self.slot(p).clone();
            if let Some(h) = held {
                h.kill(ctx);
            }
        }
    }
}

/// Posted lanes handed off and not yet served. Nobody waits for their answers, but the
/// run's end waits for them (until its time limit), so that a posted call made just
/// before the kernel ended is served, not dropped (`hostcall-model`'s holding host
/// finds the loss otherwise).
#[derive(Default)]
pub(crate) struct PostedOut(Arc<AtomicUsize>);

impl PostedOut {
    /// Counts one more posted lane until the returned guard is dropped.
    pub fn track(&self) -> PostedLane {
        self.0.fetch_add(1, AcqRel);
        PostedLane(self.0.clone())
    }

    /// Waits until every posted lane is served, or `deadline`; returns how many are
    /// left.
    pub fn wait(&self, deadline: Instant) -> usize {
        loop {
            let left = self.0.load(Acquire);
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One posted lane handed off ([`PostedOut::track`]), counted until it is dropped.
pub(crate) struct PostedLane(Arc<AtomicUsize>);

impl Drop for PostedLane {
    fn drop(&mut self) {
        self.0.fetch_sub(1, AcqRel);
    }
}
