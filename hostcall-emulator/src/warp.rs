//! Emulated warps with the semantics a GPU has and a transport must survive:
//!
//! * `activemask` returns a set of lanes that are at it *now*: in
//!   [`Grouping::Lockstep`] every live lane of the warp, in [`Grouping::Divergent`] a
//!   random subset of the lanes waiting there, after a random delay;
//! * warp-synchronous operations (`shfl.sync`, `bar.warp.sync`, `match.any.sync`) are
//!   matched by kind and mask value, wherever each lane is in the program;
//! * a lane that has exited counts as arrived at every later synchronization.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hostcall_abi::WARP_SIZE;

/// How lanes reaching `activemask` are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// All live lanes of the warp, once every one of them has arrived.
    Lockstep,
    /// A random subset of the lanes waiting (always including the caller), formed after
    /// a random delay of up to 200 µs; each synchronization is also delayed at random.
    Divergent,
}

/// The kinds of warp-synchronous operation; lanes meet only within a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyncKind {
    Shuffle,
    Barrier,
    Match,
}

/// One warp-synchronous operation waiting for the lanes of its mask.
struct Meeting {
    id: u64,
    kind: SyncKind,
    mask: u32,
    arrived: u32,
    values: [u32; WARP_SIZE],
    done: bool,
    /// Lanes that still have to collect the result.
    collecting: u32,
}

struct State {
    /// Lanes of the warp that have not exited.
    live: u32,
    /// Lanes waiting at `activemask`, and the mask handed to each once grouped.
    at_entry: u32,
    granted: [u32; WARP_SIZE],
    meetings: Vec<Meeting>,
    next_id: u64,
    rng: fastrand::Rng,
}

/// The shared state of one emulated warp.
pub(crate) struct Warp {
    grouping: Grouping,
    state: Mutex<State>,
    changed: Condvar,
}

/// Longest random delay injected before a grouping or a synchronization.
const MAX_DELAY_US: u64 = 200;

impl Warp {
    /// A warp whose lanes `0..lanes` exist.
    pub fn new(grouping: Grouping, lanes: u32, seed: u64) -> Warp {
        let live = if lanes >= 32 {
            u32::MAX
        } else {
            (1 << lanes) - 1
        };
        Warp {
            grouping,
            state: Mutex::new(State {
                live,
                at_entry: 0,
                granted: [0; WARP_SIZE],
                meetings: Vec::new(),
                next_id: 0,
                rng: fastrand::Rng::with_seed(seed),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn delay(&self) {
        if self.grouping == Grouping::Divergent {
            let us = self.lock().rng.u64(0..=MAX_DELAY_US);
            std::thread::sleep(Duration::from_micros(us));
        }
    }

    /// `activemask` for `lane`.
    pub fn active_mask(&self, lane: u32) -> u32 {
        self.delay();
        let bit = 1u32 << lane;
        let mut s = self.lock();
        s.at_entry |= bit;
        s.granted[lane as usize] = 0;
        self.changed.notify_all();
        // Divergent: wait a random while for others to arrive (or to be taken into a
        // group formed by one of them), then group whoever is there.
        let patience = Duration::from_micros(s.rng.u64(0..=MAX_DELAY_US));
        loop {
            let granted = s.granted[lane as usize];
            if granted != 0 {
                return granted;
            }
            let group = match self.grouping {
                Grouping::Lockstep if s.at_entry & s.live == s.live => s.at_entry,
                Grouping::Lockstep => 0,
                Grouping::Divergent => {
                    let (guard, waited) = self
                        .changed
                        .wait_timeout(s, patience)
                        .unwrap_or_else(|p| p.into_inner());
                    s = guard;
                    if s.granted[lane as usize] != 0 || !waited.timed_out() {
                        continue;
                    }
                    let pick = s.rng.u32(..);
                    (s.at_entry & !bit & pick) | bit
                }
            };
            if group == 0 {
                s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            for (l, granted) in s.granted.iter_mut().enumerate() {
                if group & (1 << l) != 0 {
                    *granted = group;
                }
            }
            s.at_entry &= !group;
            self.changed.notify_all();
        }
    }

    /// Meets the other lanes of `mask` at an operation of `kind`, offering `value`;
    /// returns the lanes that took part (not those that had exited) and their values.
    pub fn meet(
        &self,
        kind: SyncKind,
        mask: u32,
        lane: u32,
        value: u32,
    ) -> (u32, [u32; WARP_SIZE]) {
        self.delay();
        let bit = 1u32 << lane;
        let mut s = self.lock();
        let id = match s
            .meetings
            .iter()
            .position(|m| m.kind == kind && m.mask == mask && !m.done)
        {
            Some(i) => s.meetings[i].id,
            None => {
                let id = s.next_id;
                s.next_id += 1;
                s.meetings.push(Meeting {
                    id,
                    kind,
                    mask,
                    arrived: 0,
                    values: [0; WARP_SIZE],
                    done: false,
                    collecting: 0,
                });
                id
            }
        };
        {
            let m = s
                .meetings
                .iter_mut()
                .find(|m| m.id == id)
                .expect("just found");
            m.arrived |= bit;
            m.values[lane as usize] = value;
        }
        complete_meetings(&mut s);
        self.changed.notify_all();
        loop {
            let i = s
                .meetings
                .iter()
                .position(|m| m.id == id)
                .expect("kept until collected");
            if s.meetings[i].done {
                let values = (s.meetings[i].arrived, s.meetings[i].values);
                s.meetings[i].collecting &= !bit;
                if s.meetings[i].collecting == 0 {
                    s.meetings.remove(i);
                }
                return values;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// `lane` has exited: it counts as arrived from now on.
    pub fn exit(&self, lane: u32) {
        let mut s = self.lock();
        s.live &= !(1 << lane);
        s.at_entry &= !(1 << lane);
        complete_meetings(&mut s);
        self.changed.notify_all();
    }
}

/// Marks done every meeting whose mask has arrived or exited.
fn complete_meetings(s: &mut State) {
    let live = s.live;
    for m in s.meetings.iter_mut().filter(|m| !m.done) {
        if m.mask & !(m.arrived | !live) == 0 {
            m.done = true;
            m.collecting = m.arrived;
        }
    }
}
