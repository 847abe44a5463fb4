//! The host's reordering of stdout and stderr: writers reserve consecutive tickets for
//! the pieces of a write when its first piece is published, the ports are served in any
//! order, and the host writes pieces in ticket order, holding early ones within a
//! budget. Every interleaving of writers and serving order is explored.
//!
//! [`TicketHost::Dropping`] is the host and client before posted writes waited for room: every write posted
//! whole, pieces beyond a ticket window or past the budget refused, and a posted piece
//! refused is output lost. [`TicketHost::Waiting`] is today's host and client:
//! long writes go in parts whose pieces wait for the host, which answers `EAGAIN` to one
//! it cannot hold yet (past half the budget) and always takes the piece whose turn it
//! is; but a posted piece past the budget is still refused. [`TicketHost::Holding`] is
//! the host and client now: only one-piece writes are posted, and a posted piece the
//! host cannot hold stays on its port until it can; ports are modelled, and a piece
//! whose ticket an earlier request took goes on a continuation port, which the host
//! never holds back.
//!
//! Invariants: no piece is dropped; each writer's pieces come out in its order; a part
//! comes out whole; and the output can always go on (the piece whose turn it is is in
//! flight, or its writer is free to send it), so no retry loop can spin for ever.

use std::fmt;

use crate::explore::{Next, Space, explore};
use crate::{Report, Violation};

/// How the host holds pieces that arrive before their turn, and how writers send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TicketHost {
    /// Every write is posted whole; a piece `window` or more tickets ahead of the next
    /// one, or one that would make more than `budget` pieces held, is refused.
    Dropping {
        /// Tickets ahead of the next one a piece may be.
        window: u8,
        /// Pieces the host holds at most.
        budget: u8,
    },
    /// Writes of up to `posted_max` pieces are posted whole; longer ones go in parts of
    /// up to `batch` pieces, each part reserving its tickets, each piece waiting for its
    /// answer: `EAGAIN` (send it again) when more than `budget / 2` pieces are held.
    /// Writes of more than `dma_over` pieces (from global memory) go as parts of one
    /// ticket each, taken only in their turn (`EAGAIN` before), never held. Posted
    /// pieces are refused only past `budget`.
    Waiting {
        /// Pieces of the longest write that is posted.
        posted_max: u8,
        /// Pieces of a part of a longer write.
        batch: u8,
        /// Pieces of the longest write that is not copied by DMA in its turn.
        dma_over: u8,
        /// Pieces the host holds at most.
        budget: u8,
    },
    /// One-piece writes posted; longer ones in waiting parts of `batch` pieces
    /// (`EAGAIN` past half the budget, the piece in its turn always taken); past
    /// `dma_over` pieces, parts of one ticket taken only in their turn. A posted piece
    /// that is not in its turn while `budget` pieces are held stays on its port. A
    /// request needs a free port: of `ports`, or, for a piece whose ticket an earlier
    /// request took, of `continuation` (with none, of `ports` too).
    Holding {
        /// Pieces of a part of a longer write.
        batch: u8,
        /// Pieces of the longest write that is not copied by DMA in its turn.
        dma_over: u8,
        /// Pieces the host holds at most.
        budget: u8,
        /// Ports for requests that take their tickets.
        ports: u8,
        /// Ports for requests whose tickets were taken before.
        continuation: u8,
    },
}

/// Writers, each a list of writes (pieces per write), and the host.
#[derive(Clone, Debug)]
pub struct TicketConfig {
    /// Per writer, the number of pieces of each of its writes, in order.
    pub writers: Vec<Vec<u8>>,
    /// The host and client rules.
    pub host: TicketHost,
}

impl TicketConfig {
    /// Two long writes racing two short ones: in the dropping host a long reservation
    /// pushes the short ones beyond the window, and the budget fills while they wait.
    /// Today the longest goes by DMA in its turn and the other in waiting parts.
    pub fn standard(host: TicketHost) -> TicketConfig {
        TicketConfig {
            writers: vec![vec![5], vec![1, 1], vec![3]],
            host,
        }
    }

    /// The host and client of the waiting host's first build, scaled down: posted up to
    /// 2 pieces, parts of 2, DMA
    /// past 4, a budget of 4.
    pub fn today() -> TicketHost {
        TicketHost::Waiting {
            posted_max: 2,
            batch: 2,
            dma_over: 4,
            budget: 4,
        }
    }
}

impl TicketConfig {
    /// Today's host and client, scaled down: one-piece writes posted, parts of 2, DMA
    /// past 4, a budget of one held piece, two ports, and `continuation` ports for the
    /// requests whose tickets were taken before.
    pub fn holding(continuation: u8) -> TicketHost {
        TicketHost::Holding {
            batch: 2,
            dma_over: 4,
            budget: 1,
            ports: 2,
            continuation,
        }
    }
}

/// Explores every interleaving of `config`.
pub fn check_tickets(config: &TicketConfig) -> Report {
    explore(&Tickets::new(config))
}

/// A piece: its writer and its index among the writer's pieces (all writes together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Piece {
    writer: u8,
    index: u8,
}

/// A published piece, not yet served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Flying {
    ticket: u8,
    piece: Piece,
    waits: bool,
    /// On a continuation port (its ticket was taken by an earlier request).
    continues: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Writer {
    /// Pieces published so far (accepted ones, for a waiting writer).
    sent: u8,
    /// The first ticket of the reservation in progress and the piece it starts at.
    reserved: Option<(u8, u8)>,
    /// Waiting for the answer to its piece in flight.
    blocked: bool,
    /// The piece the host answered `EAGAIN`, to send again.
    resend: Option<Flying>,
    /// Pieces of this writer written out.
    out: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    writers: Vec<Writer>,
    counter: u8,
    next: u8,
    flying: Vec<Flying>,
    held: Vec<(u8, Piece)>,
    /// The part being written out: its writer and the pieces still to come.
    open_part: Option<(u8, u8)>,
    /// Ports taken, of the two kinds ([`TicketHost::Holding`]).
    busy: [u8; 2],
}

/// A step, for traces.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Action {
    Publish(Flying),
    Serve(Flying),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, p) = match self {
            Action::Publish(p) => ("publishes", p),
            Action::Serve(p) => ("host serves", p),
        };
        write!(
            f,
            "{what} writer {} piece {} (ticket {}{}{})",
            p.piece.writer,
            p.piece.index,
            p.ticket,
            if p.waits { ", waits" } else { ", posted" },
            if p.continues {
                ", continuation port"
            } else {
                ""
            }
        )
    }
}

struct Tickets {
    host: TicketHost,
    /// Per writer, per piece: the first piece of its part, the part's length, whether
    /// its pieces wait, and whether it is taken only in its turn.
    parts: Vec<Vec<(u8, u8, bool, bool)>>,
}

impl Tickets {
    fn new(config: &TicketConfig) -> Tickets {
        let parts = config
            .writers
            .iter()
            .map(|writes| {
                let mut pieces = Vec::new();
                for &n in writes {
                    let (size, waits, turn) = match config.host {
                        TicketHost::Dropping { .. } => (n, false, false),
                        TicketHost::Waiting { dma_over, .. } if n > dma_over => (1, true, true),
                        TicketHost::Waiting {
                            posted_max, batch, ..
                        } if n > posted_max => (batch, true, false),
                        TicketHost::Waiting { .. } => (n, false, false),
                        TicketHost::Holding { dma_over, .. } if n > dma_over => (1, true, true),
                        TicketHost::Holding { batch, .. } if n > 1 => (batch, true, false),
                        TicketHost::Holding { .. } => (1, false, false),
                    };
                    let base = pieces.len() as u8;
                    for i in 0..n {
                        let start = i - i % size;
                        pieces.push((base + start, size.min(n - start), waits, turn));
                    }
                }
                pieces
            })
            .collect();
        Tickets {
            host: config.host,
            parts,
        }
    }

    fn total(&self, w: usize) -> u8 {
        self.parts[w].len() as u8
    }

    /// The kind of port a request goes on (`[regular, continuation]`), and how many
    /// of that kind there are; none modelled (no limit) but for a holding host.
    fn port(&self, continues: bool) -> Option<(usize, u8)> {
        match self.host {
            TicketHost::Holding {
                ports,
                continuation,
                ..
            } => Some(if continues && continuation > 0 {
                (1, continuation)
            } else {
                (0, ports)
            }),
            _ => None,
        }
    }

    /// Whether the host takes `f` now: a holding host leaves a posted piece on its port
    /// while it is not in its turn and the budget is full.
    fn servable(&self, s: &State, f: &Flying) -> bool {
        match self.host {
            TicketHost::Holding { budget, .. } => {
                f.waits || f.ticket == s.next || (s.held.len() as u8) < budget
            }
            _ => true,
        }
    }

    /// Whether a request of kind `continues` can get a port now or once the host takes
    /// a piece it will take.
    fn port_for(&self, s: &State, continues: bool) -> bool {
        let Some((kind, n)) = self.port(continues) else {
            return true;
        };
        s.busy[kind] < n
            || s.flying.iter().any(|f| {
                self.port(f.continues).is_some_and(|(k, _)| k == kind) && self.servable(s, f)
            })
    }

    /// Writes pieces out from `next` while they are held, checking order and wholeness.
    fn emit(&self, s: &mut State, p: Piece) -> Option<Violation> {
        let mut p = p;
        loop {
            let w = &mut s.writers[p.writer as usize];
            if p.index != w.out {
                return Some(Violation::OutOfOrder {
                    writer: p.writer,
                    piece: p.index,
                });
            }
            w.out += 1;
            let (start, len, _, _) = self.parts[p.writer as usize][p.index as usize];
            match s.open_part {
                Some((writer, _)) if writer != p.writer => {
                    return Some(Violation::Torn { writer });
                }
                _ => {}
            }
            let left = start + len - p.index - 1;
            s.open_part = (left > 0).then_some((p.writer, left));
            s.next += 1;
            let i = s.held.iter().position(|(t, _)| *t == s.next)?;
            p = s.held.remove(i).1;
        }
    }

    /// Whether the piece whose turn it is can still arrive without any retry: it is in
    /// flight, or its writer is free to send it (or nothing is reserved past `next`).
    fn can_progress(&self, s: &State) -> bool {
        if s.next == s.counter || s.flying.iter().any(|f| f.ticket == s.next) {
            return true;
        }
        s.writers.iter().enumerate().any(|(w, wr)| {
            let Some((first, start)) = wr.reserved else {
                return false;
            };
            let (_, len, _, _) = self.parts[w][start as usize];
            let owns = (first..first + len).contains(&s.next);
            // The piece due was reserved by an earlier request: it goes on a
            // continuation port.
            owns && !wr.blocked
                && (wr.resend.is_none_or(|r| r.ticket == s.next)
                    && (wr.resend.is_some() || first + (wr.sent - start) == s.next))
                && self.port_for(s, true)
        })
    }
}

impl Space for Tickets {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        State {
            writers: self
                .parts
                .iter()
                .map(|_| Writer {
                    sent: 0,
                    reserved: None,
                    blocked: false,
                    resend: None,
                    out: 0,
                })
                .collect(),
            counter: 0,
            next: 0,
            flying: Vec::new(),
            held: Vec::new(),
            open_part: None,
            busy: [0; 2],
        }
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next<State>)> {
        let mut out = Vec::new();
        for (w, wr) in s.writers.iter().enumerate() {
            if wr.blocked || (wr.resend.is_none() && wr.sent == self.total(w)) {
                continue;
            }
            let mut n = s.clone();
            let f = match wr.resend {
                Some(f) => {
                    n.writers[w].resend = None;
                    Flying {
                        continues: true,
                        ..f
                    }
                }
                None => {
                    let index = wr.sent;
                    let (start, len, waits, _) = self.parts[w][index as usize];
                    if index == start {
                        n.writers[w].reserved = Some((n.counter, start));
                        n.counter += len;
                    }
                    let (first, _) = n.writers[w].reserved.expect("reserved at the part's start");
                    n.writers[w].sent += 1;
                    Flying {
                        ticket: first + (index - start),
                        piece: Piece {
                            writer: w as u8,
                            index,
                        },
                        waits,
                        continues: index != start,
                    }
                }
            };
            if let Some((kind, ports)) = self.port(f.continues) {
                if n.busy[kind] == ports {
                    continue;
                }
                n.busy[kind] += 1;
            }
            n.writers[w].blocked = f.waits;
            n.flying.push(f);
            n.flying.sort();
            out.push((Action::Publish(f), Next::State(n)));
        }
        for (i, &f) in s.flying.iter().enumerate() {
            if !self.servable(s, &f) {
                continue;
            }
            let mut n = s.clone();
            n.flying.remove(i);
            if let Some((kind, _)) = self.port(f.continues) {
                n.busy[kind] -= 1;
            }
            let w = f.piece.writer as usize;
            n.writers[w].blocked = false;
            let ahead = f.ticket - n.next;
            let turn_only = self.parts[w][f.piece.index as usize].3;
            let (window, limit) = match self.host {
                TicketHost::Dropping { window, budget } => (window, budget),
                TicketHost::Waiting { .. } if turn_only => (u8::MAX, 0),
                TicketHost::Waiting { budget, .. } if f.waits => (u8::MAX, budget / 2),
                TicketHost::Waiting { budget, .. } => (u8::MAX, budget),
                TicketHost::Holding { .. } if turn_only => (u8::MAX, 0),
                TicketHost::Holding { budget, .. } if f.waits => (u8::MAX, budget / 2),
                TicketHost::Holding { budget, .. } => (u8::MAX, budget),
            };
            let next = if ahead == 0 {
                match self.emit(&mut n, f.piece) {
                    Some(v) => Next::Broken(v),
                    None => Next::State(n),
                }
            } else if ahead < window && (n.held.len() as u8) < limit {
                n.held.push((f.ticket, f.piece));
                n.held.sort();
                Next::State(n)
            } else if f.waits {
                n.writers[w].resend = Some(f);
                n.writers[w].blocked = false;
                Next::State(n)
            } else {
                Next::Broken(Violation::Dropped {
                    writer: f.piece.writer,
                    piece: f.piece.index,
                })
            };
            let next = match next {
                Next::State(n) if !self.can_progress(&n) => Next::Broken(Violation::Stalled),
                other => other,
            };
            out.push((Action::Serve(f), next));
        }
        out
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        let all_out = s
            .writers
            .iter()
            .enumerate()
            .all(|(w, wr)| wr.out == self.total(w));
        Ok(all_out && s.flying.is_empty() && s.held.is_empty())
    }
}
