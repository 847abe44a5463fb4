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
        }
    }

    /// Takes one call, if any is left: at most the calls allowed are served, however
    /// many lanes of however many consumers ask at once.
    pub(crate) fn take(&self) -> bool {
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
        taken
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
        self.life.left.store(0, Release);
    }

    /// Allows exactly one more call, then finishes (AMDGPU.jl's `non_continuous!`),
    /// whether the service was continuous, counting down or finished.
    pub fn one_more(&self) {
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
        assert!(once.take() && !once.take() && !once.take());
        let three = Life::new(Lifetime::Times(3));
        assert_eq!((0..10).filter(|_| three.take()).count(), 3);
        let none = Life::new(Lifetime::Times(0));
        assert!(!none.take());
        let always = Life::new(Lifetime::Continuous);
        assert!((0..1000).all(|_| always.take()));
        assert_eq!(always.served.load(Relaxed), 1000);
    }

    #[test]
    fn finish_and_one_more_move_between_states() {
        let s = Serving {
            life: Arc::new(Life::new(Lifetime::Continuous)),
        };
        assert_eq!(s.calls_left(), None);
        s.finish();
        assert!(s.is_finished() && !s.life.take());
        s.one_more();
        assert_eq!(s.calls_left(), Some(1));
        assert!(s.life.take() && !s.life.take());
        assert!(s.is_finished());
        assert_eq!(s.served(), 1);
    }

    #[test]
    fn concurrent_callers_never_take_more_than_allowed() {
        let life = Arc::new(Life::new(Lifetime::Times(1000)));
        let taken: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..10_000).filter(|_| life.take()).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(taken, 1000);
    }
}
