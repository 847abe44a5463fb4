//! Calls that wait for an fd. The GPU's sockets, pipes and stdin are non-blocking on
//! the host, so no system call of theirs ever blocks a host thread. A service whose call
//! finds its fd not ready, for a GPU thread that would block on Linux, asks here for the
//! call to be run again once the fd is ready ([`until_ready`]); the server then hands
//! the lane to its reactor, one thread that waits on every such fd at once, and answers
//! the lane when a later attempt completes. Any number of GPU threads can wait on each
//! other so, as on Linux, with no host thread each.
//!
//! A service learns which attempt it serves from [`current`]: when the first began (a
//! deadline counts from it, as `SO_RCVTIMEO` does), how far the call got (bytes of a
//! write sent so far), and whether its time is up. Services are called on the server's
//! threads, so the attempt and the request to wait travel in thread-locals, as the
//! caller of a declared service does (`typed::caller`).

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hostcall_abi::errno::EAGAIN;
use hostcall_abi::typed::Errno;

/// Where the calls waiting on an fd wait (the server's reactor), as a service that
/// closes the fd tells it: each such call is answered `errno` (`EBADF`), and the file
/// is let go. A trait here so that services need not know the server.
pub(crate) trait Waiters: Send + Sync {
    /// The fd `token` was closed by the GPU.
    fn cancel(&self, token: u64, errno: i32);
}

/// What a waiting call waits for on its fd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interest {
    pub read: bool,
    pub write: bool,
}

impl Interest {
    pub const READ: Interest = Interest {
        read: true,
        write: false,
    };
    pub const WRITE: Interest = Interest {
        read: false,
        write: true,
    };

    /// Either's events.
    pub fn union(self, o: Interest) -> Interest {
        Interest {
            read: self.read || o.read,
            write: self.write || o.write,
        }
    }
}

/// One attempt at a call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attempt {
    /// When the first attempt waited (`None` until it does: reading the clock for
    /// every call would tax the calls that never wait).
    started: Option<Instant>,
    /// The call's deadline has passed: it must answer now (a timeout's result).
    pub expired: bool,
    /// How far the call had got when it waited, in its own terms (bytes sent).
    pub progress: u64,
    /// Whether the call may wait at all: not once the launch has ended, nor outside
    /// the server.
    may_wait: bool,
    first: bool,
}

impl Attempt {
    /// A call's first attempt.
    pub fn first(may_wait: bool) -> Attempt {
        Attempt {
            started: None,
            expired: false,
            progress: 0,
            may_wait,
            first: true,
        }
    }

    /// Whether no attempt of the call has waited yet.
    pub fn is_first(self) -> bool {
        self.first && self.started.is_none()
    }

    /// The attempt after this one waited, at the deadline if `expired`.
    pub fn again(self, expired: bool) -> Attempt {
        Attempt {
            expired,
            first: false,
            ..self
        }
    }
}

/// An fd a waiting call watches: the file, the reactor's key for it, and what for.
pub(crate) struct Watch {
    pub file: Arc<File>,
    pub token: u64,
    pub interest: Interest,
}

/// A call's request to wait: any of `watches` ready, or `deadline`, and the attempt
/// to run next (its progress so far).
pub(crate) struct Park {
    pub watches: Vec<Watch>,
    pub deadline: Option<Instant>,
    pub attempt: Attempt,
}

thread_local! {
    /// Whether calls served on this thread may wait (a consumer of a live launch).
    static MAY_WAIT: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread may block in a system call or on a lock (a pool worker).
    static MAY_BLOCK: Cell<bool> = const { Cell::new(false) };
    /// The attempt being run again, while a waiting call is.
    static AGAIN: Cell<Option<Attempt>> = const { Cell::new(None) };
    /// The request to wait that the call just served made.
    static PARKED: RefCell<Option<Park>> = const { RefCell::new(None) };
    /// Whether `PARKED` holds one: the hot path asks after every call served, and a
    /// flag without a destructor costs it a load, where `PARKED` itself cost it a fifth
    /// of its time (its lazy destructor's state, the whole `Option<Park>` moved out).
    static ASKED: Cell<bool> = const { Cell::new(false) };
}

/// Files `park` as the request of the call being served.
fn ask(park: Option<Park>) {
    ASKED.set(park.is_some());
    PARKED.set(park);
}

/// The request filed, if any; none is filed afterwards.
fn take_asked() -> Option<Park> {
    if !ASKED.replace(false) {
        return None;
    }
    PARKED.take()
}

/// The attempt the call being served is.
pub(crate) fn current() -> Attempt {
    AGAIN
        .get()
        .unwrap_or_else(|| Attempt::first(MAY_WAIT.get()))
}

/// Whether the call being served may still wait: it may, and its deadline has not
/// passed.
pub(crate) fn can_wait() -> bool {
    let a = current();
    a.may_wait && !a.expired
}

/// Whether the call being served is tried for the first time (a lifetime is charged
/// once a call).
pub(crate) fn first_attempt() -> bool {
    AGAIN.get().is_none_or(|a| a.first)
}

/// Asks for the call being served to be run again once any of `watches` is ready, or at
/// `timeout` after its first attempt waited, with `progress` in its attempt. Returns
/// `EAGAIN`, which the service returns meanwhile (the server answers nothing). A call
/// that may not wait, or whose deadline has passed, does not wait: `EAGAIN` is then its
/// answer.
pub(crate) fn until_ready(watches: Vec<Watch>, timeout: Option<Duration>, progress: u64) -> Errno {
    let attempt = current();
    if !attempt.may_wait || attempt.expired {
        return Errno(EAGAIN);
    }
    let started = attempt.started.unwrap_or_else(Instant::now);
    let park = Park {
        watches,
        deadline: timeout.map(|t| started + t),
        attempt: Attempt {
            started: Some(started),
            progress,
            ..attempt
        },
    };
    ask(Some(park));
    Errno(EAGAIN)
}

/// Makes calls served on this thread from now on able to wait (a consumer of a live
/// launch), or not (the drain at the launch's end).
pub(crate) fn serving_live(may: bool) {
    MAY_WAIT.set(may);
}

/// Makes this thread one that may block (a pool worker): a service it runs may wait
/// for room or a system call rather than answer at once.
pub(crate) fn blocking_thread() {
    MAY_BLOCK.set(true);
}

/// Whether a service may block on this thread (a pool worker, never a consumer).
pub(crate) fn may_block_here() -> bool {
    MAY_BLOCK.get()
}

/// The request to wait the call just served made, if it made one.
pub(crate) fn parked() -> Option<Park> {
    take_asked()
}

/// An attempt running again on this thread; restores the first-attempt state when
/// dropped.
pub(crate) struct Attempting(());

impl Attempting {
    /// Runs the calls served until this is dropped as `attempt`.
    pub fn enter(attempt: Attempt) -> Attempting {
        AGAIN.set(Some(attempt));
        ask(None);
        Attempting(())
    }

    /// The request to wait the call made, if it made one.
    pub fn parked(&self) -> Option<Park> {
        take_asked()
    }
}

impl Drop for Attempting {
    fn drop(&mut self) {
        AGAIN.set(None);
        ask(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_waits_only_where_it_may_and_until_its_deadline() {
        let file = Arc::new(tempfile::tempfile().unwrap());
        let watch = || {
            vec![Watch {
                file: file.clone(),
                token: 1,
                interest: Interest::READ,
            }]
        };
        // Outside a live consumer: no wait.
        assert_eq!(until_ready(watch(), None, 0), Errno(EAGAIN));
        assert!(parked().is_none());
        serving_live(true);
        until_ready(watch(), Some(Duration::from_secs(1)), 7);
        let park = parked().expect("a live consumer's call waits");
        assert!(park.deadline.is_some() && park.attempt.progress == 7);
        // Run again at its deadline, it answers instead of waiting again.
        let again = Attempting::enter(park.attempt.again(true));
        assert!(!first_attempt() && current().expired);
        until_ready(watch(), Some(Duration::from_secs(1)), 7);
        assert!(again.parked().is_none());
        drop(again);
        assert!(first_attempt());
        serving_live(false);
    }
}
