//! How long a host closure or a declared service serves (AMDGPU.jl's hostcall
//! lifetimes): once, a number of calls, or until finished. The count is the host's,
//! shared by every consumer thread, and outlives a launch: a service finished in one
//! launch stays finished in the next until the host allows it more calls.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// How many calls a service answers before it is finished. A call of a finished service
/// gets `EPIPE` (a closure that cannot fail ends its launch with it), and the host logs
/// the GPU thread and the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// One call (AMDGPU.jl's default).
    Once,
    /// This many calls.
    Times(u64),
    /// Every call until [`Serving::finish`] (AMDGPU.jl's `continuous=true`); what
    /// [`crate::Host::hostcall`] gives.
    Continuous,
}

/// Calls left that stand for "no limit".
const CONTINUOUS: u64 = u64::MAX;

/// The count behind a [`Serving`], checked by the server before each call.
#[derive(Debug)]
pub(crate) struct Life {
    left: AtomicU64,
    served: AtomicU64,
    /// Bumped by every change the host makes ([`Serving::finish`], [`Serving::one_more`]):
    /// a call refunded across one is not given back.
    epoch: AtomicU64,
}

impl Life {
    pub(crate) fn new(lifetime: Lifetime) -> Life {
        let left = match lifetime {
            Lifetime::Once => 1,
            Lifetime::Times(n) => n.min(CONTINUOUS - 1),
            Lifetime::Continuous => CONTINUOUS,
        };
        Life {
            left: AtomicU64::new(left),
            served: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    /// Takes one call, if any is left: at most the calls allowed are served, however
    /// many lanes of however many consumers ask at once. Returns the host's epoch the
    /// call was taken in, for [`Life::refund`].
    pub(crate) fn take(&self) -> Option<u64> {
        let epoch = self.epoch.load(Acquire);
        // A continuous service's count of calls left is only read, not swapped with
        // itself by a compare-and-swap per call (a call racing `finish()` completes, as
        // one under way does).
        let taken = self.left.load(Acquire) == CONTINUOUS
            || self
                .left
                .try_update(AcqRel, Acquire, |n| match n {
                    0 => None,
                    CONTINUOUS => Some(n),
                    n => Some(n - 1),
                })
                .is_ok();
        if taken {
            self.served.fetch_add(1, Relaxed);
        }
        taken.then_some(epoch)
    }

    /// Gives back a call [`Life::take`] took in `epoch`, for a request the service
    /// refused as malformed: a call that broke the service's rules was not served. Not
    /// once the host has changed the count since (a finished service stays finished).
    pub(crate) fn refund(&self, epoch: u64) {
        self.served.fetch_sub(1, Relaxed);
        let _ = self.left.try_update(AcqRel, Acquire, |n| match n {
            CONTINUOUS => None,
            _ if self.epoch.load(Acquire) != epoch => None,
            n => Some(n + 1),
        });
    }
}

/// The host's hold on a service's lifetime, from [`crate::Host::hostcall_for`] or
/// [`Serving::new`]. Clones share it; any thread may use it while kernels call the
/// service.
#[derive(Clone, Debug)]
pub struct Serving {
    pub(crate) life: Arc<Life>,
}

impl Serving {
    /// A lifetime to serve with ([`crate::HostBuilder::serve_for`]); every service
    /// given it counts against it.
    pub fn new(lifetime: Lifetime) -> Serving {
        Serving {
            life: Arc::new(Life::new(lifetime)),
        }
    }

    /// Ends the service at once (AMDGPU.jl's `finish!`): calls not yet begun get `EPIPE`;
    /// a call already running completes.
    pub fn finish(&self) {
        self.life.epoch.fetch_add(1, AcqRel);
        self.life.left.store(0, Release);
    }

    /// Allows exactly one more call, then finishes (AMDGPU.jl's `non_continuous!`),
    /// whether the service was continuous, counting down or finished.
    pub fn one_more(&self) {
        self.life.epoch.fetch_add(1, AcqRel);
        self.life.left.store(1, Release);
    }

    /// Calls it will still answer; `None` while continuous.
    pub fn calls_left(&self) -> Option<u64> {
        Some(self.life.left.load(Acquire)).filter(|&n| n != CONTINUOUS)
    }

    /// Whether it answers no more calls.
    pub fn is_finished(&self) -> bool {
        self.life.left.load(Acquire) == 0
    }

    /// Calls it has answered, over every launch.
    pub fn served(&self) -> u64 {
        self.life.served.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lifetime_takes_what_it_allows() {
        let once = Life::new(Lifetime::Once);
        assert!(once.take().is_some() && once.take().is_none() && once.take().is_none());
        let three = Life::new(Lifetime::Times(3));
        assert_eq!((0..10).filter(|_| three.take().is_some()).count(), 3);
        let none = Life::new(Lifetime::Times(0));
        assert!(none.take().is_none());
        let always = Life::new(Lifetime::Continuous);
        assert!((0..1000).all(|_| always.take().is_some()));
        assert_eq!(always.served.load(Relaxed), 1000);
    }

    #[test]
    fn finish_and_one_more_move_between_states() {
        let s = Serving {
            life: Arc::new(Life::new(Lifetime::Continuous)),
        };
        assert_eq!(s.calls_left(), None);
        s.finish();
        assert!(s.is_finished() && s.life.take().is_none());
        s.one_more();
        assert_eq!(s.calls_left(), Some(1));
        assert!(s.life.take().is_some() && s.life.take().is_none());
        assert!(s.is_finished());
        assert_eq!(s.served(), 1);
    }

    /// A call refused as malformed is not charged; one refunded
    /// after the host finished the service does not bring it back.
    #[test]
    fn a_malformed_call_is_given_back_unless_the_host_changed_the_count() {
        let once = Life::new(Lifetime::Once);
        let epoch = once.take().unwrap();
        once.refund(epoch);
        assert!(once.take().is_some(), "the refused call was not counted");
        assert_eq!(once.served.load(Relaxed), 1);
        let s = Serving {
            life: Arc::new(Life::new(Lifetime::Times(2))),
        };
        let epoch = s.life.take().unwrap();
        s.finish();
        s.life.refund(epoch);
        assert!(s.is_finished());
    }

    #[test]
    fn concurrent_callers_never_take_more_than_allowed() {
        let life = Arc::new(Life::new(Lifetime::Times(1000)));
        let taken: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..10_000).filter(|_| life.take().is_some()).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(taken, 1000);
    }
}
