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
use std::sync::Mutex;

/// Tickets ahead of the next expected one that the ring holds without allocating.
const WINDOW: u64 = 4096;
/// In-order bytes buffered before they are handed to the host's stream.
const FLUSH_BYTES: usize = 64 << 10;

/// Posted writes of one fd waiting for the tickets before theirs, and in-order bytes not
/// yet written.
pub(crate) struct Reorder {
    next: u64,
    /// Piece of ticket `t` (when `next < t < next + WINDOW`) at `t % WINDOW`, with a
    /// flag saying it arrived.
    ring: Vec<(bool, Vec<u8>)>,
    /// Pieces beyond the window (rare: a very late ticket).
    far: BTreeMap<u64, Vec<u8>>,
    /// In-order bytes to write.
    out: Vec<u8>,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder {
            next: 0,
            ring: (0..WINDOW).map(|_| (false, Vec::new())).collect(),
            far: BTreeMap::new(),
            out: Vec::with_capacity(FLUSH_BYTES),
        }
    }
}

impl Reorder {
    /// Takes the piece of ticket `t`; returns false for a ticket already passed.
    fn insert(&mut self, t: u64, data: &[u8]) -> bool {
        if t < self.next {
            return false;
        }
        if t == self.next {
            self.out.extend_from_slice(data);
            self.next += 1;
            self.advance();
        } else if t - self.next < WINDOW {
            let (filled, buf) = &mut self.ring[(t % WINDOW) as usize];
            *filled = true;
            buf.clear();
            buf.extend_from_slice(data);
        } else {
            self.far.insert(t, data.to_vec());
        }
        true
    }

    /// Moves every piece now in order into `out`.
    fn advance(&mut self) {
        loop {
            let (filled, buf) = &mut self.ring[(self.next % WINDOW) as usize];
            if *filled {
                *filled = false;
                self.out.extend_from_slice(buf);
            } else if let Some(d) = self.far.remove(&self.next) {
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
            let ring_next = (1..WINDOW)
                .map(|d| self.next + d)
                .find(|t| self.ring[(t % WINDOW) as usize].0);
            let far_next = self.far.keys().next().copied();
            let Some(t) = ring_next.into_iter().chain(far_next).min() else {
                return missing;
            };
            missing += t - self.next;
            self.next = t;
        }
    }
}

/// Host stdio as the GPU sees it.
pub(crate) struct Stdio {
    /// Pass writes through to the host's stdout/stderr.
    pub echo: bool,
    /// Let fd 0 read the host's stdin.
    pub stdin: bool,
    /// Copies of what fds 1 and 2 received, when capturing.
    pub captured: Option<[Mutex<Vec<u8>>; 2]>,
    /// Posted writes to fds 1 and 2, put back in ticket order.
    pub posted: [Mutex<Reorder>; 2],
}

impl Stdio {
    /// Hands `data` to fd 1 or 2's destinations (capture, host stream).
    fn emit(&self, fd: i32, data: &[u8]) -> std::io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if let Some(cap) = &self.captured {
            cap[(fd - 1) as usize]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(data);
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

    /// Writes the in-order posted bytes of `fd` still buffered.
    fn flush_fd(&self, fd: i32, r: &mut Reorder) -> std::io::Result<()> {
        let out = std::mem::take(&mut r.out);
        let done = self.emit(fd, &out);
        r.out = out;
        r.out.clear();
        done
    }

    /// Writes to fd 1 or 2, after the posted bytes already in order.
    pub fn write(&self, fd: i32, data: &[u8]) -> std::io::Result<usize> {
        let mut r = self.reorder(fd);
        self.flush_fd(fd, &mut r)?;
        self.emit(fd, data)?;
        Ok(data.len())
    }

    /// A posted write to fd 1 or 2 with its ticket: in order now, or kept until its turn.
    pub fn write_posted(&self, fd: i32, ticket: u64, data: &[u8]) -> std::io::Result<()> {
        let mut r = self.reorder(fd);
        if !r.insert(ticket, data) {
            log::warn!("posted write to fd {fd} with ticket {ticket}, already passed: dropped");
        }
        if r.out.len() >= FLUSH_BYTES {
            self.flush_fd(fd, &mut r)?;
        }
        Ok(())
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
            Some([out, err]) => (
                std::mem::take(&mut *out.lock().unwrap_or_else(|p| p.into_inner())),
                std::mem::take(&mut *err.lock().unwrap_or_else(|p| p.into_inner())),
            ),
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
            captured: Some(Default::default()),
            posted: Default::default(),
        }
    }

    #[test]
    fn posted_writes_come_out_in_ticket_order_and_gaps_are_counted() {
        let s = capturing();
        for (ticket, text) in [(2, "c"), (0, "a"), (4, "e"), (1, "b")] {
            s.write_posted(1, ticket, text.as_bytes()).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(
            s.take_captured().0,
            b"abc",
            "0, 1, 2 as soon as each gap closes"
        );
        assert_eq!(s.flush_posted().unwrap(), 1, "ticket 3 never came");
        assert_eq!(s.take_captured().0, b"e");
        s.write_posted(2, 0, b"err").unwrap();
        s.flush().unwrap();
        assert_eq!(s.take_captured().1, b"err", "each fd has its own tickets");
    }

    #[test]
    fn tickets_beyond_the_ring_and_passed_tickets_are_handled() {
        let s = capturing();
        s.write_posted(1, WINDOW + 5, b"far").unwrap();
        for t in (0..WINDOW + 5).rev() {
            s.write_posted(1, t, b".").unwrap();
        }
        s.write_posted(1, 3, b"again").unwrap();
        assert_eq!(s.flush_posted().unwrap(), 0);
        let out = s.take_captured().0;
        assert_eq!(out.len(), (WINDOW + 5) as usize + 3);
        assert!(out.ends_with(b".far"), "the far piece in its place");
    }

    #[test]
    fn a_direct_write_comes_after_the_posted_bytes_already_in_order() {
        let s = capturing();
        s.write_posted(1, 0, b"posted ").unwrap();
        s.write(1, b"direct").unwrap();
        assert_eq!(s.take_captured().0, b"posted direct");
    }
}
