//! The modelled state (lanes, one port, the host) and every step it can take.

use std::fmt;

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

    fn leader_only(self) -> bool {
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
        /// since issue 19); else the pool job stores it after its answers (before).
        response_at_handover: bool,
    },
    /// The runtime's server since issue 31: the consumer serves each lane of a packet
    /// itself, or, for a call that may block ([`Config::blocking`]), hands it off;
    /// [`Holding`] says how (each knob set as the runtime has it, or as it was).
    Holding(Holding),
}

/// How [`HostModel::Holding`] hands lanes off, stops and ends. [`Holding::today`] is the
/// runtime's server; each other value is one it was, whose bug a test shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    /// Each lane handed off is a job of its own; else one job serves its packet's lanes
    /// in turn (before issue 31, for all but sockets).
    pub per_lane: bool,
    /// The port stays the packet's until its last lane is answered (or parked), and that
    /// answer stores `response`; else the consumer stores it when it has handed the
    /// lanes over (issue 19), and a posted packet's next owner may go ahead.
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
    /// Only calls taken after the stop are answered `Killed` (before issue 31): a lane
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

    /// Issue 31's scope for [`HostModel::Holding`]: two ports, a lane that waits for a
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

impl Token {
    /// Call `call` of the main warp's lane `lane`.
    pub fn main(lane: u8, call: u8) -> Token {
        Token {
            who: LaneRef { warp: 0, lane },
            call,
        }
    }

    /// Call `call` of the foreign warp's lane `lane`.
    pub fn foreign(lane: u8, call: u8) -> Token {
        Token {
            who: LaneRef { warp: 1, lane },
            call,
        }
    }
}

/// Who a lane is: its warp (0 main, 1 foreign) and lane id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneRef {
    /// 0 for the main warp, 1 for the foreign one.
    pub warp: u8,
    /// The lane id (its slot on the port).
    pub lane: u8,
}

/// A request: the lane that made it and which of its calls it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    /// The caller.
    pub who: LaneRef,
    /// The caller's call number, from 0.
    pub call: u8,
}

impl fmt::Display for LaneRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = if self.warp == 0 { "main" } else { "foreign" };
        write!(f, "{w} lane {}", self.lane)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} call {}", self.who, self.call)
    }
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Violation {
    /// A lane accepted an answer that is not the answer to its request.
    WrongReply {
        /// Whose request it was.
        expected: Token,
        /// Whose answer it read (`None`: a slot nobody had answered).
        got: Option<Token>,
    },
    /// A lane found its answer word tagged with another sequence (the V2 client traps).
    ForeignAnswer {
        /// The lane.
        lane: LaneRef,
        /// The sequence it waited for.
        expected: u8,
        /// The sequence in the word.
        found: u8,
    },
    /// The host served a slot that was not written for the packet it was handed.
    StaleSlot {
        /// The slot's lane id.
        lane: u8,
    },
    /// A port was released while a lane of its packet still had to read its answer.
    EarlyRelease {
        /// The lane still using the port.
        waiting: LaneRef,
    },
    /// A request was served twice.
    DoubleServe(Token),
    /// The run ended with a request never served.
    Lost(Token),
    /// No step is possible, yet some lane has not exited.
    Deadlock,
    /// The host refused a posted piece of output: it is lost.
    Dropped {
        /// The writer.
        writer: u8,
        /// Its piece.
        piece: u8,
    },
    /// A writer's piece came out before an earlier one of its own.
    OutOfOrder {
        /// The writer.
        writer: u8,
        /// The piece that came out too early.
        piece: u8,
    },
    /// Another writer's piece came out inside a part that must stay whole.
    Torn {
        /// The writer whose part was cut.
        writer: u8,
    },
    /// The piece whose turn it is can no longer arrive except by a retry the host keeps
    /// refusing.
    Stalled,
    /// The host took a stream message some of whose words were not yet its own.
    TornMessage {
        /// The writer.
        writer: u8,
        /// Its message.
        message: u8,
    },
    /// The host took a message word for the commit word of a batch: it is off the
    /// ring's batch boundaries from then on.
    Misframed {
        /// The position of the word.
        at: u8,
    },
    /// A writer of a stream that drops when full reserved a record with no room for it,
    /// and waits.
    DropWaits {
        /// The writer.
        writer: u8,
    },
    /// A stream message neither arrived nor was counted as dropped.
    MessageLost {
        /// The writer.
        writer: u8,
        /// Its first message that did not arrive.
        message: u8,
    },
    /// A thread ran twice, or on a worker that read no start routine.
    RunTwice {
        /// The thread.
        thread: u8,
    },
    /// `join` returned before its thread ended.
    JoinedEarly {
        /// The thread.
        thread: u8,
    },
    /// `join` or `detach` found no thread where its creator's was.
    JoinFailed {
        /// The thread.
        thread: u8,
    },
    /// A slot was given again while a creator could still join its thread.
    HandleReused {
        /// The slot.
        slot: u8,
    },
    /// A thread given never ran (`u8::MAX`: a worker found no start routine).
    ThreadLost {
        /// The thread.
        thread: u8,
    },
    /// The run ended with a parked call's ticket still out: its wake word is never
    /// given back.
    Uncollected(Token),
}

impl Violation {
    /// The kind of violation, for reporting one trace per kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::WrongReply { .. } => "wrong reply",
            Violation::ForeignAnswer { .. } => "foreign answer",
            Violation::StaleSlot { .. } => "stale slot served",
            Violation::EarlyRelease { .. } => "early release",
            Violation::DoubleServe(_) => "served twice",
            Violation::Lost(_) => "lost request",
            Violation::Deadlock => "deadlock",
            Violation::Dropped { .. } => "dropped output",
            Violation::OutOfOrder { .. } => "output out of order",
            Violation::Torn { .. } => "torn write",
            Violation::Stalled => "stalled output",
            Violation::TornMessage { .. } => "torn message",
            Violation::Misframed { .. } => "misframed ring",
            Violation::DropWaits { .. } => "dropping writer waits",
            Violation::MessageLost { .. } => "lost message",
            Violation::RunTwice { .. } => "thread run twice",
            Violation::JoinedEarly { .. } => "joined early",
            Violation::JoinFailed { .. } => "join failed",
            Violation::HandleReused { .. } => "handle reused",
            Violation::ThreadLost { .. } => "thread lost",
            Violation::Uncollected(_) => "ticket never collected",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::WrongReply { expected, got } => match got {
                Some(g) => write!(f, "{} accepted the answer to {g}", expected),
                None => write!(f, "{} accepted a slot nobody had answered", expected),
            },
            Violation::ForeignAnswer {
                lane,
                expected,
                found,
            } => write!(
                f,
                "{lane} waited for sequence {expected} and found {found} in its answer word"
            ),
            Violation::StaleSlot { lane } => {
                write!(
                    f,
                    "the host served slot {lane}, not written for this packet"
                )
            }
            Violation::EarlyRelease { waiting } => write!(
                f,
                "the port was released while {waiting} of its packet had not read its answer"
            ),
            Violation::DoubleServe(t) => write!(f, "{t} was served twice"),
            Violation::Lost(t) => write!(f, "{t} was never served"),
            Violation::Deadlock => write!(f, "no step is possible and some lane has not exited"),
            Violation::Dropped { writer, piece } => {
                write!(
                    f,
                    "writer {writer}'s piece {piece} was refused: output lost"
                )
            }
            Violation::OutOfOrder { writer, piece } => {
                write!(
                    f,
                    "writer {writer}'s piece {piece} came out before an earlier one"
                )
            }
            Violation::Torn { writer } => {
                write!(
                    f,
                    "another writer's piece came out inside writer {writer}'s part"
                )
            }
            Violation::Stalled => write!(
                f,
                "the piece whose turn it is can only arrive by a retry the host refuses"
            ),
            Violation::TornMessage { writer, message } => write!(
                f,
                "the host took writer {writer}'s message {message} before all its words were there"
            ),
            Violation::Misframed { at } => write!(
                f,
                "the host took the message word at position {at} for a batch's commit word"
            ),
            Violation::DropWaits { writer } => write!(
                f,
                "writer {writer} of a ring that drops when full reserved without room and waits"
            ),
            Violation::MessageLost { writer, message } => write!(
                f,
                "writer {writer}'s message {message} neither arrived nor was counted as dropped"
            ),
            Violation::RunTwice { thread } => write!(f, "thread {thread} ran twice"),
            Violation::JoinedEarly { thread } => {
                write!(f, "joining thread {thread} returned before it ended")
            }
            Violation::JoinFailed { thread } => {
                write!(
                    f,
                    "thread {thread}'s creator found no thread to join or detach"
                )
            }
            Violation::HandleReused { slot } => {
                write!(
                    f,
                    "slot {slot} was given again while its thread could be joined"
                )
            }
            Violation::ThreadLost { thread } => write!(f, "thread {thread} never ran"),
            Violation::Uncollected(t) => {
                write!(f, "{t} was parked and its answer is never collected")
            }
        }
    }
}

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
    pc: u8,
    call: u8,
    /// Whether this call is posted (`None` until chosen).
    posted: Option<bool>,
    /// `activemask`'s result.
    mask: u8,
    /// The packet's lanes (V1: the mask; V2: after the match).
    group: u8,
    /// The packet's id: its leader's token.
    packet: Option<Token>,
    /// The port the packet took.
    port: u8,
    /// The sequence this lane's packet is published under.
    seq: u8,
    /// Leader: the lock it took was "free, answer pending".
    took_posted: bool,
    /// The lane is done with its slot (answer read, or posted request written).
    finished: bool,
    /// Its call was answered a ticket: once the port is released, it collects.
    parked: bool,
    /// This request collects its parked call's answer (alone, after its wake word).
    collecting: bool,
    pub exited: bool,
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
const MAX_JOBS: usize = 2;

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

fn bits(mask: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |i| mask & (1 << i) != 0)
}

fn mask_text(mask: u8) -> String {
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

/// A configuration made ready to explore: who each lane is and what it calls.
pub(crate) struct Model {
    pub protocol: Protocol,
    pub host: HostModel,
    program: &'static [Op],
    pub who: Vec<LaneRef>,
    calls: Vec<Vec<CallKind>>,
    ports: u8,
    /// How each lane's each call may block.
    blocks: Vec<Vec<Option<Blocks>>>,
}

/// What one step of the port protocol leads to.
pub(crate) type Next = crate::explore::Next<State>;

impl crate::explore::Space for Model {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        Model::initial(self)
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next)> {
        Model::successors(self, s)
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        Model::finished(self, s)
    }
}

impl Model {
    pub fn new(config: &Config) -> Model {
        let mut who = Vec::new();
        let mut calls = Vec::new();
        for (i, c) in config.main.iter().enumerate() {
            who.push(LaneRef {
                warp: 0,
                lane: i as u8,
            });
            calls.push(c.clone());
        }
        for (lane, c) in &config.foreign {
            who.push(LaneRef {
                warp: 1,
                lane: *lane,
            });
            calls.push(c.clone());
        }
        assert!(
            who.iter().all(|w| (w.lane as usize) < MAX_LANES),
            "lane ids must be below {MAX_LANES}"
        );
        assert!(calls.iter().map(Vec::len).max().unwrap_or(0) <= 8 && who.len() <= 8);
        assert!(config.ports >= 1, "a port at least");
        let mut blocks: Vec<Vec<Option<Blocks>>> =
            calls.iter().map(|c| vec![None; c.len()]).collect();
        for (t, b) in &config.blocking {
            let i = who
                .iter()
                .position(|w| *w == t.who)
                .expect("a blocking call's lane is configured");
            blocks[i][t.call as usize] = Some(*b);
        }
        Model {
            protocol: config.protocol,
            host: config.host,
            program: config.protocol.program(),
            who,
            calls,
            ports: config.ports,
            blocks,
        }
    }

    pub fn token(&self, i: usize, call: u8) -> Token {
        Token {
            who: self.who[i],
            call,
        }
    }

    pub fn token_bit(&self, t: Token) -> u64 {
        1 << (self.index(t.who) * 8 + t.call as usize)
    }

    /// The index of lane `who` in the state's lanes.
    pub fn index(&self, who: LaneRef) -> usize {
        self.who.iter().position(|w| *w == who).expect("a lane")
    }

    /// Whether some call never ends by itself ([`Blocks::Forever`]).
    pub fn never_ends(&self) -> bool {
        self.blocks
            .iter()
            .flatten()
            .any(|b| *b == Some(Blocks::Forever))
    }

    /// How call `t` may block, if it may.
    pub fn blocks(&self, t: Token) -> Option<Blocks> {
        self.blocks[self.index(t.who)][t.call as usize]
    }

    fn fixed_kind(&self, i: usize, call: u8) -> Option<bool> {
        match self.calls[i].get(call as usize) {
            Some(CallKind::Posted) => Some(true),
            Some(CallKind::Waiting) => Some(false),
            _ => None,
        }
    }

    pub fn initial(&self) -> State {
        let lanes = (0..self.who.len())
            .map(|i| Lane {
                pc: 0,
                call: 0,
                posted: self.fixed_kind(i, 0),
                mask: 0,
                group: 0,
                packet: None,
                port: 0,
                seq: 0,
                took_posted: false,
                finished: false,
                parked: false,
                collecting: false,
                exited: self.calls[i].is_empty(),
            })
            .collect();
        let port = Port {
            lock: Lock::Free,
            seq: 0,
            request: 0,
            response: 0,
            mask: 0,
            packet: None,
            posted: false,
            slots: [Slot::default(); MAX_LANES],
            answers: [Answer::Done {
                seq: 0,
                reply: None,
            }; MAX_LANES],
            taken: 0,
        };
        State {
            lanes,
            ports: vec![port; self.ports as usize],
            host: Host::Idle,
            jobs: Vec::new(),
            holds: Vec::new(),
            tickets: vec![Ticket::None; self.who.len()],
            stopped: false,
            trapped: false,
            ended: false,
            served: 0,
        }
    }

    /// Whether `s` is a correct end: every lane exited and nothing is outstanding, or
    /// a stopped call trapped (the launch is over; the run's end stops what is left).
    pub fn finished(&self, s: &State) -> Result<bool, Violation> {
        if s.trapped {
            return Ok(true);
        }
        if !s.lanes.iter().all(|l| l.exited)
            || s.host != Host::Idle
            || !s.jobs.is_empty()
            || !s.holds.is_empty()
        {
            return Ok(false);
        }
        if s.ports.iter().any(|p| p.request != p.response) {
            return Ok(false);
        }
        for (i, t) in s.tickets.iter().enumerate() {
            if let Ticket::Waiting(t) | Ticket::Done(t) = t {
                return Err(Violation::Uncollected(*t));
            }
            debug_assert!(*t == Ticket::None || s.stopped, "lane {i}");
        }
        if s.stopped {
            return Ok(true);
        }
        for (i, c) in self.calls.iter().enumerate() {
            for call in 0..c.len() as u8 {
                let t = self.token(i, call);
                if s.served & self.token_bit(t) == 0 {
                    return Err(Violation::Lost(t));
                }
            }
        }
        Ok(true)
    }

    /// Every step possible from `s`.
    pub fn successors(&self, s: &State) -> Vec<(Action, Next)> {
        let mut out = Vec::new();
        if s.trapped {
            return out;
        }
        self.active_masks(s, &mut out);
        self.collections(s, &mut out);
        self.syncs(s, &mut out);
        for i in 0..s.lanes.len() {
            self.lane_step(s, i, &mut out);
        }
        self.host_steps(s, &mut out);
        out
    }

    fn op(&self, l: &Lane) -> Op {
        self.program[l.pc as usize]
    }

    /// `activemask`: any non-empty subset of a warp's lanes waiting at the entry (a lane
    /// that collects a parked call's answer goes alone: [`Model::collections`]).
    fn active_masks(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        for warp in [0u8, 1] {
            let at_entry: Vec<usize> = (0..s.lanes.len())
                .filter(|&i| {
                    let l = &s.lanes[i];
                    self.who[i].warp == warp
                        && !l.exited
                        && !l.collecting
                        && self.op(l) == ActiveMask
                })
                .collect();
            for subset in 1u32..(1 << at_entry.len()) {
                let members: Vec<usize> = at_entry
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| subset & (1 << k) != 0)
                    .map(|(_, &i)| i)
                    .collect();
                let mask = members.iter().fold(0u8, |m, &i| m | 1 << self.who[i].lane);
                // Each member's call is posted or not: every choice not fixed by the
                // configuration is explored (taken here rather than as a step of its own,
                // which would only multiply interleavings of a lane-private choice).
                let open: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&i| s.lanes[i].posted.is_none())
                    .collect();
                for choice in 0u32..(1 << open.len()) {
                    let mut n = s.clone();
                    let mut posted = 0u8;
                    for (k, &i) in open.iter().enumerate() {
                        n.lanes[i].posted = Some(choice & (1 << k) != 0);
                    }
                    for &i in &members {
                        n.lanes[i].mask = mask;
                        n.lanes[i].group = mask;
                        if n.lanes[i].posted == Some(true) {
                            posted |= 1 << self.who[i].lane;
                        }
                    }
                    if self.protocol != Protocol::V2 {
                        self.set_packet(&mut n, &members);
                    }
                    for &i in &members {
                        self.advance(&mut n, i);
                    }
                    out.push((Action::ActiveMask { warp, mask, posted }, Next::State(n)));
                }
            }
        }
    }

    /// A lane whose call was parked starts its collection, alone, once its wake word is
    /// set.
    fn collections(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        for (i, l) in s.lanes.iter().enumerate() {
            if l.exited || !l.collecting || self.op(l) != ActiveMask {
                continue;
            }
            if !matches!(s.tickets[i], Ticket::Done(_) | Ticket::Killed) {
                continue;
            }
            let mut n = s.clone();
            let mask = 1 << self.who[i].lane;
            n.lanes[i].mask = mask;
            n.lanes[i].group = mask;
            self.advance(&mut n, i);
            out.push((
                Action::ActiveMask {
                    warp: self.who[i].warp,
                    mask,
                    posted: 0,
                },
                Next::State(n),
            ));
        }
    }

    /// The packet id of `members` (one packet): its leader's current call.
    fn set_packet(&self, n: &mut State, members: &[usize]) {
        let leader = *members
            .iter()
            .min_by_key(|&&i| self.who[i].lane)
            .expect("a packet has a lane");
        let packet = self.token(leader, n.lanes[leader].call);
        for &i in members {
            n.lanes[i].packet = Some(packet);
        }
    }

    /// Warp-synchronous steps: all lanes of a mask waiting at a step of the same kind
    /// with that mask (wherever in the program) proceed once every other lane of the
    /// mask has exited.
    fn syncs(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        let mut seen: Vec<(u8, Op, u8)> = Vec::new();
        for (i, l) in s.lanes.iter().enumerate() {
            if l.exited || !self.op(l).is_sync() {
                continue;
            }
            let op = self.op(l);
            let mask = if op == MatchPosted { l.mask } else { l.group };
            let warp = self.who[i].warp;
            if seen.contains(&(warp, op, mask)) {
                continue;
            }
            seen.push((warp, op, mask));
            let waiting: Vec<usize> = (0..s.lanes.len())
                .filter(|&j| {
                    let m = &s.lanes[j];
                    self.who[j].warp == warp
                        && !m.exited
                        && self.op(m) == op
                        && (if op == MatchPosted { m.mask } else { m.group }) == mask
                })
                .collect();
            let all_there = bits(mask).all(|lane| {
                (0..s.lanes.len())
                    .filter(|&j| self.who[j].warp == warp && self.who[j].lane == lane)
                    .all(|j| s.lanes[j].exited || waiting.contains(&j))
            });
            if !all_there {
                continue;
            }
            let mut n = s.clone();
            if op == MatchPosted {
                for posted in [false, true] {
                    let group: Vec<usize> = waiting
                        .iter()
                        .copied()
                        .filter(|&j| s.lanes[j].posted == Some(posted))
                        .collect();
                    let g = group.iter().fold(0u8, |m, &j| m | 1 << self.who[j].lane);
                    for &j in &group {
                        n.lanes[j].group = g;
                    }
                    if !group.is_empty() {
                        self.set_packet(&mut n, &group);
                    }
                }
            }
            let port = if op == Broadcast {
                waiting
                    .iter()
                    .find(|&&j| self.is_leader(j, &s.lanes[j]))
                    .map(|&j| s.lanes[j].port)
            } else {
                None
            };
            for &j in &waiting {
                if let Some(p) = port {
                    n.lanes[j].port = p;
                    // V2: every lane then reads the sequence its packet will be
                    // published under. The counter changes only at the lock holder's
                    // publication, which waits for this lane at the next barrier: the
                    // read commutes with every step in between, so it is taken here,
                    // with the broadcast.
                    if self.protocol == Protocol::V2 {
                        n.lanes[j].seq = s.ports[p as usize].seq.wrapping_add(1);
                    }
                }
                self.advance(&mut n, j);
            }
            out.push((Action::Sync { warp, op, mask }, Next::State(n)));
        }
    }

    fn is_leader(&self, i: usize, l: &Lane) -> bool {
        l.group.trailing_zeros() as u8 == self.who[i].lane
    }

    /// The next non-synchronous step of lane `i`, if it can take one (a leader may take
    /// any free port: one step per port).
    fn lane_step(&self, s: &State, i: usize, out: &mut Vec<(Action, Next)>) {
        let l = s.lanes[i];
        if l.exited {
            return;
        }
        let op = self.op(&l);
        if op == ActiveMask || op.is_sync() {
            return;
        }
        let who = self.who[i];
        let action = Action::Step { lane: who, op };
        let leader = self.is_leader(i, &l);
        let mut n = s.clone();
        let me = self.token(i, l.call);
        let slot = who.lane as usize;
        let p = l.port as usize;
        let mut flagged = None;
        debug_assert!(leader || !op.leader_only());
        match op {
            LeaderAcquire => {
                for (k, port) in s.ports.iter().enumerate() {
                    if port.lock == Lock::Held {
                        continue;
                    }
                    let mut n = s.clone();
                    n.lanes[i].took_posted = port.lock == Lock::FreePosted;
                    n.lanes[i].port = k as u8;
                    n.ports[k].lock = Lock::Held;
                    self.advance(&mut n, i);
                    let action = Action::Acquire {
                        lane: who,
                        port: k as u8,
                    };
                    out.push((action, Next::State(n)));
                }
                return;
            }
            LeaderWaitPosted => {
                if l.took_posted && s.ports[p].response != s.ports[p].seq {
                    return;
                }
            }
            WriteSlot => {
                n.ports[p].slots[slot] = Slot {
                    request: Some(me),
                    packet: l.packet,
                    collect: l.collecting,
                    answered: false,
                    reply: None,
                };
                n.ports[p].answers[slot] = Answer::Pending;
                n.lanes[i].finished = l.posted == Some(true);
            }
            Publish => {
                if leader {
                    let seq = s.ports[p].seq.wrapping_add(1);
                    let port = &mut n.ports[p];
                    port.seq = seq;
                    port.mask = l.group;
                    port.request = seq;
                    port.packet = l.packet;
                    port.posted = l.posted == Some(true);
                    n.lanes[i].seq = seq;
                    if l.posted == Some(true) {
                        n.ports[p].lock = Lock::FreePosted;
                        flagged = self.release_check(s, i);
                    }
                }
                if l.posted == Some(true) {
                    self.end_call(&mut n, i);
                    out.push((action, outcome(n, flagged)));
                    return;
                }
            }
            LeaderPollResponse => {
                if s.ports[p].response != l.seq {
                    return;
                }
            }
            ReadSlot => {
                let recheck = matches!(self.protocol, Protocol::V1 { recheck: true });
                let sl = s.ports[p].slots[slot];
                if recheck && !(sl.answered && sl.request == Some(me)) {
                    return;
                }
                let got = if sl.answered { sl.reply } else { None };
                if got != Some(me) {
                    let v = Violation::WrongReply { expected: me, got };
                    out.push((action, Next::Broken(v)));
                    return;
                }
                n.lanes[i].finished = true;
            }
            PollAnswer => {
                let (seq, reply) = match s.ports[p].answers[slot] {
                    Answer::Pending => return,
                    Answer::Done { seq, reply } => (seq, Some(reply)),
                    Answer::Killed { seq } | Answer::Parked { seq } => (seq, None),
                };
                if seq != l.seq {
                    let v = Violation::ForeignAnswer {
                        lane: who,
                        expected: l.seq,
                        found: seq,
                    };
                    out.push((action, Next::Broken(v)));
                    return;
                }
                match (s.ports[p].answers[slot], reply) {
                    (_, Some(reply)) if reply != Some(me) => {
                        let v = Violation::WrongReply {
                            expected: me,
                            got: reply,
                        };
                        out.push((action, Next::Broken(v)));
                        return;
                    }
                    (Answer::Killed { .. }, _) => {
                        // The thread traps, which ends the launch.
                        n.trapped = true;
                        out.push((action, Next::State(n)));
                        return;
                    }
                    (Answer::Parked { .. }, _) => n.lanes[i].parked = true,
                    _ => {}
                }
                n.lanes[i].finished = true;
            }
            LeaderRelease => {
                n.ports[p].lock = Lock::Free;
                flagged = self.release_check(s, i);
            }
            Return => unreachable!("`advance` returns on reaching it"),
            ActiveMask | MatchPosted | Broadcast | Barrier => unreachable!("handled as syncs"),
        }
        self.advance(&mut n, i);
        out.push((action, outcome(n, flagged)));
    }

    /// Moves lane `i` to its next step, past leader-only steps it does not take: they
    /// touch nothing, so skipping them at once changes no behaviour and saves states.
    ///
    /// Likewise a leader that found the lock plainly free skips the wait for a posted
    /// answer, and a lane reaching `Return` returns at once (both are lane-private), and
    /// fields no later step reads are cleared, so that equal futures are equal states.
    fn advance(&self, n: &mut State, i: usize) {
        let l = &mut n.lanes[i];
        l.pc += 1;
        let leader = l.group.trailing_zeros() as u8 == self.who[i].lane;
        loop {
            match self.program[l.pc as usize] {
                op if op.leader_only() && !leader => l.pc += 1,
                LeaderWaitPosted if !l.took_posted => l.pc += 1,
                _ => break,
            }
        }
        if self.program[l.pc as usize] != MatchPosted {
            l.mask = 0;
        }
        if self.program[l.pc as usize] == Return {
            self.end_call(n, i);
        }
    }

    /// Lane `i` (a leader) releases the port: every lane of its packet must be done.
    fn release_check(&self, s: &State, i: usize) -> Option<Violation> {
        let l = &s.lanes[i];
        (0..s.lanes.len())
            .find(|&j| {
                let m = &s.lanes[j];
                self.who[j].warp == self.who[i].warp
                    && l.group & (1 << self.who[j].lane) != 0
                    && m.packet == l.packet
                    && !m.exited
                    && !m.finished
            })
            .map(|j| Violation::EarlyRelease {
                waiting: self.who[j],
            })
    }

    /// Lane `i`'s request is done: on to its next call, or, if it was parked, to the
    /// collection of its answer.
    fn end_call(&self, n: &mut State, i: usize) {
        let parked = n.lanes[i].parked;
        let call = n.lanes[i].call + u8::from(!parked);
        n.lanes[i] = Lane {
            pc: 0,
            call,
            posted: if parked {
                Some(false)
            } else {
                self.fixed_kind(i, call)
            },
            mask: 0,
            group: 0,
            packet: None,
            port: 0,
            seq: 0,
            took_posted: false,
            finished: false,
            parked: false,
            collecting: parked,
            exited: call as usize >= self.calls[i].len(),
        };
    }

    fn host_steps(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        match self.host {
            HostModel::Atomic => self.atomic_host(s, out),
            HostModel::Pooled {
                response_at_handover,
            } => {
                self.consumer(s, response_at_handover, out);
                for j in 0..s.jobs.len() {
                    self.pool_job(s, j, out);
                }
            }
            HostModel::Holding(h) => self.holding_host(s, h, out),
        }
    }

    /// A port with a request not yet answered (by the header).
    fn published(&self, s: &State) -> impl Iterator<Item = usize> {
        (0..s.ports.len()).filter(move |&p| s.ports[p].request != s.ports[p].response)
    }

    fn atomic_host(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        match s.host {
            Host::Idle => {
                for p in self.published(s) {
                    let port = &s.ports[p];
                    let mut n = s.clone();
                    n.host = Host::Serving {
                        port: p as u8,
                        seq: port.request,
                        todo: port.mask,
                        packet: port.packet,
                        killing: false,
                    };
                    let action = Action::HostBegin {
                        port: p as u8,
                        seq: port.request,
                        mask: port.mask,
                    };
                    out.push((action, Next::State(n)));
                }
            }
            Host::Serving {
                port, seq, todo: 0, ..
            } => {
                let mut n = s.clone();
                n.ports[port as usize].response = seq;
                n.host = Host::Idle;
                out.push((Action::HostAnswer { port, seq }, Next::State(n)));
            }
            Host::Serving {
                port,
                seq,
                todo,
                packet,
                ..
            } => self.host_serve(s, (port, seq), todo, packet, out),
        }
    }

    /// The runtime's consumer before issue 31: a doorbell other than its own record is
    /// a new packet; posted packets it serves itself, waiting ones go to the pool.
    fn consumer(&self, s: &State, response_at_handover: bool, out: &mut Vec<(Action, Next)>) {
        match s.host {
            Host::Idle => {
                for p in 0..s.ports.len() {
                    let port = &s.ports[p];
                    if port.request == port.taken {
                        continue;
                    }
                    let (seq, mask, packet) = (port.request, port.mask, port.packet);
                    let mut n = s.clone();
                    if port.posted {
                        n.host = Host::Serving {
                            port: p as u8,
                            seq,
                            todo: mask,
                            packet,
                            killing: false,
                        };
                        let action = Action::HostBegin {
                            port: p as u8,
                            seq,
                            mask,
                        };
                        out.push((action, Next::State(n)));
                    } else if s.jobs.len() < MAX_JOBS {
                        n.jobs.push(Job {
                            port: p as u8,
                            seq,
                            todo: mask,
                            packet,
                            responded: response_at_handover,
                            requests: [None; MAX_LANES],
                            answers: true,
                        });
                        if response_at_handover {
                            n.ports[p].response = seq;
                        }
                        n.ports[p].taken = seq;
                        out.push((Action::HostToPool { seq, mask }, Next::State(n)));
                    }
                }
            }
            Host::Serving {
                port, seq, todo: 0, ..
            } => {
                let mut n = s.clone();
                n.ports[port as usize].response = seq;
                n.ports[port as usize].taken = seq;
                n.host = Host::Idle;
                out.push((Action::HostAnswer { port, seq }, Next::State(n)));
            }
            Host::Serving {
                port,
                seq,
                todo,
                packet,
                ..
            } => self.host_serve(s, (port, seq), todo, packet, out),
        }
    }

    /// The next step of pool job `j`: its lanes' answers, then its `response` store
    /// unless the consumer made it.
    fn pool_job(&self, s: &State, j: usize, out: &mut Vec<(Action, Next)>) {
        let job = s.jobs[j];
        if job.todo == 0 && !job.responded {
            let mut n = s.clone();
            n.ports[job.port as usize].response = job.seq;
            n.jobs[j].responded = true;
            if n.jobs[j].todo == 0 {
                n.jobs.remove(j);
            }
            out.push((Action::PoolResponse { seq: job.seq }, Next::State(n)));
            return;
        }
        let lane = job.todo.trailing_zeros() as u8;
        let at = (job.port, job.seq);
        self.push_served(
            s,
            at,
            lane,
            job.packet,
            Action::PoolServe { lane },
            out,
            |n| {
                n.jobs[j].todo &= !(1 << lane);
                if n.jobs[j].todo == 0 && n.jobs[j].responded {
                    n.jobs.remove(j);
                }
            },
        );
    }

    /// The host serves the next lane of the packet it is serving itself.
    fn host_serve(
        &self,
        s: &State,
        (port, seq): (u8, u8),
        todo: u8,
        packet: Option<Token>,
        out: &mut Vec<(Action, Next)>,
    ) {
        let lane = todo.trailing_zeros() as u8;
        let action = Action::HostServe { lane };
        self.push_served(s, (port, seq), lane, packet, action, out, |n| {
            n.host = Host::Serving {
                port,
                seq,
                todo: todo & !(1 << lane),
                packet,
                killing: false,
            };
        });
    }

    /// Pushes `action`: slot `lane` served ([`Model::serve_slot`]) and then `then`, or
    /// the violation serving it breaks.
    #[allow(clippy::too_many_arguments)]
    fn push_served(
        &self,
        s: &State,
        at: (u8, u8),
        lane: u8,
        packet: Option<Token>,
        action: Action,
        out: &mut Vec<(Action, Next)>,
        then: impl FnOnce(&mut State),
    ) {
        match self.serve_slot(s, at, lane, packet) {
            Ok(mut n) => {
                then(&mut n);
                out.push((action, Next::State(n)));
            }
            Err(v) => out.push((action, Next::Broken(v))),
        }
    }

    /// Slot `lane` of port `port` served as part of `packet`, published as `seq`: its
    /// request marked served and its answer written.
    pub fn serve_slot(
        &self,
        s: &State,
        (port, seq): (u8, u8),
        lane: u8,
        packet: Option<Token>,
    ) -> Result<State, Violation> {
        let t = self.slot_request(s, port, lane, packet)?;
        let mut n = s.clone();
        self.mark_served(&mut n, t)?;
        let p = &mut n.ports[port as usize];
        p.slots[lane as usize].answered = true;
        p.slots[lane as usize].reply = Some(t);
        p.answers[lane as usize] = Answer::Done {
            seq,
            reply: Some(t),
        };
        Ok(n)
    }

    /// The request in slot `lane` of `port`, which must have been written for `packet`.
    pub fn slot_request(
        &self,
        s: &State,
        port: u8,
        lane: u8,
        packet: Option<Token>,
    ) -> Result<Token, Violation> {
        let sl = s.ports[port as usize].slots[lane as usize];
        if sl.packet != packet || packet.is_none() {
            return Err(Violation::StaleSlot { lane });
        }
        Ok(sl.request.expect("a written slot names its request"))
    }

    /// Request `t` is served (once).
    pub fn mark_served(&self, n: &mut State, t: Token) -> Result<(), Violation> {
        if n.served & self.token_bit(t) != 0 {
            return Err(Violation::DoubleServe(t));
        }
        n.served |= self.token_bit(t);
        Ok(())
    }
}
