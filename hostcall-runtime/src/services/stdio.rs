//! The GPU's fds 0, 1 and 2: the host process's own stdio, optionally also captured
//! (the demo and tests inspect what the kernel printed).
//!
//! Posted writes (every `print!` of a GPU thread) arrive in whatever order the ports are
//! served and carry tickets; they are put back in ticket order in a ring indexed by
//! ticket, whose buffers are reused, so the common case allocates nothing. In-order bytes
//! collect in a buffer handed to the host's stream when it is large, when a consumer
//! thread goes idle ([`Stdio::flush`]), before any other write to the fd, and at the end.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use crate::guest_log::{GuestLog, Kind};

/// Tickets ahead of the next expected one that the ring holds without allocating.
const RING: u64 = 4096;
/// Tickets ahead of the next expected one a posted write may carry; one further ahead is
/// malformed. Far beyond any real program: a reservation takes at most
/// `hostcall_client::calls::ORDERED_BATCH` tickets, so even millions of GPU threads
/// each in the middle of a write stay inside it. Memory is bounded by
/// [`HELD_BYTES_MAX`], not by this.
pub(crate) const TICKET_WINDOW: u64 = 1 << 32;
/// Bytes of out-of-order posted writes held per fd, each piece charged
/// [`PIECE_OVERHEAD`] more for its bookkeeping. Past it a posted piece is refused as
/// malformed, so a forged ticket stream cannot grow host memory; a piece whose writer
/// waits ([`hostcall_abi::POSTED_WAITS`]) is answered `EAGAIN` from half of it, which
/// leaves the other half to the posted lines of every other thread.
pub(crate) const HELD_BYTES_MAX: usize = 64 << 20;
/// What holding one piece costs beyond its bytes (its map node or ring slot).
const PIECE_OVERHEAD: usize = 64;
/// In-order bytes buffered before they are handed to the host's stream.
const FLUSH_BYTES: usize = 64 << 10;
/// Capacity a ring slot keeps once its piece is written: enough for a line, so the
/// common case allocates nothing; a larger buffer is freed.
const SLOT_KEEP: usize = 256;
/// Bytes a [`Reorder`] keeps allocated beyond the pieces it holds: every ring slot at
/// [`SLOT_KEEP`], and the in-order buffer at twice [`FLUSH_BYTES`].
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) const RETAINED_MAX: usize = RING as usize * SLOT_KEEP + 2 * FLUSH_BYTES;

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
    next: u64,
    /// Piece of ticket `t` (when `next < t < next + RING`) at `t % RING`, with a flag
    /// saying it arrived.
    ring: Vec<(bool, Vec<u8>)>,
    /// Pieces further ahead, inside the window.
    far: BTreeMap<u64, Vec<u8>>,
    /// Bytes in `ring` and `far`.
    held: usize,
    /// In-order bytes to write.
    out: Vec<u8>,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder {
            next: 0,
            ring: (0..RING).map(|_| (false, Vec::new())).collect(),
            far: BTreeMap::new(),
            held: 0,
            out: Vec::with_capacity(FLUSH_BYTES),
        }
    }
}

impl Reorder {
    /// How far ticket `t` is ahead of the next one due; refused if no kernel could send
    /// it now (already written, the reserved value, or beyond the window).
    fn ahead(&self, t: u64) -> Result<u64, PostedError> {
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

    /// Takes the piece of ticket `t`; its writer `waits` for the answer (it may be asked
    /// to send it again).
    fn insert(&mut self, t: u64, data: &[u8], waits: bool) -> Result<(), PostedError> {
        let ahead = self.ahead(t)?;
        if ahead == 0 {
            self.out.extend_from_slice(data);
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
            HELD_BYTES_MAX
        };
        if self.held + cost > limit {
            return Err(PostedError::Full {
                held: self.held,
                more: cost,
                next: self.next,
            });
        }
        self.held += cost;
        if ahead < RING {
            let (filled, buf) = &mut self.ring[(t % RING) as usize];
            *filled = true;
            buf.clear();
            buf.extend_from_slice(data);
        } else {
            self.far.insert(t, data.to_vec());
        }
        Ok(())
    }

    /// Moves every piece now in order into `out`.
    fn advance(&mut self) {
        loop {
            let (filled, buf) = &mut self.ring[(self.next % RING) as usize];
            if *filled {
                *filled = false;
                self.held -= buf.len() + PIECE_OVERHEAD;
                self.out.extend_from_slice(buf);
                if buf.capacity() > SLOT_KEEP {
                    *buf = Vec::new();
                }
            } else if let Some(d) = self.far.remove(&self.next) {
                self.held -= d.len() + PIECE_OVERHEAD;
                self.out.extend_from_slice(&d);
            } else {
                return;
            }
            self.next += 1;
        }
    }

    /// Moves every piece still waiting into `out` in ticket order (the launch ended);
    /// returns how many tickets never arrived.
    fn close(&mut self) -> u64 {
        let mut missing = 0;
        loop {
            self.advance();
            let ring_next = (1..RING)
                .map(|d| self.next + d)
                .find(|t| self.ring[(t % RING) as usize].0);
            let far_next = self.far.keys().next().copied();
            let Some(t) = ring_next.into_iter().chain(far_next).min() else {
                return missing;
            };
            missing += t - self.next;
            self.next = t;
        }
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
            .map(|(filled, b)| {
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

/// Copies of what fds 1 and 2 received, up to a limit; past it the bytes are counted and
/// a note saying how many were left out ends the copy.
pub(crate) struct Capture {
    limit: usize,
    fds: [Mutex<(Vec<u8>, u64)>; 2],
}

impl Capture {
    /// A capture keeping at most `limit` bytes of each fd.
    pub fn new(limit: usize) -> Capture {
        Capture {
            limit,
            fds: Default::default(),
        }
    }

    fn add(&self, fd: i32, data: &[u8]) {
        let mut c = self.fds[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let room = self.limit.saturating_sub(c.0.len()).min(data.len());
        c.0.extend_from_slice(&data[..room]);
        c.1 += (data.len() - room) as u64;
    }

    fn take(&self, fd: i32) -> Vec<u8> {
        let mut c = self.fds[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (mut bytes, dropped) = std::mem::take(&mut *c);
        if dropped > 0 {
            bytes.extend_from_slice(
                format!(
                    "\n[hostcall: {dropped} more bytes were not captured: the capture keeps {} bytes]\n",
                    self.limit
                )
                .as_bytes(),
            );
        }
        bytes
    }

    /// Bytes kept so far on each fd.
    #[cfg(feature = "fuzzing")]
    pub fn held(&self) -> usize {
        self.fds
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).0.len())
            .sum()
    }
}

/// Host stdio as the GPU sees it.
pub(crate) struct Stdio {
    /// Pass writes through to the host's stdout/stderr.
    pub echo: bool,
    /// Let fd 0 read the host's stdin.
    pub stdin: bool,
    /// Copies of what fds 1 and 2 received, when capturing.
    pub captured: Option<Capture>,
    /// Posted writes to fds 1 and 2, put back in ticket order.
    pub posted: [Mutex<Reorder>; 2],
    /// The launch's GPU-caused log lines.
    pub log: Arc<GuestLog>,
}

impl Stdio {
    /// Hands `data` to fd 1 or 2's destinations (capture, host stream).
    fn emit(&self, fd: i32, data: &[u8]) -> std::io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if let Some(cap) = &self.captured {
            cap.add(fd, data);
        }
        if self.echo {
            if fd == 1 {
                std::io::stdout().lock().write_all(data)?;
            } else {
                std::io::stderr().lock().write_all(data)?;
            }
        }
        Ok(())
    }

    fn reorder(&self, fd: i32) -> std::sync::MutexGuard<'_, Reorder> {
        self.posted[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// [`Stdio::flush_fd`], with a failure logged: the GPU's posted writes have no one
    /// to report it to.
    fn flush_logged(&self, fd: i32, r: &mut Reorder) {
        if let Err(e) = self.flush_fd(fd, r) {
            self.log
                .warn(Kind::Io, format_args!("writing GPU output to fd {fd}: {e}"));
        }
    }

    /// Writes the in-order posted bytes of `fd` still buffered.
    fn flush_fd(&self, fd: i32, r: &mut Reorder) -> std::io::Result<()> {
        let mut out = std::mem::take(&mut r.out);
        let done = self.emit(fd, &out);
        out.clear();
        if out.capacity() > 2 * FLUSH_BYTES {
            out = Vec::with_capacity(FLUSH_BYTES);
        }
        r.out = out;
        done
    }

    /// Writes to fd 1 or 2, after the posted bytes already in order.
    pub fn write(&self, fd: i32, data: &[u8]) -> std::io::Result<usize> {
        let mut r = self.reorder(fd);
        self.flush_fd(fd, &mut r)?;
        self.emit(fd, data)?;
        Ok(data.len())
    }

    /// A posted write to fd 1 or 2 with its ticket: in order now, or kept until its turn;
    /// refused if the ticket is not one a well-behaved kernel could send now, or if there
    /// is no room to keep it (a writer that `waits` sends it again).
    pub fn write_posted(
        &self,
        fd: i32,
        ticket: u64,
        data: &[u8],
        waits: bool,
    ) -> Result<(), PostedError> {
        let mut r = self.reorder(fd);
        r.insert(ticket, data, waits)?;
        if r.out.len() >= FLUSH_BYTES {
            self.flush_logged(fd, &mut r);
        }
        Ok(())
    }

    /// Runs `write` with a sink into fd 1 or 2 once `ticket` is the next one due (the
    /// bytes before it written), then moves past the ticket: for output too large to
    /// hold, which is only taken in its turn. `NotYet` while earlier tickets are
    /// missing; refused as for [`Stdio::write_posted`] if no kernel could send it now.
    pub fn at_turn<R>(
        &self,
        fd: i32,
        ticket: u64,
        write: impl FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> R,
    ) -> Result<R, PostedError> {
        let mut r = self.reorder(fd);
        if r.ahead(ticket)? > 0 {
            return Err(PostedError::NotYet {
                ticket,
                next: r.next,
            });
        }
        self.flush_logged(fd, &mut r);
        let done = write(&mut |piece| self.emit(fd, piece));
        r.next += 1;
        r.advance();
        Ok(done)
    }

    /// Bytes of posted writes waiting for earlier tickets, over both fds.
    #[cfg(feature = "fuzzing")]
    pub fn held(&self) -> usize {
        [1, 2].map(|fd| self.reorder(fd).held()).iter().sum()
    }

    /// Bytes the reorder buffers keep allocated beyond what they hold, over both fds.
    #[cfg(feature = "fuzzing")]
    pub fn retained(&self) -> usize {
        [1, 2].map(|fd| self.reorder(fd).retained()).iter().sum()
    }

    /// Writes whatever in-order posted bytes are buffered (a consumer went idle).
    pub fn flush(&self) -> std::io::Result<()> {
        for fd in [1, 2] {
            self.flush_fd(fd, &mut self.reorder(fd))?;
        }
        Ok(())
    }

    /// Writes whatever posted data still waits (after a launch ended), in ticket order;
    /// returns how many tickets never arrived (writes cut short by a trap).
    pub fn flush_posted(&self) -> std::io::Result<u64> {
        let mut missing = 0;
        for fd in [1, 2] {
            let mut r = self.reorder(fd);
            missing += r.close();
            self.flush_fd(fd, &mut r)?;
        }
        Ok(missing)
    }

    /// Reads from fd 0, if granted.
    pub fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.stdin {
            return Err(std::io::Error::from_raw_os_error(
                hostcall_abi::errno::EBADF,
            ));
        }
        std::io::stdin().lock().read(buf)
    }

    /// Takes what was captured on fd 1 and fd 2 so far.
    pub fn take_captured(&self) -> (Vec<u8>, Vec<u8>) {
        match &self.captured {
            Some(c) => (c.take(1), c.take(2)),
            None => Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capturing() -> Stdio {
        Stdio {
            echo: false,
            stdin: false,
            captured: Some(Capture::new(1 << 20)),
            posted: Default::default(),
            log: Default::default(),
        }
    }

    #[test]
    fn posted_writes_come_out_in_ticket_order_and_gaps_are_counted() {
        let s = capturing();
        for (ticket, text) in [(2, "c"), (0, "a"), (4, "e"), (1, "b")] {
            s.write_posted(1, ticket, text.as_bytes(), false).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(
            s.take_captured().0,
            b"abc",
            "0, 1, 2 as soon as each gap closes"
        );
        assert_eq!(s.flush_posted().unwrap(), 1, "ticket 3 never came");
        assert_eq!(s.take_captured().0, b"e");
        s.write_posted(2, 0, b"err", false).unwrap();
        s.flush().unwrap();
        assert_eq!(s.take_captured().1, b"err", "each fd has its own tickets");
    }

    #[test]
    fn tickets_beyond_the_ring_are_held_and_passed_ones_refused() {
        let s = capturing();
        s.write_posted(1, RING + 5, b"far", false).unwrap();
        for t in (0..RING + 5).rev() {
            s.write_posted(1, t, b".", false).unwrap();
        }
        assert_eq!(
            s.write_posted(1, 3, b"again", false),
            Err(PostedError::Passed(3))
        );
        assert_eq!(s.flush_posted().unwrap(), 0);
        let out = s.take_captured().0;
        assert_eq!(out.len(), (RING + 5) as usize + 3);
        assert!(out.ends_with(b".far"), "the far piece in its place");
    }

    #[test]
    fn forged_tickets_are_refused_and_hold_nothing() {
        let s = capturing();
        let beyond = PostedError::Beyond {
            ticket: TICKET_WINDOW,
            next: 0,
        };
        assert_eq!(s.write_posted(1, TICKET_WINDOW, b"x", false), Err(beyond));
        assert_eq!(
            s.write_posted(1, u64::MAX, b"x", false),
            Err(PostedError::Passed(u64::MAX))
        );
        s.write_posted(1, 7, b"x", false).unwrap();
        assert_eq!(
            s.write_posted(1, 7, b"y", false),
            Err(PostedError::Duplicate(7))
        );
        assert_eq!(s.write_posted(1, RING + 7, b"x", false), Ok(()));
        assert_eq!(
            s.write_posted(1, RING + 7, b"y", false),
            Err(PostedError::Duplicate(RING + 7))
        );
        let piece = vec![b'p'; 4096];
        let mut refused = None;
        for t in (8..TICKET_WINDOW).filter(|&t| t != RING + 7) {
            if let Err(e) = s.write_posted(1, t, &piece, false) {
                refused = Some(e);
                break;
            }
        }
        assert!(
            matches!(refused, Some(PostedError::Full { .. })),
            "{refused:?}"
        );
        assert!(
            s.reorder(1).held <= HELD_BYTES_MAX,
            "held {}",
            s.reorder(1).held
        );
    }

    /// Issue 19, item 4: 128 KiB pieces arriving out of order through every ring slot
    /// left ~1.1 GiB allocated while `held` said 0. What the ring keeps after its
    /// pieces are written is now bounded, and counted.
    #[test]
    fn the_ring_keeps_little_memory_once_its_pieces_are_written() {
        let s = capturing();
        let piece = vec![b'x'; 128 << 10];
        for round in 0..2 {
            let base = round * 512;
            for t in (base..base + 512).rev() {
                s.write_posted(1, t, &piece, false).unwrap();
            }
            let _ = s.take_captured();
        }
        let r = s.reorder(1);
        assert_eq!(r.held(), 0);
        assert!(
            r.retained() <= RETAINED_MAX,
            "{} bytes retained, over {RETAINED_MAX}",
            r.retained()
        );
    }

    #[test]
    fn capture_stops_at_its_limit_and_says_so() {
        let s = Stdio {
            echo: false,
            stdin: false,
            captured: Some(Capture::new(10)),
            posted: Default::default(),
            log: Default::default(),
        };
        for _ in 0..1000 {
            s.write(1, b"0123456789abcdef").unwrap();
        }
        let out = String::from_utf8(s.take_captured().0).unwrap();
        assert!(
            out.starts_with("0123456789\n[hostcall: 15990 more bytes were not captured"),
            "{out}"
        );
    }

    #[test]
    fn output_taken_at_its_turn_is_written_between_its_neighbours() {
        let s = capturing();
        s.write_posted(1, 2, b"after", false).unwrap();
        let stream = |sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>| sink(b"big ");
        assert_eq!(
            s.at_turn(1, 1, stream).err(),
            Some(PostedError::NotYet { ticket: 1, next: 0 })
        );
        s.write_posted(1, 0, b"before ", false).unwrap();
        s.at_turn(1, 1, stream).unwrap().unwrap();
        assert_eq!(s.at_turn(1, 1, stream).err(), Some(PostedError::Passed(1)));
        s.flush().unwrap();
        assert_eq!(s.take_captured().0, b"before big after");
    }

    #[test]
    fn a_direct_write_comes_after_the_posted_bytes_already_in_order() {
        let s = capturing();
        s.write_posted(1, 0, b"posted ", false).unwrap();
        s.write(1, b"direct").unwrap();
        assert_eq!(s.take_captured().0, b"posted direct");
    }
}
