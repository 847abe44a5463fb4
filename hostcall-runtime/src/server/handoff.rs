//! Lanes a consumer hands off rather than serve at once: to the blocking pool, a job
//! each (a call that may block on a file system, or wait on a peer), or to the reactor
//! (a call whose fd is not ready); and the parking of one that still waits after
//! `PARK_AFTER_NS`, which frees its port.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::time::{Duration, Instant};

use hostcall_abi::Status;
use hostcall_abi::park::PARK_AFTER_NS;

use super::*;
use crate::services::wait::Park;

/// How a lane handed to the pool may wait, as its service says.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pooled {
    /// It only takes time (`Handler::only_takes_time`): it keeps its port.
    TakesTime,
    /// It may wait for long: it is parked once it has waited `PARK_AFTER_NS`.
    MayWait,
    /// It may wait on another party as long as that likes (`Handler::waits_on_peer`):
    /// parked as well, and it gets a worker if none is idle.
    OnPeer,
}

impl Pooled {
    pub(super) fn of(entry: Option<&Entry>, slot: &LaneSlot) -> Pooled {
        let Some(e) = entry else {
            return Pooled::MayWait;
        };
        if e.handler.waits_on_peer(slot.service, &slot.args) {
            Pooled::OnPeer
        } else if e.handler.only_takes_time(slot.service, &slot.args) {
            Pooled::TakesTime
        } else {
            Pooled::MayWait
        }
    }
}

/// Hands `lane` to the blocking pool as a job of its own.
pub(super) fn to_pool(ctx: &Arc<Context>, lane: Deferred, how: Pooled) {
    hand_off(ctx, &lane);
    if how != Pooled::TakesTime {
        park_later(ctx, &lane);
    }
    let job_ctx = ctx.clone();
    let job: pool::Job = Box::new(move || {
        // A run that ended, or is being stopped, starts no more work: a stop answers
        // the lane, and after the run nobody waits for it; nor does a lane already
        // answered (`Killed`, by the end of waits).
        if !job_ctx.may_serve() || lane.stopped() {
            return;
        }
        let mut lane = lane;
        match lane.run(&job_ctx) {
            Ran::Answered(status, reply) => lane.answer(&job_ctx, (status, reply)),
            Ran::Parked(park) => wait_for(&job_ctx, lane, park),
        }
    });
    match ctx.pool.submit(job, how == Pooled::OnPeer) {
        Ok(()) => {}
        // No thread to run it on: serve it here rather than never.
        Err(job) if !ctx.pool.is_closed() => job(),
        Err(_) => {}
    }
}

/// Counts `lane` among its packet's lanes handed off (a posted lane holds nothing), and
/// answers it `Killed` at once if waits have ended: the stop may have answered its
/// packet's lanes before this one was among them. The stop stores `waits_ended` and
/// then reads the lanes handed off; this adds the lane and then reads `waits_ended`;
/// all four sequentially consistent, so one of the two sees the other
/// (`hostcall-model`'s holding host finds the lane nobody answers without this).
pub(super) fn hand_off(ctx: &Context, lane: &Deferred) {
    if lane.posted() {
        return;
    }
    Holds::add(&lane.held, lane.lane);
    if ctx.waits_ended.load(SeqCst) {
        lane.held.finish(ctx, lane.lane, parked::Answered::killed());
    }
}

/// Makes `lane` wait in the reactor as `park` asks; answers it `Killed` once waits are
/// over, and runs it again at once, as if its time were up, if the reactor cannot take
/// it.
pub(super) fn wait_for(ctx: &Arc<Context>, lane: Deferred, park: Park) {
    if lane.attempt_is_first() {
        park_later(ctx, &lane);
    }
    if ctx.waits_ended.load(Acquire) && !lane.posted() {
        lane.answer(ctx, (Status::Killed, Reply::errno(EIO)));
        return;
    }
    match ctx.reactor.wait(ctx, lane, park) {
        // A stop that came while it was being filed has answered it (it was held
        // before), but may have looked in the reactor before it was there.
        Ok(()) if ctx.waits_ended.load(Acquire) => ctx.reactor.forget(ctx, false),
        Ok(()) => {}
        Err(mut lane) => {
            // As if its time were up: a call past its deadline answers without waiting.
            lane.attempt = lane.attempt.again(true);
            let answered = match lane.run(ctx) {
                Ran::Answered(status, reply) => (status, reply),
                Ran::Parked(_) => (Status::Ok, Reply::errno(EAGAIN)),
            };
            lane.answer(ctx, answered);
        }
    }
}

/// Parks `lane`, just handed off, if it still waits for its answer on its port after
/// `PARK_AFTER_NS`: its port is then freed for other calls while it waits.
pub(super) fn park_later(ctx: &Arc<Context>, lane: &Deferred) {
    if lane.posted() {
        return;
    }
    let at = Instant::now() + Duration::from_nanos(PARK_AFTER_NS);
    let caller = parked::Caller {
        port: lane.held.port,
        block: lane.slot.block,
        thread: lane.slot.thread,
        service: lane.slot.service,
    };
    ctx.reactor
        .park_at(ctx, (lane.held.clone(), lane.lane, caller), at);
}
