//! The moves of a held-back GPU thread's hand-off word (`hostcall_abi::spawn`, where the
//! states and their ordering are stated): the worker parks, takes a thread, ends it (or
//! retires after a panic); a creator claims an idle worker; a joiner waits for the end; a
//! detacher lets go; the thread that ends the program closes the idle workers.
//! libc-hostcall's `pthread_*` functions are these, on the `ThreadArea` fields.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hostcall_abi::spawn::{
    CLAIMED, CLOSED, DONE, DONE_LAST, IDLE, NOT_A_WORKER, RETIRED, RUNNING, RUNNING_DETACHED,
};

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
    /// The worker, as it starts: parks, ready for [`Slot::try_give`]; false if the
    /// program already ended ([`Slot::close`] came first), and the worker should exit.
    pub fn park_first(&self) -> bool {
        self.state
            .compare_exchange(NOT_A_WORKER, IDLE, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Idle again after a thread's last use (joined, or ended detached).
    fn park(&self) {
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

    /// The worker: waits for a thread and returns its start routine and argument, or
    /// `None` once the program has ended (the worker exits).
    pub fn wait_for_thread<P: Platform>(&self) -> Option<(u64, u64)> {
        let mut state = NOT_A_WORKER;
        wait_until::<P>(|| {
            state = self.state.load(Ordering::Acquire);
            matches!(state, RUNNING | RUNNING_DETACHED | CLOSED)
        });
        (state != CLOSED).then(|| {
            (
                self.start.load(Ordering::Relaxed),
                self.arg.load(Ordering::Relaxed),
            )
        })
    }

    /// The thread that ends the program, once for each other worker: closes the slot if
    /// its worker runs no thread (parked, not started yet, or its thread ended unjoined),
    /// so the worker exits. False if a thread runs there (or is being given): the
    /// program must then stop it some other way. A worker already gone (retired, or
    /// closed) counts as closed.
    pub fn close(&self) -> bool {
        let mut seen = self.state.load(Ordering::Relaxed);
        loop {
            match seen {
                NOT_A_WORKER | IDLE | DONE => {}
                DONE_LAST | RETIRED | CLOSED => return true,
                _ => return false,
            }
            // Release: a creator that finds the slot closed and acquires sees the end
            // announced before it (libc-hostcall's `pthread_create`).
            match self.state.compare_exchange_weak(
                seen,
                CLOSED,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => seen = now,
            }
        }
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
