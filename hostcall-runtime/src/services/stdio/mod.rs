//! The GPU's fds 1 and 2: the host process's own stdout and stderr, optionally also
//! captured (the demo and tests inspect what the kernel printed).
//!
//! Each fd's output goes through its [`reorder`] buffer, which puts posted writes back
//! in ticket order, and then to its [`echo`] thread, the process's only thread that
//! writes the host's stream for the GPU. A consumer never writes there itself, nor waits
//! for room: what the fd holds is bounded, and past the bound a posted piece stays on
//! its port ([`Stdio::admits`]), a waiting piece is answered `EAGAIN`, and a direct
//! write waits for room on a pool thread (`Files::may_block`). So a reader of the host's
//! stdout that pauses holds up the GPU's output, and nothing else; and the end of the
//! launch waits until the reader has taken it all ([`Stdio::finish`]), so a host that
//! exits then loses none of it.

mod capture;
mod echo;
mod reorder;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) use capture::Capture;
#[cfg(feature = "fuzzing")]
pub(crate) use reorder::RETAINED_MAX;
pub(crate) use reorder::{PostedError, Writer};

use crate::guest_log::{GuestLog, Kind};
use crate::services::wait;
use echo::Echo;
use reorder::{FLUSH_BYTES, Reorder};

/// One of fds 1 and 2.
struct Fd {
    n: i32,
    reorder: Mutex<Reorder>,
    /// Its writer to the host's own fd, when echoing.
    echo: Option<Echo>,
}

/// Host stdio as the GPU sees it.
pub(crate) struct Stdio {
    /// Copies of what fds 1 and 2 received, when capturing.
    pub captured: Option<Capture>,
    fds: [Fd; 2],
    /// The launch's GPU-caused log lines.
    log: Arc<GuestLog>,
    /// The launch has ended: writes that wait for room stop waiting.
    ended: AtomicBool,
}

/// How often a write waiting for room looks again, besides when the writer takes bytes.
const ROOM_POLL: Duration = Duration::from_millis(1);

impl Stdio {
    /// Fds 1 and 2, written to the host's own when `echo`, copied into `captured`.
    pub fn new(echo: bool, captured: Option<Capture>, log: Arc<GuestLog>) -> Stdio {
        let fd = |n: i32, reorder: Reorder| Fd {
            n,
            reorder: Mutex::new(reorder),
            echo: echo.then(|| Echo::new(n)),
        };
        Stdio {
            captured,
            fds: [fd(1, Reorder::default()), fd(2, Reorder::by_lines())],
            log,
            ended: AtomicBool::new(false),
        }
    }

    fn fd(&self, fd: i32) -> &Fd {
        &self.fds[usize::from(fd == 2)]
    }

    fn reorder<'a>(&self, fd: &'a Fd) -> MutexGuard<'a, Reorder> {
        fd.reorder.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `data` to `fd`'s destinations (capture, writer); never waits.
    fn emit(&self, fd: &Fd, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        if let Some(cap) = &self.captured {
            cap.add(fd.n, &data);
        }
        if let Some(e) = &fd.echo {
            e.push(data);
        }
    }

    /// Whether `fd`'s writer takes more now.
    fn room(&self, fd: &Fd) -> bool {
        fd.echo.as_ref().is_none_or(Echo::has_room)
    }

    /// Hands `fd`'s in-order bytes to its writer, if it has room (or `force`).
    fn flush_fd(&self, fd: &Fd, r: &mut Reorder, force: bool) {
        if r.out.is_empty() || !(force || self.room(fd)) {
            return;
        }
        let keep = if r.out.capacity() > 2 * FLUSH_BYTES {
            FLUSH_BYTES
        } else {
            r.out.capacity()
        };
        let out = std::mem::replace(&mut r.out, Vec::with_capacity(keep));
        self.emit(fd, out);
    }

    /// Waits for room in `fd`'s writer where this thread may block (a pool worker);
    /// elsewhere (a consumer) goes on, the bound then passed by one write.
    fn wait_room(&self, fd: &Fd) {
        if let Some(e) = &fd.echo
            && wait::may_block_here()
        {
            e.wait_room();
        }
    }

    /// Whether fd 1 or 2 takes a direct write now without waiting.
    pub fn has_room(&self, fd: i32) -> bool {
        self.room(self.fd(fd))
    }

    /// Writes to fd 1 or 2, after the posted bytes already in order.
    pub fn write(&self, fd: i32, data: &[u8]) -> usize {
        let fd = self.fd(fd);
        self.wait_room(fd);
        let mut r = self.reorder(fd);
        self.flush_fd(fd, &mut r, true);
        self.emit(fd, data.to_vec());
        data.len()
    }

    /// Whether fd 1 or 2 takes a piece of `len` bytes under `ticket`, whose writer waits
    /// for the answer, now: else it waits for room ([`Stdio::write_waiting`]).
    pub fn takes_waiting(&self, fd: i32, ticket: u64, len: usize) -> bool {
        let fd = self.fd(fd);
        let mut r = self.reorder(fd);
        if !r.takes_waiting(ticket, len) {
            self.flush_fd(fd, &mut r, false);
        }
        r.takes_waiting(ticket, len)
    }

    /// Whether fds 1 and 2 each have room for one more piece, of any ticket and any
    /// length a packet carries: the consumer then takes a packet without reading its
    /// pieces ([`Stdio::admits`]).
    pub fn has_room_for_any_piece(&self) -> bool {
        [1, 2]
            .into_iter()
            .all(|fd| self.reorder(self.fd(fd)).has_room_for_any())
    }

    /// Whether the consumer should take a packet's posted pieces, each `(fd, ticket,
    /// len)` for fd 1 or 2, now, or leave the packet on its port until the fds have room
    /// for each (its turn comes, or its writer takes what waits). An fd's lock is taken
    /// once for a run of pieces to it, and its in-order bytes go to its writer only for
    /// a piece that finds no room, so that they still go in batches.
    pub fn admits(&self, pieces: &mut dyn Iterator<Item = (i32, u64, usize)>) -> bool {
        let mut locked: Option<(i32, MutexGuard<'_, Reorder>)> = None;
        for (fd, ticket, len) in pieces {
            if locked.as_ref().is_none_or(|(at, _)| *at != fd) {
                // One fd's lock at a time: the earlier one is released first.
                drop(locked.take());
                locked = Some((fd, self.reorder(self.fd(fd))));
            }
            let Some((_, r)) = locked.as_mut() else {
                unreachable!("locked above")
            };
            if !r.admits(ticket, len) {
                self.flush_fd(self.fd(fd), r, false);
                if !r.admits(ticket, len) {
                    return false;
                }
            }
        }
        true
    }

    /// A posted write to fd 1 or 2 with its ticket: in order now, or kept until its turn;
    /// refused if the ticket is not one a well-behaved kernel could send now, or if there
    /// is no room to keep it (a writer that `waits` sends it again).
    pub fn write_posted(
        &self,
        fd: i32,
        writer: Writer,
        ticket: u64,
        data: &[u8],
        waits: bool,
    ) -> Result<(), PostedError> {
        let fd = self.fd(fd);
        let mut r = self.reorder(fd);
        r.insert(ticket, writer, data, waits)?;
        if r.out.len() >= FLUSH_BYTES {
            self.flush_fd(fd, &mut r, false);
        }
        Ok(())
    }

    /// [`Stdio::write_posted`] of a piece whose writer waits for the answer: on a thread
    /// that may block, a piece with no room yet waits for room (the host's stdout taking
    /// bytes, or the tickets before it arriving), as `write(2)` to a full pipe does,
    /// until the launch ends; elsewhere it is refused `Full` (answered `EAGAIN`: the
    /// writer sends it again).
    pub fn write_waiting(
        &self,
        fd: i32,
        writer: Writer,
        ticket: u64,
        data: &[u8],
    ) -> Result<(), PostedError> {
        let f = self.fd(fd);
        loop {
            match self.write_posted(fd, writer, ticket, data, true) {
                Err(PostedError::Full { .. })
                    if wait::may_block_here() && !self.ended.load(Acquire) =>
                {
                    self.wait_room(f);
                    self.flush_fd(f, &mut self.reorder(f), false);
                    // Room may also come from tickets before this one, which other
                    // threads' calls bring.
                    std::thread::sleep(ROOM_POLL);
                }
                written => return written,
            }
        }
    }

    /// Runs `write` with a sink into fd 1 or 2 once `ticket` is the next one due (the
    /// bytes before it handed to the writer, `writer`'s unended line among them), then
    /// moves past the ticket: for output too large to hold, which is only taken in its
    /// turn. The sink waits for room in the writer between pieces, outside the fd's
    /// lock (the ticket stays due meanwhile, so nothing else passes it). `NotYet` while
    /// earlier tickets are missing; refused as for [`Stdio::write_posted`] if no kernel
    /// could send it now.
    pub fn at_turn<R>(
        &self,
        fd: i32,
        writer: Writer,
        ticket: u64,
        write: impl FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> R,
    ) -> Result<R, PostedError> {
        let fd = self.fd(fd);
        {
            let mut r = self.reorder(fd);
            if r.ahead(ticket)? > 0 {
                return Err(PostedError::NotYet {
                    ticket,
                    next: r.next,
                });
            }
            r.end_line(writer);
            self.flush_fd(fd, &mut r, true);
        }
        let done = write(&mut |piece| {
            self.wait_room(fd);
            self.emit(fd, piece.to_vec());
            Ok(())
        });
        let mut r = self.reorder(fd);
        r.next += 1;
        r.advance();
        self.flush_fd(fd, &mut r, false);
        Ok(done)
    }

    /// Hands whatever in-order posted bytes are buffered to the writers that have room
    /// (a consumer went idle).
    pub fn flush(&self) {
        for fd in &self.fds {
            self.flush_fd(fd, &mut self.reorder(fd), false);
        }
    }

    /// The launch ended: hands whatever posted data still waits to the writers, in
    /// ticket order, and waits until the host's streams have taken every byte of the
    /// launch's output, or until `deadline` (a reader stalled that long loses the
    /// rest); returns how many tickets never arrived (writes cut short by a trap). The
    /// two fds are waited for at once, so a stalled reader of one does not cost the
    /// other its output.
    pub fn finish(&self, deadline: Option<Instant>) -> u64 {
        self.ended.store(true, Release);
        let mut missing = 0;
        let [out, err] = self.fds.each_ref().map(|fd| {
            let mut r = self.reorder(fd);
            missing += r.close();
            let rest = std::mem::take(&mut r.out);
            if let Some(cap) = &self.captured {
                cap.add(fd.n, &rest);
            }
            (fd, rest)
        });
        std::thread::scope(|s| {
            let apart = err.0.echo.as_ref().and_then(|_| {
                std::thread::Builder::new()
                    .name("hostcall-stderr-end".into())
                    .spawn_scoped(s, || self.finish_fd(&err, deadline))
                    .ok()
            });
            self.finish_fd(&out, deadline);
            match apart {
                // A panic there has been reported by the panic hook.
                Some(t) => drop(t.join()),
                None => self.finish_fd(&err, deadline),
            }
        });
        missing
    }

    /// [`Stdio::finish`] for one fd, whose in-order bytes not yet handed over are `rest`.
    fn finish_fd(&self, (fd, rest): &(&Fd, Vec<u8>), deadline: Option<Instant>) {
        let Some(e) = &fd.echo else { return };
        let unwritten = e.finish(rest, deadline);
        if unwritten.refused > 0 {
            self.log.warn(
                Kind::Io,
                format_args!(
                    "{} bytes of GPU output to fd {} were dropped after the host's stream refused a write",
                    unwritten.refused, fd.n
                ),
            );
        }
        if unwritten.late > 0 {
            log::warn!(
                "{} bytes of GPU output to fd {} were dropped: the host's stream had not taken them when the run's time limit and its grace ran out",
                unwritten.late,
                fd.n
            );
        }
    }

    /// Takes what was captured on fd 1 and fd 2 so far.
    pub fn take_captured(&self) -> (Vec<u8>, Vec<u8>) {
        match &self.captured {
            Some(c) => (c.take(1), c.take(2)),
            None => Default::default(),
        }
    }

    /// Bytes of posted writes waiting for earlier tickets, over both fds.
    #[cfg(feature = "fuzzing")]
    pub fn held(&self) -> usize {
        self.fds.iter().map(|fd| self.reorder(fd).held()).sum()
    }

    /// Bytes the reorder buffers keep allocated beyond what they hold, over both fds.
    #[cfg(feature = "fuzzing")]
    pub fn retained(&self) -> usize {
        self.fds.iter().map(|fd| self.reorder(fd).retained()).sum()
    }
}

#[cfg(test)]
mod tests;
