//! The moves of a held-back GPU thread's hand-off word (`hostcall_abi::spawn`, where the
//! states and their ordering are stated): the worker parks, takes a thread, ends it (or
//! retires after a panic); a creator claims an idle worker; a joiner waits for the end; a
//! detacher lets go; at the program's end ([`End`]) every thread that waits leaves and
//! counts itself gone, and the ending thread waits for the count. libc-hostcall's
//! `pthread_*` functions and its `ending` are these, on the `ThreadArea` fields.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hostcall_abi::spawn::{
    CLAIMED, CLOSED, DONE, DONE_LAST, IDLE, RETIRED, RUNNING, RUNNING_DETACHED,
};

use crate::Platform;

/// Pauses between two looks at a hand-off word: a parked worker or a joiner polls
/// (device memory, no PCIe), as the futex does. The first [`WARM_LOOKS`] looks pause at
/// most [`WARM_PAUSE_NS`]: hand-offs come in bursts (a program that joined a thread
/// spawns the next within microseconds, and `pthread_create` offers it first to the
/// worker freed last, which is still in these looks), so the next thread starts within
/// a microsecond or two rather than a long pause. Later pauses double to
/// [`PAUSE_MAX_NS`], so that thousands of parked workers cost the working lanes little.
const PAUSE_FIRST_NS: u32 = 200;
const WARM_PAUSE_NS: u32 = 1_000;
const WARM_LOOKS: u32 = 64;
const PAUSE_MAX_NS: u32 = 20_000;

/// One held-back thread's hand-off word and the thread it is given.
#[derive(Clone, Copy)]
pub struct Slot<'a> {
    /// `ThreadArea::spawn_state`.
    pub state: &'a AtomicU32,
    /// `ThreadArea::spawn_start`.
    pub start: &'a AtomicU64,
    /// `ThreadArea::spawn_arg`.
    pub arg: &'a AtomicU64,
}

/// What [`Slot::try_give`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Give {
    /// The worker runs the thread.
    Given,
    /// The worker is not idle (another creator took it, or it is not a worker).
    NotIdle,
    /// The worker was idle, but the creator's `ready` said no: it is idle again.
    Refused,
}

/// Why `join` or `detach` cannot act on a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotJoinable {
    /// The slot runs no thread that can be joined (never started, already joined, or
    /// detached): `ESRCH` or `EINVAL` in pthread terms.
    NoThread,
}

/// Waits with growing pauses until `ready` holds.
fn wait_until<P: Platform>(mut ready: impl FnMut() -> bool) {
    let mut pause = PAUSE_FIRST_NS;
    let mut looks = 0u32;
    while !ready() {
        P::nanosleep(pause);
        looks = looks.saturating_add(1);
        let most = if looks < WARM_LOOKS {
            WARM_PAUSE_NS
        } else {
            PAUSE_MAX_NS
        };
        pause = (pause * 2).min(most);
    }
}

/// The program's end, as every thread of a launch sees it (`hostcall_abi::spawn`): the
/// ending thread announces it; each other thread leaves at its next look and counts
/// itself gone, as does a worker that retires; the ending thread waits for the count,
/// one word, rather than visit every thread's.
pub struct End {
    announced: AtomicU32,
    gone: AtomicU32,
}

impl Default for End {
    fn default() -> Self {
        Self::new()
    }
}

impl End {
    /// Not announced, nobody gone (a module global, zeroed at load).
    pub const fn new() -> Self {
        Self {
            announced: AtomicU32::new(0),
            gone: AtomicU32::new(0),
        }
    }

    /// The thread that ends the program: announces it. False if another thread did
    /// first; the caller then leaves, as a waiting thread does.
    pub fn announce(&self) -> bool {
        self.announced.swap(1, Ordering::AcqRel) == 0
    }

    /// A waiting thread's look: whether the program is ending, so it should leave.
    pub fn announced(&self) -> bool {
        self.announced.load(Ordering::Relaxed) != 0
    }

    /// A thread that leaves for the end, or a worker that retires: counts it gone. Its
    /// GPU thread exits next.
    fn count_gone(&self) {
        self.gone.fetch_add(1, Ordering::Release);
    }

    /// The ending thread: waits until `others` threads have gone, or `expired` says its
    /// wait ran out (false: a thread still runs, and the program must stop it some
    /// other way).
    pub fn wait_gone<P: Platform>(&self, others: u32, mut expired: impl FnMut() -> bool) -> bool {
        let mut gone = false;
        wait_until::<P>(|| {
            gone = self.gone.load(Ordering::Acquire) >= others;
            gone || expired()
        });
        gone
    }
}

impl Slot<'_> {
    /// The worker, as it starts or after a thread's last use (joined, or ended
    /// detached): parked, ready for [`Slot::try_give`].
    pub fn park(&self) {
        self.state.store(IDLE, Ordering::Release);
    }

    /// A thread that leaves for the program's end (a parked worker, or a thread where it
    /// waits): `CLOSED` in its word, so a joiner leaves too, and counted gone. Its GPU
    /// thread exits next.
    pub fn leave(&self, end: &End) {
        self.state.store(CLOSED, Ordering::Release);
        end.count_gone();
    }

    /// The creator: gives the parked worker the thread `start(arg)`. `ready` runs once
    /// the worker is claimed, before the thread is published (libc-hostcall gives the
    /// worker its frame stack there, which the publishing Release carries); if it says
    /// no, the claim is undone.
    pub fn try_give(&self, start: u64, arg: u64, ready: impl FnOnce() -> bool) -> Give {
        if self.state.load(Ordering::Relaxed) != IDLE
            || self
                .state
                .compare_exchange(IDLE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return Give::NotIdle;
        }
        if !ready() {
            // Only a worker leaving for the program's end moves a claimed word (to
            // `CLOSED`), which stays.
            let _ =
                self.state
                    .compare_exchange(CLAIMED, IDLE, Ordering::Release, Ordering::Relaxed);
            return Give::Refused;
        }
        self.start.store(start, Ordering::Relaxed);
        self.arg.store(arg, Ordering::Relaxed);
        self.state.store(RUNNING, Ordering::Release);
        Give::Given
    }

    /// The parked worker: waits for a thread and returns its start routine and argument,
    /// or, once the program's end is announced, leaves ([`Slot::leave`]) and returns
    /// `None` (its GPU thread exits).
    pub fn wait_for_thread<P: Platform>(&self, end: &End) -> Option<(u64, u64)> {
        let mut ending = false;
        wait_until::<P>(|| {
            ending = end.announced();
            ending
                || matches!(
                    self.state.load(Ordering::Acquire),
                    RUNNING | RUNNING_DETACHED
                )
        });
        if ending {
            self.leave(end);
            return None;
        }
        Some((
            self.start.load(Ordering::Relaxed),
            self.arg.load(Ordering::Relaxed),
        ))
    }

    /// The worker, once the thread and its thread-local destructors are done: `DONE` for
    /// the joiner, or idle again at once if it was detached (then true).
    pub fn end_thread(&self) -> bool {
        let detached = self
            .state
            .compare_exchange(RUNNING, DONE, Ordering::Release, Ordering::Relaxed)
            .is_err();
        if detached {
            self.park();
        }
        detached
    }

    /// The worker, once a thread that panicked and its thread-local destructors are done
    /// (its frames were not unwound, so the worker exits after this): `DONE_LAST` for the
    /// joiner, or retired at once if it was detached; counted gone for the program's end.
    pub fn retire(&self, end: &End) {
        if self
            .state
            .compare_exchange(RUNNING, DONE_LAST, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.state.store(RETIRED, Ordering::Release);
        }
        end.count_gone();
    }

    /// The joiner: waits until the thread has ended, then frees the slot (or retires
    /// it, if its worker exited). `between` runs between two looks: where a waiting
    /// joiner leaves at the program's end (libc-hostcall's `ending`), which it must do
    /// once the slot is `CLOSED`.
    pub fn join<P: Platform>(&self, mut between: impl FnMut()) -> Result<(), NotJoinable> {
        let mut ended = None;
        wait_until::<P>(|| match self.state.load(Ordering::Acquire) {
            state @ (DONE | DONE_LAST) => {
                ended = Some(state);
                true
            }
            // Closed: the program is ending, and `between` ends this thread.
            RUNNING | CLOSED => {
                between();
                false
            }
            _ => true,
        });
        match ended {
            Some(DONE) => self.park(),
            Some(_) => self.state.store(RETIRED, Ordering::Release),
            None => return Err(NotJoinable::NoThread),
        }
        Ok(())
    }

    /// Lets the thread go: nobody will join it, and its worker parks when it ends.
    pub fn detach(&self) -> Result<(), NotJoinable> {
        match self.state.compare_exchange(
            RUNNING,
            RUNNING_DETACHED,
            Ordering::Relaxed,
            Ordering::Acquire,
        ) {
            Ok(_) => Ok(()),
            // Already ended: nobody will join, so the slot is free now.
            Err(DONE) => {
                self.park();
                Ok(())
            }
            Err(DONE_LAST) => {
                self.state.store(RETIRED, Ordering::Release);
                Ok(())
            }
            Err(_) => Err(NotJoinable::NoThread),
        }
    }
}
