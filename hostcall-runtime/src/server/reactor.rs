//! The reactor: one host thread that waits on every fd a GPU thread's call waits for
//! (`services::wait`), and runs the call again once its fd is ready or its deadline
//! passes. One per process (the launches of a run over several GPUs share its files),
//! started by the first call that waits.
//!
//! Each fd is registered with epoll once, level-triggered and one-shot: armed for the
//! union of what its waiting calls want, disarmed by the event that wakes them, and
//! armed again while some still wait. A call that finds its fd not ready waits here
//! until an attempt completes; a one-shot event never wakes the thread for an fd nobody
//! waits on. (mio, the crate tokio stands on, registers fds edge-triggered for the
//! life of a connection; a lane's wait is one-shot, so epoll is used directly.)
//!
//! A call that waits holds its file: a socket another GPU thread closes stays open
//! until its waiters are answered ([`Reactor::cancel`] answers them `EBADF`), and a
//! launch's end drops its waiters ([`Reactor::forget`]), closing what only they held.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use hostcall_abi::Status;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{EventfdFlags, Timespec, eventfd};

use super::Context;
use super::hold::Held;
use super::lane::{Deferred, Ran};
use super::parked::Caller;
use crate::services::Reply;
use crate::services::wait::{Interest, Park, Waiters, Watch};

/// The epoll key of the reactor's own wake-up eventfd.
const WAKE: u64 = u64::MAX;

/// Events taken from epoll at once.
const EVENTS: usize = 256;

/// A call waiting, with the launch it belongs to.
struct Waiter {
    lane: Deferred,
    ctx: Weak<Context>,
    tokens: Vec<u64>,
    deadline: Option<Instant>,
}

/// An fd some calls wait on.
struct Watched {
    file: Arc<std::fs::File>,
    /// Waiter ids and what each waits for.
    waiters: Vec<(u64, Interest)>,
    /// What epoll has it armed for, if armed.
    armed: Option<Interest>,
    /// Whether epoll has it at all.
    added: bool,
}

/// A lane handed off, to be parked if it still waits on its port at its time.
struct ToPark {
    ctx: Weak<Context>,
    held: Arc<Held>,
    lane: usize,
    caller: Caller,
}

#[derive(Default)]
struct State {
    waiters: HashMap<u64, Waiter>,
    next: u64,
    watched: HashMap<u64, Watched>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// Lanes to park, by when.
    parks: BTreeSet<(Instant, u64)>,
    to_park: HashMap<u64, ToPark>,
}

impl State {
    /// When the thread must next wake up: a waiter's deadline or a lane's parking.
    fn next_time(&self) -> Option<Instant> {
        let d = self.deadlines.first().map(|d| d.0);
        let p = self.parks.first().map(|p| p.0);
        d.into_iter().chain(p).min()
    }
}

struct Inner {
    epoll: OwnedFd,
    wake: OwnedFd,
    state: Mutex<State>,
    stop: AtomicBool,
}

/// The process's reactor: nothing until the first call waits, then its epoll fds and
/// its thread.
#[derive(Default)]
pub(crate) struct Reactor {
    running: Mutex<Option<Running>>,
    stopped: AtomicBool,
}

struct Running {
    inner: Arc<Inner>,
    thread: JoinHandle<()>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    /// Arms or drops `token`'s registration after its waiters changed: armed for what
    /// they wait for while any does; removed (its file let go) when none does.
    fn rearm(&self, s: &mut State, token: u64) {
        let Some(w) = s.watched.get_mut(&token) else {
            return;
        };
        w.waiters.retain(|(id, _)| s.waiters.contains_key(id));
        if w.waiters.is_empty() {
            if w.added {
                let _ = epoll::delete(&self.epoll, &*w.file);
            }
            s.watched.remove(&token);
            return;
        }
        let want = w.waiters.iter().fold(
            Interest {
                read: false,
                write: false,
            },
            |a, (_, i)| a.union(*i),
        );
        if w.armed == Some(want) {
            return;
        }
        let mut flags = EventFlags::ONESHOT | EventFlags::RDHUP;
        if want.read {
            flags |= EventFlags::IN;
        }
        if want.write {
            flags |= EventFlags::OUT;
        }
        let data = EventData::new_u64(token);
        let done = if w.added {
            epoll::modify(&self.epoll, &*w.file, data, flags)
        } else {
            epoll::add(&self.epoll, &*w.file, data, flags)
        };
        match done {
            Ok(()) => {
                w.added = true;
                w.armed = Some(want);
            }
            Err(e) => {
                // An fd epoll cannot watch: its waiters are run again at once, as if
                // their time were up, and answer without waiting.
                log::warn!("waiting on a GPU fd: epoll refused it ({e}); its calls answer now");
                let now = Instant::now();
                let ids: Vec<u64> = w.waiters.iter().map(|(id, _)| *id).collect();
                for id in ids {
                    if let Some(waiter) = s.waiters.get_mut(&id) {
                        if let Some(d) = waiter.deadline.take() {
                            s.deadlines.remove(&(d, id));
                        }
                        waiter.deadline = Some(now);
                        s.deadlines.insert((now, id));
                    }
                }
            }
        }
    }

    /// Files `lane` to wait as `park` asks; whether its deadline comes before every
    /// other (the thread must wake to wait less).
    fn add(&self, s: &mut State, ctx: &Arc<Context>, mut lane: Deferred, park: Park) -> bool {
        lane.attempt = park.attempt;
        let id = s.next;
        s.next += 1;
        let earliest = s.next_time();
        if let Some(d) = park.deadline {
            s.deadlines.insert((d, id));
        }
        s.waiters.insert(
            id,
            Waiter {
                lane,
                ctx: Arc::downgrade(ctx),
                tokens: park.watches.iter().map(|w| w.token).collect(),
                deadline: park.deadline,
            },
        );
        for Watch {
            file,
            token,
            interest,
        } in park.watches
        {
            let w = s.watched.entry(token).or_insert_with(|| Watched {
                file,
                waiters: Vec::new(),
                armed: None,
                added: false,
            });
            w.waiters.push((id, interest));
            self.rearm(s, token);
        }
        park.deadline
            .is_some_and(|d| earliest.is_none_or(|e| d < e))
    }

    /// Takes every waiter `which` picks out of every list, and lets go of the files no
    /// one waits on any more.
    /// [`Reactor::forget`], on the running reactor.
    fn forget(&self, ctx: &Context, posted: bool) {
        drop(
            self.take_where(|w| std::ptr::eq(w.ctx.as_ptr(), ctx) && (posted || !w.lane.posted())),
        );
        let mut s = self.lock();
        s.to_park.retain(|_, p| !std::ptr::eq(p.ctx.as_ptr(), ctx));
        let State { parks, to_park, .. } = &mut *s;
        parks.retain(|(_, id)| to_park.contains_key(id));
    }

    fn take_where(&self, which: impl Fn(&Waiter) -> bool) -> Vec<Waiter> {
        let mut s = self.lock();
        let ids: Vec<u64> = s
            .waiters
            .iter()
            .filter(|(_, w)| which(w))
            .map(|(id, _)| *id)
            .collect();
        let taken: Vec<Waiter> = ids
            .into_iter()
            .filter_map(|id| self.take(&mut s, id))
            .collect();
        let tokens: BTreeSet<u64> = taken
            .iter()
            .flat_map(|w| w.tokens.iter().copied())
            .collect();
        for t in tokens {
            self.rearm(&mut s, t);
        }
        taken
    }

    /// Takes waiter `id` out of every list.
    fn take(&self, s: &mut State, id: u64) -> Option<Waiter> {
        let w = s.waiters.remove(&id)?;
        if let Some(d) = w.deadline {
            s.deadlines.remove(&(d, id));
        }
        Some(w)
    }
}

impl Reactor {
    /// The running reactor, started now if it was not (`None`: stopped, or it could not
    /// start).
    fn inner(&self, start: bool) -> Option<Arc<Inner>> {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = &*r {
            return Some(r.inner.clone());
        }
        if !start || self.stopped.load(Acquire) {
            return None;
        }
        let started = (|| -> std::io::Result<Running> {
            let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
            let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            epoll::add(&epoll, &wake, EventData::new_u64(WAKE), EventFlags::IN)?;
            let inner = Arc::new(Inner {
                epoll,
                wake,
                state: Mutex::default(),
                stop: AtomicBool::new(false),
            });
            let i = inner.clone();
            let thread = std::thread::Builder::new()
                .name("hostcall-reactor".into())
                .spawn(move || run(&i))?;
            Ok(Running { inner, thread })
        })();
        match started {
            Ok(running) => {
                let inner = running.inner.clone();
                *r = Some(running);
                Some(inner)
            }
            Err(e) => {
                log::warn!(
                    "starting the thread that waits on GPU fds: {e}; such calls answer EAGAIN"
                );
                None
            }
        }
    }

    /// Makes `lane` wait as `park` asks; once any watch is ready, or at the deadline,
    /// the reactor runs it again and answers it (or waits again). `lane` comes back if
    /// it cannot wait (the reactor has stopped, or could not start).
    pub fn wait(
        &self,
        ctx: &Arc<Context>,
        lane: Deferred,
        park: Park,
    ) -> Result<(), Box<Deferred>> {
        let Some(inner) = self.inner(true) else {
            return Err(Box::new(lane));
        };
        if inner.add(&mut inner.lock(), ctx, lane, park) {
            inner.wake();
        }
        Ok(())
    }

    /// Parks lane `lane` of `held`'s packet at `at` if it still waits for its answer on
    /// its port then (`Held::park`). Nothing if the reactor cannot run: the lane keeps
    /// its port.
    pub fn park_at(
        &self,
        ctx: &Arc<Context>,
        (held, lane, caller): (Arc<Held>, usize, Caller),
        at: Instant,
    ) {
        let Some(inner) = self.inner(true) else {
            return;
        };
        let mut s = inner.lock();
        let id = s.next;
        s.next += 1;
        let earliest = s.next_time();
        s.parks.insert((at, id));
        s.to_park.insert(
            id,
            ToPark {
                ctx: Arc::downgrade(ctx),
                held,
                lane,
                caller,
            },
        );
        drop(s);
        if earliest.is_none_or(|e| at < e) {
            inner.wake();
        }
    }

    /// Drops every call of `ctx`'s launch still waiting (the launch ended, or was
    /// stopped, and a stop answers them), posted ones only with `posted` (nobody waits
    /// for them, and the run's end serves them while it can): the files only they held
    /// close.
    pub fn forget(&self, ctx: &Context, posted: bool) {
        if let Some(inner) = self.inner(false) {
            inner.forget(ctx, posted);
        }
    }

    /// Stops the thread and lets every waiting call and file go (the process ended).
    pub fn stop(&self) {
        self.stopped.store(true, Release);
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(Running { inner, thread }) = running else {
            return;
        };
        inner.stop.store(true, Release);
        inner.wake();
        // A panic in the thread has been reported by the panic hook.
        let _ = thread.join();
        let mut s = inner.lock();
        for w in std::mem::take(&mut s.watched).into_values() {
            if w.added {
                let _ = epoll::delete(&inner.epoll, &*w.file);
            }
        }
        let waiters = std::mem::take(&mut s.waiters);
        let to_park = std::mem::take(&mut s.to_park);
        s.deadlines.clear();
        s.parks.clear();
        drop(s);
        drop((waiters, to_park));
    }
}

impl Waiters for Reactor {
    fn cancel(&self, token: u64, errno: i32) {
        let Some(inner) = self.inner(false) else {
            return;
        };
        let taken = inner.take_where(|w| w.tokens.contains(&token));
        for w in taken {
            if let Some(ctx) = w.ctx.upgrade() {
                w.lane.answer(&ctx, (Status::Ok, Reply::errno(errno)));
            }
        }
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The reactor's thread: waits for events or the next deadline, runs the calls they
/// concern again (outside the lock: consumers add waiters meanwhile), and files those
/// that must wait on.
fn run(inner: &Inner) {
    let mut events = Vec::with_capacity(EVENTS);
    while !inner.stop.load(Acquire) {
        let next = inner.lock().next_time();
        let timeout = next.map(|d| {
            Timespec::try_from(d.saturating_duration_since(Instant::now())).unwrap_or_default()
        });
        events.clear();
        match epoll::wait(
            &inner.epoll,
            rustix::buffer::spare_capacity(&mut events),
            timeout.as_ref(),
        ) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                log::error!("waiting on GPU fds: epoll failed ({e}); the reactor stops");
                return;
            }
        }
        if inner.stop.load(Acquire) {
            return;
        }
        let mut due: Vec<(Waiter, bool)> = Vec::new();
        let mut to_park: Vec<ToPark> = Vec::new();
        let mut touched = Vec::new();
        {
            let mut s = inner.lock();
            for ev in &events {
                let token = ev.data.u64();
                if token == WAKE {
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&inner.wake, &mut b);
                    continue;
                }
                let flags = ev.flags;
                let Some(w) = s.watched.get_mut(&token) else {
                    continue;
                };
                w.armed = None;
                let all = flags.intersects(EventFlags::ERR | EventFlags::HUP | EventFlags::RDHUP);
                let ready = |i: &Interest| {
                    all || (i.read && flags.contains(EventFlags::IN))
                        || (i.write && flags.contains(EventFlags::OUT))
                };
                let ids: Vec<u64> = w
                    .waiters
                    .iter()
                    .filter(|(_, i)| ready(i))
                    .map(|(id, _)| *id)
                    .collect();
                touched.push(token);
                for id in ids {
                    if let Some(waiter) = inner.take(&mut s, id) {
                        touched.extend(waiter.tokens.iter().copied());
                        due.push((waiter, false));
                    }
                }
            }
            let now = Instant::now();
            while let Some(&(d, id)) = s.deadlines.first() {
                if d > now {
                    break;
                }
                s.deadlines.pop_first();
                if let Some(mut waiter) = s.waiters.remove(&id) {
                    waiter.deadline = None;
                    touched.extend(waiter.tokens.iter().copied());
                    due.push((waiter, true));
                }
            }
            while let Some(&(at, id)) = s.parks.first() {
                if at > now {
                    break;
                }
                s.parks.pop_first();
                to_park.extend(s.to_park.remove(&id));
            }
            touched.sort_unstable();
            touched.dedup();
            for &t in &touched {
                inner.rearm(&mut s, t);
            }
        }
        for p in to_park {
            if let Some(ctx) = p.ctx.upgrade() {
                p.held.park(&ctx, p.lane, p.caller);
            }
        }
        for (waiter, expired) in due {
            serve_again(inner, waiter, expired);
        }
    }
}

/// Runs a waiting call again: answers it, or files it to wait again.
fn serve_again(inner: &Inner, mut w: Waiter, expired: bool) {
    let Some(ctx) = w.ctx.upgrade() else {
        return;
    };
    // No service runs for a launch after its run: nobody waits for the answer, and the
    // run's end has let its waiting calls go.
    if w.lane.stopped() || ctx.ended.load(Acquire) {
        return;
    }
    w.lane.attempt = w.lane.attempt.again(expired);
    match w.lane.run(&ctx) {
        Ran::Answered(status, reply) => w.lane.answer(&ctx, (status, reply)),
        // The reactor's own thread: the next turn of its loop sees the deadline.
        Ran::Parked(park) => {
            inner.add(&mut inner.lock(), &ctx, w.lane, park);
            // A stop or the run's end that came while the call ran may have let the
            // launch's waiting calls go before this one was filed again; it goes as
            // they did. They set their flag and then take the lock; this filed it
            // under the lock and then reads the flag: one of the two sees the other.
            // Filed for good, it would hold its files open after the run.
            if ctx.ended.load(Acquire) {
                inner.forget(&ctx, true);
            } else if ctx.waits_ended.load(Acquire) {
                inner.forget(&ctx, false);
            }
        }
    }
}
