//! Tagged streams (issue 16, dh_comms's messages): the protocol by which GPU threads
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
//!    With [`WhenFull::Drop`] it checks for room before reserving instead, and counts a
//!    message that finds none as dropped.
//! 3. It stores the message's words, then (with [`StreamConfig::fenced`]) a system
//!    fence, then the header, which names the record's position.
//! 4. The host reads the header at the position it has taken up to. Only a header that
//!    names that position ([`HeaderCheck::Position`]) marks a complete record. It reads
//!    the message, advances its own position, and from time to time publishes it as
//!    `tail`.
//!
//! A GPU thread's stores to host memory may become visible in any order unless a fence
//! separates them. The model keeps each writer's stores pending until a step makes one
//! visible, and lets any store before the writer's first pending fence go first.
//! Atomics in device memory and the host's own steps are sequentially consistent.
//!
//! The model compares whole positions. A header word can carry only a few bits of one:
//! the word the host finds at its position is always from exactly one lap before, if
//! not the record's own (writers reserve contiguous records, so every lap writes every
//! word, and a writer gets room over a word only after the host took the record that
//! held it). So the low 16 bits of the position in words tell them apart in any ring
//! shorter than 2^16 words.
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
    /// The header names only its offset in the ring, as a header without a lap count
    /// would: a header from an earlier lap looks complete.
    Offset,
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
}

impl StreamConfig {
    /// Three writers of two messages each, of one and two words, in a ring of five
    /// words: records wrap around its end, writers wait for room, and a record is often
    /// reserved while an earlier one is still being written.
    pub fn standard(full: WhenFull) -> StreamConfig {
        StreamConfig {
            writers: vec![vec![1, 2], vec![2, 1], vec![1, 1]],
            capacity: 5,
            fenced: true,
            full,
            check: HeaderCheck::Position,
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
    Drop { writer: u8 },
    Room { writer: u8 },
    Store { writer: u8, offset: u8, word: Word },
    Issue { writer: u8, what: Pending },
    Retire { writer: u8 },
    Take { writer: u8, message: u8, at: u8 },
    Publish { tail: u8 },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Reserve { writer, at } => write!(f, "writer {writer} reserves at {at}"),
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
            Pc::Start => {
                let len = self.record(w, wr.message);
                let mut n = s.clone();
                if self.c.full == WhenFull::Drop && s.reserved + len - s.tail > cap {
                    let nw = &mut n.writers[w];
                    nw.dropped |= 1 << nw.message;
                    nw.message += 1;
                    out.push((Action::Drop { writer }, Next::State(n)));
                    return;
                }
                n.writers[w].at = s.reserved;
                n.writers[w].pc = Pc::Wait;
                n.reserved += len;
                out.push((
                    Action::Reserve {
                        writer,
                        at: s.reserved,
                    },
                    Next::State(n),
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
                let at = match self.c.check {
                    HeaderCheck::Position => wr.at,
                    HeaderCheck::Offset => wr.at % cap,
                };
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
        let expected = match self.c.check {
            HeaderCheck::Position => s.taken,
            HeaderCheck::Offset => s.taken % cap,
        };
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
                n.taken += self.record(w, message);
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
