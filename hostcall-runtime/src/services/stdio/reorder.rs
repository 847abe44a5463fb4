//! Putting one fd's ticketed output back in order. Posted writes (every `print!` of a
//! GPU thread) arrive in whatever order the ports are served and carry tickets; they
//! are put back in ticket order in a ring indexed by ticket, whose buffers are reused,
//! so the common case allocates nothing. In-order bytes collect in `out` until the
//! fd's writer takes them (`super::Stdio`).
//!
//! Stderr is also put together line by line per GPU thread ([`Lines`]): std's runtime
//! writes its messages (`memory allocation of 1152 bytes failed`, panics inside panics,
//! aborts) to the raw stderr in pieces, a `write` each, and thousands of threads failing
//! at once interleaved inside the line. Stdout needs no such help: std's `LineWriter`
//! writes it a line at a time.
//!
//! What an fd holds, out-of-order pieces and in-order bytes its writer has not taken,
//! is bounded ([`HELD_BYTES_MAX`]): past it the host takes no more posted pieces but the
//! one whose turn it is (the rest wait on their ports), and answers `EAGAIN` to pieces
//! whose writers wait.

use std::collections::{BTreeMap, HashMap};

use hostcall_abi::PORT_BULK;

/// Tickets ahead of the next expected one that the ring holds without allocating.
pub(super) const RING: u64 = 4096;
/// Tickets ahead of the next expected one a posted write may carry; one further ahead is
/// malformed. Far beyond any real program: a reservation takes at most
/// `hostcall_client::fd_io::ORDERED_BATCH` tickets, so even millions of GPU threads
/// each in the middle of a write stay inside it. Memory is bounded by
/// [`HELD_BYTES_MAX`], not by this.
pub(crate) const TICKET_WINDOW: u64 = 1 << 32;
/// Bytes an fd holds: out-of-order posted pieces, each charged [`PIECE_OVERHEAD`] more
/// for its bookkeeping, and in-order bytes its writer has not taken. Past it the host
/// leaves a posted piece on its port unless its turn has come ([`Reorder::admits`]);
/// a piece whose writer waits ([`hostcall_abi::POSTED_WAITS`]) is answered `EAGAIN`
/// from half of it, which leaves the other half to the posted lines of every other
/// thread. A piece of a kernel that ignores the protocol is refused past twice it, so
/// no ticket stream grows host memory past that.
pub(crate) const HELD_BYTES_MAX: usize = 64 << 20;
/// What holding one piece costs beyond its bytes (its map node or ring slot).
pub(super) const PIECE_OVERHEAD: usize = 64;
/// In-order bytes buffered before they are handed to the fd's writer.
pub(crate) const FLUSH_BYTES: usize = 64 << 10;
/// Capacity a ring slot keeps once its piece is written: enough for a line, so the
/// common case allocates nothing; a larger buffer is freed.
const SLOT_KEEP: usize = 256;
/// Bytes a [`Reorder`] keeps allocated beyond the pieces it holds: every ring slot at
/// [`SLOT_KEEP`], and the in-order buffer at twice [`FLUSH_BYTES`].
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) const RETAINED_MAX: usize = RING as usize * SLOT_KEEP + 2 * FLUSH_BYTES;

/// Bytes of one GPU thread's unended stderr line held back; a longer one is written as it
/// stands.
pub(crate) const LINE_MAX: usize = 4096;
/// Bytes of unended stderr lines held back over all threads; past it a thread's piece is
/// written as it stands (so a flood of unended lines costs bounded memory).
pub(crate) const LINES_MAX: usize = 4 << 20;

/// The GPU thread a posted write came from: its linear block and its thread in the block.
pub(crate) type Writer = (u32, u32);

/// Why a posted write was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PostedError {
    /// Its ticket was already written, or is the one reserved value.
    #[error("ticket {0} was already written")]
    Passed(u64),
    /// Its ticket is beyond the window.
    #[error("ticket {ticket} is beyond the window of {TICKET_WINDOW} after {next}")]
    Beyond { ticket: u64, next: u64 },
    /// Another write with this ticket is waiting.
    #[error("ticket {0} arrived twice")]
    Duplicate(u64),
    /// Its turn has not come: earlier tickets are still missing.
    #[error("ticket {ticket} waits for ticket {next}")]
    NotYet { ticket: u64, next: u64 },
    /// Holding it would pass the per-fd limit on out-of-order bytes.
    #[error(
        "{held} bytes already wait for ticket {next}: holding {more} more would pass {HELD_BYTES_MAX}"
    )]
    Full { held: usize, more: usize, next: u64 },
}

/// Posted writes of one fd waiting for the tickets before theirs, and in-order bytes not
/// yet written.
pub(crate) struct Reorder {
    pub(super) next: u64,
    /// Piece of ticket `t` (when `next < t < next + RING`) at `t % RING`, with a flag
    /// saying it arrived, and its writer.
    ring: Vec<(bool, Writer, Vec<u8>)>,
    /// Pieces further ahead, inside the window.
    far: BTreeMap<u64, (Writer, Vec<u8>)>,
    /// Bytes in `ring`, `far` and `lines`, each piece or line charged
    /// [`PIECE_OVERHEAD`] more.
    held: usize,
    /// In-order bytes to write.
    pub(super) out: Vec<u8>,
    /// Unended lines per writer, for an fd put together line by line.
    lines: Option<Lines>,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder {
            next: 0,
            ring: (0..RING).map(|_| (false, (0, 0), Vec::new())).collect(),
            far: BTreeMap::new(),
            held: 0,
            out: Vec::with_capacity(FLUSH_BYTES),
            lines: None,
        }
    }
}

/// Each GPU thread's stderr line so far, until its newline comes: in-order pieces of one
/// thread join its line, and only whole lines go out, so that the lines of threads
/// writing at once do not interleave. A line goes out unended when it passes
/// [`LINE_MAX`] or when holding it would pass [`LINES_MAX`] or the fd's
/// [`HELD_BYTES_MAX`] (then it may share its line with another thread's), when its
/// writer's next write is taken in its turn ([`super::Stdio::at_turn`]), and when the launch
/// ends.
#[derive(Default)]
struct Lines {
    unended: HashMap<Writer, Vec<u8>>,
    /// Bytes in `unended`.
    bytes: usize,
}

impl Reorder {
    /// A reorder buffer that also puts each writer's lines together (for stderr).
    pub(super) fn by_lines() -> Reorder {
        Reorder {
            lines: Some(Lines::default()),
            ..Reorder::default()
        }
    }

    /// Takes `writer`'s piece, now in order: into `out`, or, line by line, into its line.
    fn put(&mut self, writer: Writer, data: &[u8]) {
        let Some(lines) = &mut self.lines else {
            self.out.extend_from_slice(data);
            return;
        };
        let Some(mut line) = lines.unended.remove(&writer) else {
            // The common case: a whole line, or more, and nothing held before it.
            match data.iter().rposition(|&b| b == b'\n') {
                Some(end) if end + 1 == data.len() => self.out.extend_from_slice(data),
                _ => {
                    let mut line = Vec::new();
                    self.join(writer, &mut line, data);
                }
            }
            return;
        };
        lines.bytes -= line.len();
        self.held -= line.len() + PIECE_OVERHEAD;
        self.join(writer, &mut line, data);
    }

    /// Adds `data` to `writer`'s `line`, writes what ends in a newline, and holds the
    /// rest if it may.
    fn join(&mut self, writer: Writer, line: &mut Vec<u8>, data: &[u8]) {
        line.extend_from_slice(data);
        if let Some(end) = line.iter().rposition(|&b| b == b'\n') {
            self.out.extend_from_slice(&line[..=end]);
            line.drain(..=end);
        }
        let lines = self.lines.as_mut().expect("an fd put together by lines");
        let cost = line.len() + PIECE_OVERHEAD;
        if line.is_empty() {
            return;
        }
        if line.len() > LINE_MAX
            || lines.bytes + line.len() > LINES_MAX
            || self.held + cost > HELD_BYTES_MAX
        {
            self.out.extend_from_slice(line);
            return;
        }
        lines.bytes += line.len();
        self.held += cost;
        lines.unended.insert(writer, std::mem::take(line));
    }

    /// Writes `writer`'s unended line, if it has one.
    pub(super) fn end_line(&mut self, writer: Writer) {
        let Some(lines) = &mut self.lines else {
            return;
        };
        if let Some(line) = lines.unended.remove(&writer) {
            lines.bytes -= line.len();
            self.held -= line.len() + PIECE_OVERHEAD;
            self.out.extend_from_slice(&line);
        }
    }

    /// Writes every unended line, in writer order (the launch ended), each after a
    /// newline but the first: two threads' bytes never share a line, and a lone thread's
    /// output keeps its bytes exactly.
    fn end_lines(&mut self) {
        let Some(lines) = &mut self.lines else {
            return;
        };
        let mut unended: Vec<_> = lines.unended.drain().collect();
        unended.sort_unstable_by_key(|(w, _)| *w);
        lines.bytes = 0;
        for (i, (_, line)) in unended.into_iter().enumerate() {
            self.held -= line.len() + PIECE_OVERHEAD;
            if i > 0 {
                self.out.push(b'\n');
            }
            self.out.extend_from_slice(&line);
        }
    }

    /// How far ticket `t` is ahead of the next one due; refused if no kernel could send
    /// it now (already written, the reserved value, or beyond the window).
    pub(super) fn ahead(&self, t: u64) -> Result<u64, PostedError> {
        let Some(ahead) = t.checked_sub(self.next).filter(|_| t != u64::MAX) else {
            return Err(PostedError::Passed(t));
        };
        if ahead >= TICKET_WINDOW {
            return Err(PostedError::Beyond {
                ticket: t,
                next: self.next,
            });
        }
        Ok(ahead)
    }

    /// Bytes the fd holds: pieces waiting for their turn, and in-order bytes its writer
    /// has not taken.
    fn holds(&self) -> usize {
        self.held + self.out.len()
    }

    /// Whether the host should take a posted piece of `len` bytes under ticket `t` now,
    /// or leave it on its port: its turn has come (while the in-order bytes are under
    /// the bound), or there is room to hold it. A ticket no kernel could send now is
    /// taken, to be refused.
    pub(super) fn admits(&self, t: u64, len: usize) -> bool {
        match self.ahead(t) {
            Ok(0) => self.out.len() < HELD_BYTES_MAX,
            Ok(_) => self.holds() + len + PIECE_OVERHEAD <= HELD_BYTES_MAX,
            Err(_) => true,
        }
    }

    /// Whether a piece of `len` bytes under ticket `t` whose writer waits would be
    /// taken now ([`Reorder::insert`]'s rule for it); a ticket no kernel could send now
    /// is taken, to be refused.
    pub(super) fn takes_waiting(&self, t: u64, len: usize) -> bool {
        match self.ahead(t) {
            Ok(0) => self.out.len() < HELD_BYTES_MAX,
            Ok(_) => self.holds() + len + PIECE_OVERHEAD <= HELD_BYTES_MAX / 2,
            Err(_) => true,
        }
    }

    /// Whether a piece of any ticket and of up to a port's bulk bytes (the most a
    /// packet's lane carries) would be admitted ([`Reorder::admits`]).
    pub(super) fn has_room_for_any(&self) -> bool {
        self.holds() + PORT_BULK + PIECE_OVERHEAD <= HELD_BYTES_MAX
    }

    /// Takes the piece of ticket `t`; its writer `waits` for the answer (it may be asked
    /// to send it again). A posted piece was admitted ([`Reorder::admits`]); one past
    /// twice the bound anyway comes from a kernel that ignores the protocol.
    pub(super) fn insert(
        &mut self,
        t: u64,
        writer: Writer,
        data: &[u8],
        waits: bool,
    ) -> Result<(), PostedError> {
        let ahead = self.ahead(t)?;
        if ahead == 0 && !(waits && self.out.len() >= HELD_BYTES_MAX) {
            self.put(writer, data);
            self.next += 1;
            self.advance();
            return Ok(());
        }
        let waiting = if ahead < RING {
            self.ring[(t % RING) as usize].0
        } else {
            self.far.contains_key(&t)
        };
        if waiting {
            return Err(PostedError::Duplicate(t));
        }
        let cost = data.len() + PIECE_OVERHEAD;
        let limit = if waits {
            HELD_BYTES_MAX / 2
        } else {
            2 * HELD_BYTES_MAX
        };
        if ahead == 0 || self.holds() + cost > limit {
            return Err(PostedError::Full {
                held: self.holds(),
                more: cost,
                next: self.next,
            });
        }
        self.held += cost;
        if ahead < RING {
            let (filled, by, buf) = &mut self.ring[(t % RING) as usize];
            *filled = true;
            *by = writer;
            buf.clear();
            buf.extend_from_slice(data);
        } else {
            self.far.insert(t, (writer, data.to_vec()));
        }
        Ok(())
    }

    /// Moves every piece now in order into `out`.
    pub(super) fn advance(&mut self) {
        loop {
            let slot = (self.next % RING) as usize;
            if self.ring[slot].0 {
                let (filled, writer, buf) = &mut self.ring[slot];
                *filled = false;
                let (writer, buf) = (*writer, std::mem::take(buf));
                self.held -= buf.len() + PIECE_OVERHEAD;
                self.put(writer, &buf);
                if buf.capacity() <= SLOT_KEEP {
                    let mut buf = buf;
                    buf.clear();
                    self.ring[slot].2 = buf;
                }
            } else if let Some((writer, d)) = self.far.remove(&self.next) {
                self.held -= d.len() + PIECE_OVERHEAD;
                self.put(writer, &d);
            } else {
                return;
            }
            self.next += 1;
        }
    }

    /// Moves every piece still waiting into `out` in ticket order, then every unended
    /// line (the launch ended); returns how many tickets never arrived.
    pub(super) fn close(&mut self) -> u64 {
        let mut missing = 0;
        loop {
            self.advance();
            let ring_next = (1..RING)
                .map(|d| self.next + d)
                .find(|t| self.ring[(t % RING) as usize].0);
            let far_next = self.far.keys().next().copied();
            let Some(t) = ring_next.into_iter().chain(far_next).min() else {
                self.end_lines();
                return missing;
            };
            missing += t - self.next;
            self.next = t;
        }
    }

    /// Bytes of unended stderr lines held.
    #[cfg(test)]
    pub(super) fn unended(&self) -> usize {
        self.lines.as_ref().map_or(0, |l| l.bytes)
    }

    /// Bytes waiting for earlier tickets.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes allocated beyond the pieces held: at most [`RETAINED_MAX`].
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn retained(&self) -> usize {
        let ring: usize = self
            .ring
            .iter()
            .map(|(filled, _, b)| {
                if *filled {
                    b.capacity() - b.len()
                } else {
                    b.capacity()
                }
            })
            .sum();
        ring + self.out.capacity()
    }
}
