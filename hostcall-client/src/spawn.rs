//! The moves of a held-back GPU thread's hand-off word (`hostcall_abi::spawn`, where the
//! states and their ordering are stated): the worker parks, takes a thread, ends it (or
//! retires after a panic); a creator claims an idle worker; a joiner waits for the end; a
//! detacher lets go.
//! libc-hostcall's `pthread_*` functions are these, on the `ThreadArea` fields.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hostcall_abi::spawn::{CLAIMED, DONE, DONE_LAST, IDLE, RETIRED, RUNNING, RUNNING_DETACHED};

use crate::Platform;

/// First and longest pause between two looks at a hand-off word: a parked worker or a
/// joiner polls (device memory, no PCIe), as the futex does.
const PAUSE_FIRST_NS: u32 = 200;
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
    while !ready() {
        P::nanosleep(pause);
        pause = (pause * 2).min(PAUSE_MAX_NS);
    }
}

impl Slot<'_> {
    /// The worker: parks, ready for [`Slot::try_give`].
    pub fn park(&self) {
        self.state.store(IDLE, Ordering::Release);
    }

    /// The creator: gives the parked worker the thread `start(arg)`; false if the worker
    /// is not idle (another creator took it, or it is not a worker).
    pub fn try_give(&self, start: u64, arg: u64) -> bool {
        if self.state.load(Ordering::Relaxed) != IDLE
            || self
                .state
                .compare_exchange(IDLE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        self.start.store(start, Ordering::Relaxed);
        self.arg.store(arg, Ordering::Relaxed);
        self.state.store(RUNNING, Ordering::Release);
        true
    }

    /// The worker: waits for a thread and returns its start routine and argument.
    pub fn wait_for_thread<P: Platform>(&self) -> (u64, u64) {
        wait_until::<P>(|| {
            matches!(
                self.state.load(Ordering::Acquire),
                RUNNING | RUNNING_DETACHED
            )
        });
        (
            self.start.load(Ordering::Relaxed),
            self.arg.load(Ordering::Relaxed),
        )
    }

    /// The worker, once the thread and its thread-local destructors are done: `DONE` for
    /// the joiner, or idle again at once if it was detached.
    pub fn end_thread(&self) {
        if self
            .state
            .compare_exchange(RUNNING, DONE, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.park();
        }
    }

    /// The worker, once a thread that panicked and its thread-local destructors are done
    /// (its frames were not unwound, so the worker exits after this): `DONE_LAST` for the
    /// joiner, or retired at once if it was detached.
    pub fn retire(&self) {
        if self
            .state
            .compare_exchange(RUNNING, DONE_LAST, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.state.store(RETIRED, Ordering::Release);
        }
    }

    /// The joiner: waits until the thread has ended, then frees the slot (or retires
    /// it, if its worker exited).
    pub fn join<P: Platform>(&self) -> Result<(), NotJoinable> {
        let mut ended = None;
        wait_until::<P>(|| match self.state.load(Ordering::Acquire) {
            state @ (DONE | DONE_LAST) => {
                ended = Some(state);
                true
            }
            RUNNING => false,
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
