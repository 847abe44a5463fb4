//! Tagged streams (dh_comms's messages): the protocol by which GPU threads
//! put one-way messages into a ring in host memory and the host takes them out, before
//! it is built. Every interleaving of writers, of the order in which each writer's
//! stores reach host memory, and of the host's steps is explored.
//!
//! A writer's message here stands for a batch (`hostcall_abi::stream`): the records of
//! the lanes of a warp that submitted together, stored before one fence, with one commit
//! word (the header here) after it. Which lane stores which word of the batch does not
//! change the protocol: every lane's fence, and the barrier after them, come before the
//! commit word.
//!
//! The protocol, per ring (a sub-buffer shared by some warps):
//! 1. A writer reserves its record, a header word and the message's words, by an atomic
//!    add on a position counter in device memory, which only grows.
//! 2. While the record would overwrite words the host has not taken
//!    (`position + length - tail > capacity`), it waits, reading `tail` from host memory.
//!    With [`WhenFull::Drop`] it reserves only where there is room, in one step (a
//!    compare-and-swap on the counter), and counts a message that finds none as
//!    dropped; [`StreamConfig::two_step_drop`] checks for room and reserves in two
//!    steps, as the code did, and a writer that dropping should never hold up can then
//!    wait.
//! 3. It stores the message's words, then (with [`StreamConfig::fenced`]) a system
//!    fence, then the header, which names the record's position.
//! 4. The host reads the header at the position it has taken up to. Only a header that
//!    names that position ([`HeaderCheck::Position`]) marks a complete record. It reads
//!    the message, clears the record's words (with [`StreamConfig::clears`]), advances
//!    its own position, and from time to time publishes it as `tail`.
//!
//! A message word is user data: it may hold any value, that of a header naming the
//! position the host expects included (a hash, a negative number, a random word).
//! With [`StreamConfig::any_words`], a message word the host finds where it expects a
//! header may pass for one. Cleared words never do (a header has a bit no cleared
//! word has), and a writer stores a record's words only once the host has published a
//! `tail` past the words it cleared, so the word at the host's position is its record's
//! header, or cleared.
//!
//! A GPU thread's stores to host memory may become visible in any order unless a fence
//! separates them. The model keeps each writer's stores pending until a step makes one
//! visible, and lets any store before the writer's first pending fence go first.
//! Atomics in device memory and the host's own steps are sequentially consistent.
//!
//! A header word carries only a few bits of a position (16 in the code): a header the
//! host finds at its position is either the record's own or one from an earlier lap,
//! and with the words cleared, from no earlier lap at all. [`HeaderCheck::LowBits`]
//! compares as few bits as the code does, in a ring as much shorter than their range as
//! the code's is.
//!
//! Invariants: the host takes only whole messages of the record it expects; each
//! writer's messages arrive in its order; every message arrives or, with dropping, is
//! counted, once; and no writer waits for ever.

use std::fmt;

use crate::explore::{Next, Space, explore};
use crate::{Report, Violation};

/// What a writer does when the ring has no room for its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait until the host has taken enough (nothing is lost).
    Wait,
    /// Drop the message and count it (the count is reported at the end of the run).
    Drop,
}

/// How the host recognises a complete record in the header word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderCheck {
    /// The header names the record's position in the stream: a header left from an
    /// earlier lap of the ring names an earlier position.
    Position,
    /// The header names the low bits of the position, as the code's 16 bits do.
    LowBits(u8),
    /// The header names only its offset in the ring, as a header without a lap count
    /// would: a header from an earlier lap looks complete.
    Offset,
}

impl HeaderCheck {
    /// What a header of the record at `at` names, in a ring of `capacity` words.
    fn of(self, at: u8, capacity: u8) -> u8 {
        match self {
            HeaderCheck::Position => at,
            HeaderCheck::LowBits(bits) => at % (1 << bits),
            HeaderCheck::Offset => at % capacity,
        }
    }
}

/// Writers, each a list of messages, and one ring.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// Per writer, the words of each of its messages, in order.
    pub writers: Vec<Vec<u8>>,
    /// Words in the ring.
    pub capacity: u8,
    /// A system fence between a record's message words and its header.
    pub fenced: bool,
    /// What a writer does when the ring is full.
    pub full: WhenFull,
    /// How the host recognises a complete record.
    pub check: HeaderCheck,
    /// The host clears the words of each record it took before publishing `tail`.
    pub clears: bool,
    /// A message word may hold any value, a header's that the host expects included.
    pub any_words: bool,
    /// With dropping, the room check and the reservation are two steps.
    pub two_step_drop: bool,
}

impl StreamConfig {
    /// Three writers of two messages each, of one and two words, in a ring of five
    /// words: records wrap around its end, writers wait for room, and a record is often
    /// reserved while an earlier one is still being written. As the code is: the host
    /// clears what it took, compares 3 bits of the position (the ring's 5 words are
    /// under 8, as the code's rings are under 2^16), and message words may be anything.
    pub fn standard(full: WhenFull) -> StreamConfig {
        StreamConfig {
            writers: vec![vec![1, 2], vec![2, 1], vec![1, 1]],
            capacity: 5,
            fenced: true,
            full,
            check: HeaderCheck::LowBits(3),
            clears: true,
            any_words: true,
            two_step_drop: false,
        }
    }
}

/// Explores every interleaving of `config`.
pub fn check_streams(config: &StreamConfig) -> Report {
    for w in &config.writers {
        for &words in w {
            assert!(
                words < config.capacity,
                "a record longer than the ring waits for ever"
            );
        }
    }
    explore(&Streams { c: config.clone() })
}

/// A word of the ring as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Word {
    /// Never written.
    Empty,
    /// A record's header: its writer, the writer's message number, its position.
    Header { writer: u8, message: u8, at: u8 },
    /// Word `index` of a writer's message.
    Body { writer: u8, message: u8, index: u8 },
}

/// A store not yet visible to the host, or a fence between two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pending {
    Store { offset: u8, word: Word },
    Fence,
}

/// Where a writer is in submitting its current message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    /// About to submit message `message` (or done, past its last).
    Start,
    /// Found room (dropping, in two steps), about to reserve.
    Checked,
    /// Reserved at `at`; waiting for room.
    Wait,
    /// Storing word `i` of the message.
    Body(u8),
    /// Issuing the fence.
    Fence,
    /// Storing the header.
    Header,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Writer {
    message: u8,
    pc: Pc,
    at: u8,
    pending: Vec<Pending>,
    /// Its messages dropped, one bit each.
    dropped: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    writers: Vec<Writer>,
    ring: Vec<Word>,
    /// The position counter in device memory.
    reserved: u8,
    /// The host's position, and the one it has published to the GPU.
    taken: u8,
    tail: u8,
    /// Per writer, the messages the host has taken, and the number after the last.
    arrived: Vec<u8>,
    after_last: Vec<u8>,
}

/// A step, for traces.
#[derive(Clone, Copy, Debug)]
enum Action {
    Reserve { writer: u8, at: u8 },
    Check { writer: u8 },
    Drop { writer: u8 },
    Room { writer: u8 },
    Store { writer: u8, offset: u8, word: Word },
    Issue { writer: u8, what: Pending },
    Retire { writer: u8 },
    Take { writer: u8, message: u8, at: u8 },
    Misread { at: u8 },
    Publish { tail: u8 },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Reserve { writer, at } => write!(f, "writer {writer} reserves at {at}"),
            Action::Check { writer } => write!(f, "writer {writer} finds room"),
            Action::Drop { writer } => write!(f, "writer {writer} finds no room and drops"),
            Action::Room { writer } => write!(f, "writer {writer} sees room"),
            Action::Issue { writer, what } => write!(f, "writer {writer} issues {what:?}"),
            Action::Store {
                writer,
                offset,
                word,
            } => write!(
                f,
                "writer {writer}'s store of {word:?} at offset {offset} becomes visible"
            ),
            Action::Retire { writer } => write!(f, "writer {writer}'s fence completes"),
            Action::Take {
                writer,
                message,
                at,
            } => write!(f, "host takes writer {writer}'s message {message} at {at}"),
            Action::Misread { at } => write!(
                f,
                "host reads a message word at {at} that looks like the header it expects"
            ),
            Action::Publish { tail } => write!(f, "host publishes tail {tail}"),
        }
    }
}

struct Streams {
    c: StreamConfig,
}

impl Streams {
    /// Words of writer `w`'s message `m`, with its header.
    fn record(&self, w: usize, m: u8) -> u8 {
        1 + self.c.writers[w][m as usize]
    }

    fn total(&self, w: usize) -> u8 {
        self.c.writers[w].len() as u8
    }

    /// The writer's steps from `s`.
    fn writer_steps(&self, s: &State, w: usize, out: &mut Vec<(Action, Next<State>)>) {
        let wr = &s.writers[w];
        let writer = w as u8;
        let cap = self.c.capacity;
        match wr.pc {
            Pc::Start if wr.message == self.total(w) => {}
            Pc::Start | Pc::Checked => {
                let len = self.record(w, wr.message);
                let mut n = s.clone();
                let drops = self.c.full == WhenFull::Drop;
                if drops && wr.pc == Pc::Start && s.reserved + len - s.tail > cap {
                    let nw = &mut n.writers[w];
                    nw.dropped |= 1 << nw.message;
                    nw.message += 1;
                    out.push((Action::Drop { writer }, Next::State(n)));
                    return;
                }
                if drops && self.c.two_step_drop && wr.pc == Pc::Start {
                    n.writers[w].pc = Pc::Checked;
                    out.push((Action::Check { writer }, Next::State(n)));
                    return;
                }
                n.writers[w].at = s.reserved;
                n.writers[w].pc = Pc::Wait;
                n.reserved += len;
                let next = if drops && s.reserved + len - s.tail > cap {
                    Next::Flagged(n, Violation::DropWaits { writer })
                } else {
                    Next::State(n)
                };
                out.push((
                    Action::Reserve {
                        writer,
                        at: s.reserved,
                    },
                    next,
                ));
            }
            Pc::Wait => {
                if wr.at + self.record(w, wr.message) - s.tail <= cap {
                    let mut n = s.clone();
                    n.writers[w].pc = self.after_body(w, wr.message, 0);
                    out.push((Action::Room { writer }, Next::State(n)));
                }
            }
            Pc::Body(i) => {
                let word = Word::Body {
                    writer,
                    message: wr.message,
                    index: i,
                };
                let offset = (wr.at + 1 + i) % cap;
                let mut n = s.clone();
                let what = Pending::Store { offset, word };
                n.writers[w].pending.push(what);
                n.writers[w].pc = self.after_body(w, wr.message, i + 1);
                out.push((Action::Issue { writer, what }, Next::State(n)));
            }
            Pc::Fence => {
                let mut n = s.clone();
                n.writers[w].pending.push(Pending::Fence);
                n.writers[w].pc = Pc::Header;
                let what = Pending::Fence;
                out.push((Action::Issue { writer, what }, Next::State(n)));
            }
            Pc::Header => {
                let at = self.c.check.of(wr.at, cap);
                let word = Word::Header {
                    writer,
                    message: wr.message,
                    at,
                };
                let what = Pending::Store {
                    offset: wr.at % cap,
                    word,
                };
                let mut n = s.clone();
                n.writers[w].pending.push(what);
                n.writers[w].message += 1;
                n.writers[w].pc = Pc::Start;
                out.push((Action::Issue { writer, what }, Next::State(n)));
            }
        }
        // Any store before the first pending fence may reach host memory next; a fence
        // at the front completes.
        for (i, p) in wr.pending.iter().enumerate() {
            let mut n = s.clone();
            match *p {
                Pending::Fence if i == 0 => {
                    n.writers[w].pending.remove(0);
                    out.push((Action::Retire { writer }, Next::State(n)));
                }
                Pending::Fence => break,
                Pending::Store { offset, word } => {
                    n.writers[w].pending.remove(i);
                    n.ring[offset as usize] = word;
                    out.push((
                        Action::Store {
                            writer,
                            offset,
                            word,
                        },
                        Next::State(n),
                    ));
                }
            }
        }
    }

    /// Where a writer goes after storing `stored` words of message `m`.
    fn after_body(&self, w: usize, m: u8, stored: u8) -> Pc {
        if stored < self.c.writers[w][m as usize] {
            Pc::Body(stored)
        } else if self.c.fenced {
            Pc::Fence
        } else {
            Pc::Header
        }
    }

    /// The message of writer `w` that must arrive next: the first after the last to
    /// arrive that was not dropped (a writer drops a message before it reserves any
    /// later one).
    fn next_due(&self, s: &State, w: usize) -> u8 {
        let dropped = s.writers[w].dropped;
        (s.after_last[w]..self.total(w))
            .find(|m| dropped & (1 << m) == 0)
            .unwrap_or(self.total(w))
    }

    /// The host's steps from `s`: take the record at its position, if its header says
    /// it is complete, or publish how far it has taken.
    fn host_steps(&self, s: &State, out: &mut Vec<(Action, Next<State>)>) {
        let cap = self.c.capacity;
        let expected = self.c.check.of(s.taken, cap);
        if self.c.any_words
            && s.taken < s.reserved
            && let Word::Body { .. } = s.ring[(s.taken % cap) as usize]
        {
            // A message word where the host expects a header may look like one.
            out.push((
                Action::Misread { at: s.taken },
                Next::Broken(Violation::Misframed { at: s.taken }),
            ));
        }
        if s.taken < s.reserved
            && let Word::Header {
                writer,
                message,
                at,
            } = s.ring[(s.taken % cap) as usize]
            && at == expected
        {
            let w = writer as usize;
            let action = Action::Take {
                writer,
                message,
                at: s.taken,
            };
            let whole = (0..self.c.writers[w][message as usize]).all(|index| {
                s.ring[((s.taken + 1 + index) % cap) as usize]
                    == Word::Body {
                        writer,
                        message,
                        index,
                    }
            });
            let next = if !whole {
                Next::Broken(Violation::TornMessage { writer, message })
            } else if message != self.next_due(s, w) {
                Next::Broken(Violation::OutOfOrder {
                    writer,
                    piece: message,
                })
            } else {
                let mut n = s.clone();
                n.arrived[w] += 1;
                n.after_last[w] = message + 1;
                let len = self.record(w, message);
                if self.c.clears {
                    for i in 0..len {
                        n.ring[((s.taken + i) % cap) as usize] = Word::Empty;
                    }
                }
                n.taken += len;
                Next::State(n)
            };
            out.push((action, next));
        }
        if s.tail < s.taken {
            let mut n = s.clone();
            n.tail = s.taken;
            out.push((Action::Publish { tail: s.taken }, Next::State(n)));
        }
    }
}

impl Space for Streams {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let writers = self.c.writers.len();
        State {
            writers: vec![
                Writer {
                    message: 0,
                    pc: Pc::Start,
                    at: 0,
                    pending: Vec::new(),
                    dropped: 0,
                };
                writers
            ],
            ring: vec![Word::Empty; self.c.capacity as usize],
            reserved: 0,
            taken: 0,
            tail: 0,
            arrived: vec![0; writers],
            after_last: vec![0; writers],
        }
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next<State>)> {
        let mut out = Vec::new();
        for w in 0..s.writers.len() {
            self.writer_steps(s, w, &mut out);
        }
        self.host_steps(s, &mut out);
        out
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        let writers_done = s
            .writers
            .iter()
            .enumerate()
            .all(|(w, wr)| wr.message == self.total(w) && wr.pc == Pc::Start);
        if !writers_done {
            return Ok(false);
        }
        for (w, wr) in s.writers.iter().enumerate() {
            if s.arrived[w] + wr.dropped.count_ones() as u8 != self.total(w) {
                return Err(Violation::MessageLost {
                    writer: w as u8,
                    message: self.next_due(s, w),
                });
            }
        }
        Ok(true)
    }
}
