//! Lanes a consumer hands off rather than serve at once: to the blocking pool, a job
//! each (a call that may block on a file system runs on a worker, one that may wait on
//! a peer on a waiter of its own), or to the reactor (a call whose fd is not ready);
//! and the parking of one that still waits after `PARK_AFTER_NS`, which frees its
//! port. Nothing handed off runs on a consumer.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::time::{Duration, Instant};

use hostcall_abi::Status;
use hostcall_abi::park::{PARK_AFTER_NS, TAKES_TIME_PARK_AFTER_NS};

use super::*;
use crate::services::wait::Park;
use pool::{Fate, Runs};

/// How a lane handed to the pool may wait, as its service says.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pooled {
    /// It only takes time (`Handler::only_takes_time`): it runs on a worker, and keeps
    /// its port unless it has waited `TAKES_TIME_PARK_AFTER_NS` (a hung mount).
    TakesTime,
    /// It may take long, but waits on nobody: it runs on a worker, and is parked once
    /// it has waited `PARK_AFTER_NS`.
    MayWait,
    /// It may wait on another party as long as that likes (`Handler::waits_on_peer`):
    /// parked as well, and it runs on a waiter of its own, never on a worker.
    OnPeer,
    /// As `OnPeer`, and known to wait long (`Handler::parks_at_once`): parked at once.
    OnPeerLong,
}

impl Pooled {
    pub(super) fn of(entry: Option<&Entry>, slot: &LaneSlot) -> Pooled {
        let Some(e) = entry else {
            return Pooled::MayWait;
        };
        if e.handler.waits_on_peer(slot.service, &slot.args) {
            if e.handler.parks_at_once(slot.service, &slot.args) {
                Pooled::OnPeerLong
            } else {
                Pooled::OnPeer
            }
        } else if e.handler.only_takes_time(slot.service, &slot.args) {
            Pooled::TakesTime
        } else {
            Pooled::MayWait
        }
    }
}

/// Hands `lane` to the blocking pool as a job of its own: a call that waits on another
/// party to a waiter of its own, any other to the workers. A lane no thread can take is
/// answered `EAGAIN`; it never runs on the consumer, which would stop serving its ports
/// for as long as the call waits.
pub(super) fn to_pool(ctx: &Arc<Context>, lane: Deferred, how: Pooled) {
    hand_off(ctx, &lane);
    let after = match how {
        Pooled::TakesTime => TAKES_TIME_PARK_AFTER_NS,
        Pooled::MayWait | Pooled::OnPeer => PARK_AFTER_NS,
        Pooled::OnPeerLong => 0,
    };
    park_later(ctx, &lane, after);
    let job_ctx = ctx.clone();
    let job: pool::Job = Box::new(move |fate| {
        // A run that ended, or is being stopped, starts no more work: a stop answers
        // the lane, and after the run nobody waits for it; nor does a lane already
        // answered (`Killed`, by the end of waits).
        if !job_ctx.may_serve() || lane.stopped() {
            return;
        }
        let mut lane = lane;
        if fate == Fate::Refused {
            return lane.answer(&job_ctx, (Status::Ok, Reply::errno(EAGAIN)));
        }
        match lane.run(&job_ctx) {
            Ran::Answered(status, reply) => lane.answer(&job_ctx, (status, reply)),
            Ran::Parked(park) => wait_for(&job_ctx, lane, park),
        }
    });
    let runs = match how {
        Pooled::OnPeer | Pooled::OnPeerLong => Runs::OnWaiter,
        Pooled::TakesTime | Pooled::MayWait => Runs::OnWorker,
    };
    ctx.pool.submit(job, runs);
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
/// over, lets it go once the run is over, and runs it again at once, as if its time
/// were up, if the reactor cannot take it.
pub(super) fn wait_for(ctx: &Arc<Context>, lane: Deferred, park: Park) {
    if lane.attempt_is_first() {
        park_later(ctx, &lane, PARK_AFTER_NS);
    }
    if ctx.waits_ended.load(Acquire) && !lane.posted() {
        lane.answer(ctx, (Status::Killed, Reply::errno(EIO)));
        return;
    }
    match ctx.reactor.wait(ctx, lane, park) {
        // The run's end, or a stop, that came while it was being filed may have let the
        // launch's waiting calls go before it was there; it goes as they did (a stop has
        // answered it, if it is not posted: it was held before). They set their flag
        // and then take the reactor's lock; this filed it under the lock and then reads
        // the flag: one of the two sees the other. Filed for good after the run, a
        // posted call would run its service again once its fd is ready, and hold the
        // fd open meanwhile.
        Ok(()) if ctx.ended.load(Acquire) => ctx.reactor.forget(ctx, true),
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
/// `after_ns`: its port is then freed for other calls while it waits.
pub(super) fn park_later(ctx: &Arc<Context>, lane: &Deferred, after_ns: u64) {
    if lane.posted() {
        return;
    }
    let at = Instant::now() + Duration::from_nanos(after_ns);
    let caller = parked::Caller {
        port: lane.held.port,
        block: lane.slot.block,
        thread: lane.slot.thread,
        service: lane.slot.service,
    };
    ctx.reactor
        .park_at(ctx, (lane.held.clone(), lane.lane, caller), at);
}

#[cfg(test)]
mod tests {
    use std::alloc::Layout;
    use std::io::Write;
    use std::sync::atomic::{AtomicU32, AtomicUsize};
    use std::sync::mpsc;

    use hostcall_abi::{Port, SLOT_POSTED};

    use super::*;
    use crate::services::wait::{Interest, Watch};
    use crate::services::{Call, Handler, Malformed};

    /// A service that may block whose calls wait on `file`: the first waits for `go`
    /// (saying it has begun on `began`), then asks to be run again once `file` is
    /// readable; every call counts itself in `calls`.
    struct WaitsOnFile {
        file: Arc<std::fs::File>,
        calls: AtomicUsize,
        began: mpsc::Sender<()>,
        go: Mutex<mpsc::Receiver<()>>,
    }

    impl Handler for WaitsOnFile {
        fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
            if self.calls.fetch_add(1, SeqCst) == 0 {
                let _ = self.began.send(());
                let _ = self.go.lock().unwrap().recv();
            }
            let watch = Watch {
                file: self.file.clone(),
                token: 1,
                interest: Interest::READ,
            };
            Ok(Reply::errno(wait::until_ready(vec![watch], None, 0).0))
        }

        fn can_block(&self, _: u32) -> bool {
            true
        }
    }

    /// A posted call whose pool job is still in its service when the run ends, and then
    /// asks to wait on an fd, is not filed in the reactor: its service never runs again
    /// after the run, and the reactor lets its file go.
    #[test]
    fn a_posted_call_that_asks_to_wait_after_the_run_is_not_filed() {
        let (read, mut write) = std::io::pipe().unwrap();
        let file = Arc::new(std::fs::File::from(std::os::fd::OwnedFd::from(read)));
        let (began_tx, began) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let service = Arc::new(WaitsOnFile {
            file: file.clone(),
            calls: AtomicUsize::new(0),
            began: began_tx,
            go: Mutex::new(go_rx),
        });
        // The test's and the service's.
        let held_outside = Arc::strong_count(&file);
        let mut services = ServiceTable::default();
        services.register(20, service.clone());
        let layout = Layout::new::<Port>();
        // SAFETY: `Port` is not zero-sized; zeroed memory is a valid idle port.
        let port = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Port>();
        assert!(!port.is_null());
        let doorbell = AtomicU32::new(0);
        let wake: Vec<AtomicU64> = (0..WARP_SIZE).map(|_| AtomicU64::new(0)).collect();
        let ports = Ports {
            base: port,
            doorbells: &doorbell,
            len: 1,
            wake: wake.as_ptr(),
            wake_words: wake.len(),
        };
        let ctx = Context::new(
            ports,
            Arc::new(services),
            1,
            Tracing::default(),
            Arc::default(),
            Arc::default(),
        );
        let slot = LaneSlot {
            service: 20,
            seq: 1 | SLOT_POSTED,
            block: 0,
            thread: 0,
            args: [0; 6],
        };
        // SAFETY: the port is live and no server thread serves it yet.
        unsafe {
            (&raw mut (*port).lanes[0]).write(slot);
            (*port).header.lane_mask.store(1, Relaxed);
        }
        doorbell.store(1, Release);
        serve_port(&ctx, 0, 1, &mut Scratch::new(), Mode::Live).unwrap();
        began.recv_timeout(Duration::from_secs(10)).unwrap();
        drain(&ctx, Instant::now() + Duration::from_millis(20));
        go.send(()).unwrap();
        let gone = Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&file) > held_outside && Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(1));
        }
        write.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let (held, calls) = (Arc::strong_count(&file), service.calls.load(SeqCst));
        drop(ctx);
        // SAFETY: allocated above with this layout; the run is over and nothing writes
        // the port any more.
        unsafe { std::alloc::dealloc(port.cast(), layout) };
        assert_eq!(calls, 1, "the service ran again after the run");
        assert_eq!(
            held, held_outside,
            "the reactor holds the file after the run"
        );
    }
}
