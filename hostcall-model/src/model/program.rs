//! What a run of the model is: the protocol variant, each lane's program of calls, the
//! host's behaviour.

pub use crate::call::{LaneRef, Token};

/// Lane ids a warp of the model may use (slots of the port).
pub const MAX_LANES: usize = 4;

/// The protocol the lanes and the host follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// As first landed: a packet is the raw `activemask`, posted and waiting lanes
    /// together; the leader polls the header's `response`, then every lane reads its
    /// slot. With `recheck`, a lane waits until its slot holds an answer carrying its
    /// own coordinates (the landed band-aid); without, it reads the slot once.
    V1 {
        /// Whether lanes wait for an answer bearing their own coordinates.
        recheck: bool,
    },
    /// The current protocol: `match.any.sync` splits the active lanes by the posted
    /// flag, every lane reads the sequence it will be answered under, and polls its own
    /// answer word, which the host writes last, tagged with that sequence.
    V2,
}

/// One step of the GPU half, in program order. Leader-only steps are skipped by the
/// other lanes; warp-synchronous steps ([`Op::is_sync`]) complete for all lanes of a
/// mask at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `activemask`: some lanes at the entry of a call become a packet's candidates.
    ActiveMask,
    /// `match.any.sync` on the posted flag (V2): the packet is the lanes that agree.
    MatchPosted,
    /// Leader: take the port's lock (one atomic in device memory, which also yields the
    /// port's last sequence).
    LeaderAcquire,
    /// Leader: if the port's last packet was posted, wait until the host answered it.
    LeaderWaitPosted,
    /// `shfl.sync` of the port index from the leader.
    Broadcast,
    /// Every lane writes its request slot (V2: and sets its answer word pending).
    WriteSlot,
    /// `bar.warp.sync` over the packet.
    Barrier,
    /// Leader: bump the sequence, write the lane mask and `request`; a posted leader
    /// also releases the lock as "free, answer pending". Posted lanes return here.
    Publish,
    /// Leader (V1): wait until `response` equals the sequence.
    LeaderPollResponse,
    /// Every lane reads its slot (V1).
    ReadSlot,
    /// Every lane waits for its answer word to carry its sequence, then reads it (V2).
    PollAnswer,
    /// Leader: release the lock.
    LeaderRelease,
    /// The call returns.
    Return,
}

use Op::*;

impl Protocol {
    /// The steps of one call, in program order.
    pub fn program(self) -> &'static [Op] {
        match self {
            Protocol::V1 { .. } => &[
                ActiveMask,
                LeaderAcquire,
                LeaderWaitPosted,
                Broadcast,
                WriteSlot,
                Barrier,
                Publish,
                LeaderPollResponse,
                Barrier,
                ReadSlot,
                Barrier,
                LeaderRelease,
                Return,
            ],
            Protocol::V2 => &[
                ActiveMask,
                MatchPosted,
                LeaderAcquire,
                LeaderWaitPosted,
                Broadcast,
                WriteSlot,
                Barrier,
                Publish,
                PollAnswer,
                Barrier,
                LeaderRelease,
                Return,
            ],
        }
    }
}

impl Op {
    /// Whether the step is warp-synchronous (matched by kind and mask).
    pub fn is_sync(self) -> bool {
        matches!(self, MatchPosted | Broadcast | Barrier)
    }

    pub(crate) fn leader_only(self) -> bool {
        matches!(
            self,
            LeaderAcquire | LeaderWaitPosted | LeaderPollResponse | LeaderRelease
        )
    }
}

/// What a lane's call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// A posted write (stdout/stderr): nobody waits for the answer.
    Posted,
    /// A call whose caller waits for its answer.
    Waiting,
    /// Either: both are explored.
    Either,
}

/// How the host serves the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostModel {
    /// One host thread that decides from the header (`request != response`) and serves
    /// each packet to its end, `response` last, before it looks again.
    Atomic,
    /// The runtime's server (`hostcall-runtime`'s `server`): a consumer that goes by its
    /// own record of the sequence it last took, serves posted packets itself and hands
    /// waiting ones (calls that may block) to a pool job, which answers the lanes and
    /// stores `response` in steps of their own, interleaved with everything else.
    Pooled {
        /// The consumer stores `response` when it hands the packet over (the runtime
        /// the runtime's since the ticket rework); else the pool job stores it after its answers (before).
        response_at_handover: bool,
    },
    /// The runtime's server today: the consumer serves each lane of a packet
    /// itself, or, for a call that may block ([`Config::blocking`]), hands it off;
    /// [`Holding`] says how (each knob set as the runtime has it, or as it was).
    Holding(Holding),
}

/// How [`HostModel::Holding`] hands lanes off, stops and ends. [`Holding::today`] is the
/// runtime's server; each other value is one it was, whose bug a test shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    /// Each lane handed off is a job of its own; else one job serves its packet's lanes
    /// in turn (600ca0b's, for all but sockets).
    pub per_lane: bool,
    /// The port stays the packet's until its last lane is answered (or parked), and that
    /// answer stores `response`; else the consumer stores it when it has handed the
    /// lanes over, and a posted packet's next owner may go ahead.
    pub hold_port: bool,
    /// A lane handed off may be parked: answered a ticket on its port (which it then
    /// frees), its answer collected by a call of its own once its wake word is set.
    pub parks: bool,
    /// A posted lane handed off frees its port at once (nobody waits for its answer,
    /// which is dropped); else it holds the port like a waiting lane, and may be parked
    /// (a ticket nobody collects).
    pub posted_free: bool,
    /// What a stop (a timeout, a kill) answers `Killed`, and whether one is explored.
    pub stop: Stop,
    /// Whether the end of the run serves what was handed off (and what may block in
    /// its drain), or drops it.
    pub end_serves: bool,
}

impl Holding {
    /// The runtime's server now.
    pub fn today() -> Holding {
        Holding {
            per_lane: true,
            hold_port: true,
            parks: true,
            posted_free: true,
            stop: Stop::Everything,
            end_serves: true,
        }
    }
}

/// What a stop reaches. A stop may come at any step; every call answered `Killed`
/// traps its thread, which on a GPU ends the whole launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// No stop is explored.
    Never,
    /// Only calls taken after the stop are answered `Killed` (600ca0b): a lane
    /// already handed off waits for its job.
    NewCalls,
    /// Lanes handed off before the stop are answered `Killed` too, and jobs started
    /// after it run nothing; but a lane the consumer hands off as the stop comes is
    /// answered by nobody.
    HandedAtStop,
    /// As [`Stop::HandedAtStop`], and a consumer that hands a lane off after a stop
    /// answers it `Killed` itself.
    Everything,
}

/// How a call that may block is served (one of [`Config::blocking`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocks {
    /// It may take any time: its answer can come at any step.
    Later,
    /// It waits for another call (a FIFO's reader for its writer, a `recv` for its
    /// peer's `send`): its answer can come once that call has been served.
    Until(Token),
    /// It never ends by itself (an `accept` nobody connects to): only a stop answers it.
    Forever,
}

/// A configuration to explore: the protocol, the host, the main warp's lanes (lane ids
/// `0..`) and the foreign warp's lanes (with the lane ids they use), each with its calls.
#[derive(Clone, Debug)]
pub struct Config {
    /// The protocol followed.
    pub protocol: Protocol,
    /// How the host serves.
    pub host: HostModel,
    /// Calls of lanes 0, 1, ... of the main warp.
    pub main: Vec<Vec<CallKind>>,
    /// Lane id and calls of each lane of the foreign warp.
    pub foreign: Vec<(u8, Vec<CallKind>)>,
    /// Ports the lanes may take (a leader takes any free one).
    pub ports: u8,
    /// The calls that may block, and how ([`HostModel::Holding`] hands them off; the
    /// other hosts ignore this).
    pub blocking: Vec<(Token, Blocks)>,
}

impl Config {
    /// The scope: three lanes of one warp making two calls each, a foreign warp
    /// whose lane 1 makes one call on the same port, every call posted or not.
    pub fn standard(protocol: Protocol) -> Config {
        use CallKind::Either;
        Config {
            protocol,
            host: HostModel::Atomic,
            main: vec![vec![Either, Either]; 3],
            foreign: vec![(1, vec![Either])],
            ports: 1,
            blocking: Vec::new(),
        }
    }

    /// Scope for [`HostModel::Holding`]: two ports, a lane that waits for a
    /// call of a foreign lane with the same lane id, and a second lane whose call may be
    /// posted or not and may block; with `host`'s stops explored at every step.
    pub fn holding(host: Holding) -> Config {
        use CallKind::{Either, Waiting};
        Config {
            protocol: Protocol::V2,
            host: HostModel::Holding(host),
            main: vec![vec![Waiting], vec![Either]],
            foreign: vec![(0, vec![Either])],
            ports: 2,
            blocking: vec![
                (Token::main(0, 0), Blocks::Until(Token::foreign(0, 0))),
                (Token::main(1, 0), Blocks::Later),
            ],
        }
    }
}
