//! How a consumer waits while its ports are idle: spinning, then yielding, then sleeping
//! with a growing delay, and, for every consumer but the first, parking until the first
//! sees a packet on one of its ports.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

use super::Context;
use crate::services::ServiceTable;

/// Polls spin first, then yield, then sleep with a doubling delay up to
/// `MAX_IDLE_SLEEP`, so an idle GPU costs the host almost no CPU. Leaving the spin phase
/// counts as going idle: the services' idle hooks run then (buffered output is written).
pub(crate) struct Backoff {
    pub idle: u32,
}

pub(crate) const SPIN_POLLS: u32 = 4096;
pub(crate) const YIELD_POLLS: u32 = 256;
const MAX_IDLE_SLEEP: Duration = Duration::from_millis(1);
/// Idle polls after which a consumer other than the first parks (about 60 ms asleep).
pub(crate) const IDLE_PARK_POLLS: u32 = SPIN_POLLS + YIELD_POLLS + 64;
/// Longest a parked consumer sleeps before it looks at its ports itself.
const PARK_LIMIT: Duration = Duration::from_millis(10);

/// Consumers that have gone idle long park, and the first consumer, which never parks,
/// wakes each when one of its ports has a packet: while the GPU computes without
/// calling, the host pays for one polling thread, not one per consumer. A consumer
/// wakes on its own after [`PARK_LIMIT`] too, so a wake-up the first misses costs at
/// most that.
pub(crate) struct Parking {
    pub parked: Vec<AtomicBool>,
}

impl Parking {
    pub fn new(consumers: usize) -> Parking {
        Parking {
            parked: (0..consumers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Consumer `k` parks until woken, or for [`PARK_LIMIT`], unless `pending` finds
    /// work after it said it parks.
    pub fn park(&self, k: usize, pending: impl Fn() -> bool) {
        self.parked[k].store(true, SeqCst);
        // Its ports are read after the flag is visible: a packet published after this
        // read is seen by the first consumer, which then finds the flag set.
        std::sync::atomic::fence(SeqCst);
        if !pending() {
            std::thread::park_timeout(PARK_LIMIT);
        }
        self.parked[k].store(false, Relaxed);
    }

    /// Run by the first consumer, again and again: wakes each parked consumer one of
    /// whose ports has a packet not yet answered (`others[j - 1]` is consumer `j`). A
    /// flag set after this read is seen at the next.
    pub fn wake_pending(&self, ctx: &Context, others: &[std::thread::Thread]) {
        let consumers = others.len() + 1;
        for (j, thread) in (1..).zip(others) {
            if !self.parked[j].load(SeqCst) {
                continue;
            }
            let ports = ctx.ports;
            let pending = (j..ports.len)
                .step_by(consumers)
                .any(|p| ports.doorbell(p) != ports.response(p) && !ctx.holds.holds(p));
            if pending {
                self.parked[j].store(false, Relaxed);
                thread.unpark();
            }
        }
    }
}

impl Backoff {
    pub fn wait(&mut self, services: &ServiceTable) {
        self.idle = self.idle.saturating_add(1);
        if self.idle == SPIN_POLLS {
            services.idle();
        }
        if self.idle < SPIN_POLLS {
            std::hint::spin_loop();
        } else if self.idle < SPIN_POLLS + YIELD_POLLS {
            std::thread::yield_now();
        } else {
            let doublings = (self.idle - SPIN_POLLS - YIELD_POLLS).min(7);
            let sleep = Duration::from_micros(8 << doublings).min(MAX_IDLE_SLEEP);
            std::thread::sleep(sleep);
        }
    }
}
