//! The stages of one round trip, for measuring where its time goes (`hostcall_bench`'s
//! latency breakdown). Plain calls mark nothing: `()` is the marker, and compiles away.

use crate::Platform;

/// A point of a round trip, in order; see the protocol steps in `hostcall_abi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `activemask` and `match.any.sync` formed the packet (step 1).
    Packet,
    /// The leader holds a port and every lane knows it (step 2).
    Port,
    /// Every lane's request is written and fenced (step 3).
    Request,
    /// The leader published the packet (step 4).
    Published,
    /// This lane read its answer and bulk bytes (step 6).
    Answered,
    /// The packet released the port (step 7).
    Released,
}

/// Stages of a round trip, in order.
pub const STAGES: [Stage; 6] = [
    Stage::Packet,
    Stage::Port,
    Stage::Request,
    Stage::Published,
    Stage::Answered,
    Stage::Released,
];

/// Receives the stages of a round trip as the calling lane passes them.
pub trait Marks {
    /// The lane reached `stage`.
    fn mark<P: Platform>(&mut self, stage: Stage);
}

impl Marks for () {
    #[inline(always)]
    fn mark<P: Platform>(&mut self, _: Stage) {}
}

/// The clock at the start and at each stage, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageClock {
    /// `at[0]`: the call began; `at[i + 1]`: `STAGES[i]` was reached.
    pub at: [u64; STAGES.len() + 1],
}

impl StageClock {
    /// Starts timing a round trip now.
    pub fn start<P: Platform>() -> StageClock {
        let mut c = StageClock::default();
        c.at[0] = P::now_ns();
        c
    }

    /// Nanoseconds spent reaching each stage from the one before.
    pub fn spans(&self) -> [u64; STAGES.len()] {
        core::array::from_fn(|i| self.at[i + 1].saturating_sub(self.at[i]))
    }
}

impl Marks for StageClock {
    fn mark<P: Platform>(&mut self, stage: Stage) {
        self.at[stage as usize + 1] = P::now_ns();
    }
}
