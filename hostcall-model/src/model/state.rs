//! The modelled state (lanes, one port, the host's consumer and pool jobs) and the
//! actions that move it.

use std::fmt;

use super::*;
use crate::violation::Violation;

/// The port's lock, in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Lock {
    Free,
    Held,
    FreePosted,
}

/// A lane's request slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Slot {
    pub request: Option<Token>,
    /// Ghost: the packet (its leader's token) the slot was written for.
    pub packet: Option<Token>,
    /// The request collects the answer of the lane's parked call.
    pub collect: bool,
    /// V1: the status word says answered.
    pub answered: bool,
    /// V1: the answer the host wrote into the slot.
    pub reply: Option<Token>,
}

/// A lane's answer word (V2): pending, or the host's answer tagged with a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Answer {
    Pending,
    Done {
        seq: u8,
        reply: Option<Token>,
    },
    /// The call was stopped: the lane traps.
    Killed {
        seq: u8,
    },
    /// The call was parked: the lane frees the port and collects its answer later.
    Parked {
        seq: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Port {
    pub lock: Lock,
    pub seq: u8,
    pub request: u8,
    pub response: u8,
    pub mask: u8,
    /// Ghost: the packet published as `request`.
    pub packet: Option<Token>,
    /// Whether that packet is posted (the host tells from its services).
    pub posted: bool,
    pub slots: [Slot; MAX_LANES],
    pub answers: [Answer; MAX_LANES],
    /// [`HostModel::Pooled`] and [`HostModel::Holding`]: the sequence the consumer last
    /// took (its own record).
    pub taken: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lane {
    pub(crate) pc: u8,
    pub(crate) call: u8,
    /// Whether this call is posted (`None` until chosen).
    pub(crate) posted: Option<bool>,
    /// `activemask`'s result.
    pub(crate) mask: u8,
    /// The packet's lanes (V1: the mask; V2: after the match).
    pub(crate) group: u8,
    /// The packet's id: its leader's token.
    pub(crate) packet: Option<Token>,
    /// The port the packet took.
    pub(crate) port: u8,
    /// The sequence this lane's packet is published under.
    pub(crate) seq: u8,
    /// Leader: the lock it took was "free, answer pending".
    pub(crate) took_posted: bool,
    /// The lane is done with its slot (answer read, or posted request written).
    pub(crate) finished: bool,
    /// Its call was answered a ticket: once the port is released, it collects.
    pub(crate) parked: bool,
    /// This request collects its parked call's answer (alone, after its wake word).
    pub(crate) collecting: bool,
    pub exited: bool,
}

impl Lane {
    /// A lane at the start of its call `call` (exited when it has none left), before
    /// anything of the protocol: no packet, port or sequence yet.
    pub(crate) fn at_call(call: u8, posted: Option<bool>, collecting: bool, exited: bool) -> Lane {
        Lane {
            pc: 0,
            call,
            posted,
            mask: 0,
            group: 0,
            packet: None,
            port: 0,
            seq: 0,
            took_posted: false,
            finished: false,
            parked: false,
            collecting,
            exited,
        }
    }
}

/// What the consumer is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Host {
    Idle,
    Serving {
        port: u8,
        seq: u8,
        todo: u8,
        packet: Option<Token>,
        /// [`HostModel::Holding`]: a stop had come when the sweep began.
        killing: bool,
    },
}

/// A packet handed to the pool ([`HostModel::Pooled`]), or one lane of it or all its
/// lanes handed off ([`HostModel::Holding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Job {
    pub port: u8,
    pub seq: u8,
    pub todo: u8,
    pub packet: Option<Token>,
    pub responded: bool,
    /// [`HostModel::Holding`]: each lane's request, copied out at the hand-off.
    pub requests: [Option<Token>; MAX_LANES],
    /// [`HostModel::Holding`]: its answers are written (else dropped: posted lanes).
    pub answers: bool,
}

/// A packet some of whose lanes were handed off ([`HostModel::Holding`]), until every
/// one of them has its final answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Hold {
    pub port: u8,
    pub seq: u8,
    /// The packet is posted.
    pub posted: bool,
    /// Answers on the port still to come, and one while the consumer still serves the
    /// packet.
    pub left: u8,
    /// `left` came to 0: `response` is stored and the port is its consumer's again.
    pub released: bool,
    pub handed: u8,
    /// Lanes with their final answer (a result or `Killed`).
    pub answered: u8,
    /// Lanes answered a ticket on the port.
    pub parked: u8,
    /// Each handed-off lane's request, copied out at the hand-off.
    pub requests: [Option<Token>; MAX_LANES],
}

/// A parked call's entry in the host's table (one per lane: a lane parks one call at a
/// time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ticket {
    None,
    /// Out; the call's answer is still to come.
    Waiting(Token),
    /// Its answer is in the table and the wake word is set.
    Done(Token),
    /// A stop answered it `Killed` and set the wake word.
    Killed,
}

/// The most jobs the modelled pool holds at once (the consumer waits past it).
pub(crate) const MAX_JOBS: usize = 2;

/// A state of the whole configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    pub lanes: Vec<Lane>,
    pub ports: Vec<Port>,
    pub host: Host,
    /// The pool's jobs, in the order handed over.
    pub jobs: Vec<Job>,
    /// [`HostModel::Holding`]: packets with lanes handed off.
    pub holds: Vec<Hold>,
    /// [`HostModel::Holding`]: each lane's parked call.
    pub tickets: Vec<Ticket>,
    /// A stop has come.
    pub stopped: bool,
    /// A lane read `Killed` and trapped: the launch is over.
    pub trapped: bool,
    /// Every lane exited and the host ended the run.
    pub ended: bool,
    /// Ghost: requests served so far, one bit per token.
    pub served: u64,
}

/// A step taken, for traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    ActiveMask { warp: u8, mask: u8, posted: u8 },
    Sync { warp: u8, op: Op, mask: u8 },
    Step { lane: LaneRef, op: Op },
    Acquire { lane: LaneRef, port: u8 },
    HostBegin { port: u8, seq: u8, mask: u8 },
    HostServe { lane: u8 },
    HostAnswer { port: u8, seq: u8 },
    HostToPool { seq: u8, mask: u8 },
    PoolServe { lane: u8 },
    PoolResponse { seq: u8 },
    HandOff { port: u8, lane: u8 },
    Killed { port: u8, lane: u8 },
    Collect { port: u8, lane: u8 },
    JobAnswer { port: u8, lane: u8 },
    JobDropped { port: u8, lane: u8 },
    Park { port: u8, lane: u8 },
    Stop,
    End,
}

pub(crate) fn outcome(n: State, flagged: Option<Violation>) -> Next {
    match flagged {
        Some(v) => Next::Flagged(n, v),
        None => Next::State(n),
    }
}

pub(crate) fn bits(mask: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |i| mask & (1 << i) != 0)
}

pub(crate) fn mask_text(mask: u8) -> String {
    let lanes: Vec<String> = bits(mask).map(|b| b.to_string()).collect();
    format!("{{{}}}", lanes.join(","))
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let warp = |w: u8| if w == 0 { "main" } else { "foreign" };
        match *self {
            Action::ActiveMask {
                warp: w,
                mask,
                posted,
            } => write!(
                f,
                "{} warp: activemask = {}; posted calls: {}",
                warp(w),
                mask_text(mask),
                mask_text(posted)
            ),
            Action::Sync { warp: w, op, mask } => {
                write!(
                    f,
                    "{} warp: {op:?} over {} completes",
                    warp(w),
                    mask_text(mask)
                )
            }
            Action::Step { lane, op } => write!(f, "{lane}: {op:?}"),
            Action::Acquire { lane, port } => write!(f, "{lane}: LeaderAcquire of port {port}"),
            Action::HostBegin { port, seq, mask } => {
                write!(
                    f,
                    "host: sees request {seq} on port {port} for lanes {}",
                    mask_text(mask)
                )
            }
            Action::HostServe { lane } => write!(f, "host: serves slot {lane}"),
            Action::HostAnswer { port, seq } => {
                write!(f, "host: response = {seq} on port {port}")
            }
            Action::HostToPool { seq, mask } => write!(
                f,
                "host: hands request {seq} for lanes {} to the pool",
                mask_text(mask)
            ),
            Action::PoolServe { lane } => write!(f, "pool: answers slot {lane}"),
            Action::PoolResponse { seq } => write!(f, "pool: response = {seq}"),
            Action::HandOff { port, lane } => {
                write!(f, "host: hands off lane {lane} of port {port}")
            }
            Action::Killed { port, lane } => {
                write!(f, "host: answers lane {lane} of port {port} Killed")
            }
            Action::Collect { port, lane } => write!(
                f,
                "host: answers lane {lane}'s collection on port {port} from its ticket"
            ),
            Action::JobAnswer { port, lane } => {
                write!(f, "job: serves lane {lane} of port {port} and answers it")
            }
            Action::JobDropped { port, lane } => write!(
                f,
                "job: lane {lane} of port {port} is not served (the run is stopping or over)"
            ),
            Action::Park { port, lane } => {
                write!(f, "timer: parks lane {lane} of port {port} (a ticket)")
            }
            Action::Stop => write!(f, "stop: the launch is killed"),
            Action::End => write!(f, "host: the kernel ended; the run ends"),
        }
    }
}
