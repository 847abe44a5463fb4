//! What the models report: each way a run can go wrong, with the calls it names.

use std::fmt;

use crate::call::{LaneRef, Token};

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
    /// The program's end stops waiting without a trap (its count reached, or nothing
    /// left running to trap for) while a worker has not gone: its thread keeps the
    /// launch alive.
    Stranded {
        /// The worker.
        worker: u8,
    },
    /// The run ended with a parked call's ticket still out: its wake word is never
    /// given back.
    Uncollected(Token),
    /// A GPU thread's call that needs only what the host has (a port, a worker, a
    /// consumer's turn) never gets it: something that waits without bound holds it.
    HeldUp {
        /// The thread.
        thread: u8,
        /// What holds the host's resource.
        by: Holder,
    },
    /// The process ended with printed output not yet written while its reader still
    /// reads: the output is lost.
    OutputLost {
        /// Units of output not written.
        units: u8,
    },
    /// The host's stdout holds more unwritten output than its bound.
    OverBound {
        /// Units it holds.
        units: u8,
    },
    /// A GPU thread gave up waiting on a port whose posted output waits for a stalled
    /// reader: the launch fails.
    GaveUp {
        /// The thread.
        thread: u8,
    },
}

/// What holds a resource a call that only needs the host waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Holder {
    /// Output waiting for stdout's stalled reader.
    StalledOutput,
    /// A call that never returns (a read of a hung mount).
    HungCall,
    /// Calls that wait on another party (a FIFO's other end, stdout's reader).
    WaitingCalls,
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
            Violation::Stranded { .. } => "worker stranded",
            Violation::Uncollected(_) => "ticket never collected",
            Violation::HeldUp { by, .. } => match by {
                Holder::StalledOutput => "held up by stalled output",
                Holder::HungCall => "held up by a hung call",
                Holder::WaitingCalls => "held up by waiting calls",
            },
            Violation::OutputLost { .. } => "output lost",
            Violation::OverBound { .. } => "output past its bound",
            Violation::GaveUp { .. } => "launch failed",
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
            Violation::Stranded { worker } => write!(
                f,
                "the program is ending without a trap, but worker {worker} has not gone: it keeps the launch alive"
            ),
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
            Violation::HeldUp { thread, by } => {
                let by = match by {
                    Holder::StalledOutput => "output waiting for a stalled reader holds",
                    Holder::HungCall => "a call that never returns holds",
                    Holder::WaitingCalls => "calls waiting on another party hold",
                };
                write!(
                    f,
                    "thread {thread}'s call needs only the host and waits for ever: {by} what it needs"
                )
            }
            Violation::OutputLost { units } => write!(
                f,
                "the process ended with {units} unit(s) of output unwritten while its reader still reads"
            ),
            Violation::OverBound { units } => {
                write!(f, "stdout holds {units} unit(s) unwritten, past its bound")
            }
            Violation::GaveUp { thread } => write!(
                f,
                "thread {thread} gave up waiting on a port whose output waits for a stalled reader: the launch fails"
            ),
        }
    }
}
