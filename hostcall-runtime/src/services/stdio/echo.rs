//! The threads that write the GPU's output to the host's own stdout and stderr: one per
//! host fd for the whole process, shared by every launch, started with the first bytes
//! and ended once no launch uses it. No other host thread writes there for the GPU: a
//! reader of the host's stdout that pauses (a pager, a full pipe) then holds up only
//! this thread, never a consumer polling the ports, nor a lock the services share, nor
//! std's `Stdout` or `Stderr` lock (it writes the raw fd, so the host's own logging
//! never waits behind the GPU's output). What it has not written yet is bounded over
//! every launch ([`QUEUE_MAX`]); past it the GPU's output waits (`super::Stdio`).
//!
//! Each launch owns its bytes in the queue, and its end waits until they are written
//! ([`Echo::finish`]) or until its deadline, when the rest of them is dropped. A thread
//! stuck in a `write` that a reader never takes stays, holding the one piece it writes
//! ([`WRITE_MAX`]), and goes on with the next launch's bytes once the reader takes it:
//! at most one such thread per host fd.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use rustix::io::Errno;

/// Bytes handed to a writer and not yet written, over every launch, past which more
/// output waits.
pub(crate) const QUEUE_MAX: usize = 4 << 20;

/// Bytes one `write` of the host's fd takes at most: what a writer whose reader never
/// reads again holds.
const WRITE_MAX: usize = 64 << 10;

/// Bytes of one launch, handed over together.
struct Chunk {
    owner: u64,
    data: Vec<u8>,
    /// How much of `data` the writer has taken.
    taken: usize,
}

/// A launch's account with a writer.
#[derive(Default)]
struct Owner {
    /// Handed over and not yet written (queued, or in the piece being written).
    bytes: usize,
    /// The host's stream refused a write: the rest is dropped, and counted here.
    failed: bool,
    dropped: usize,
    /// The launch has ended: what a job left running past its end hands over is
    /// dropped, and counted here (its threads were stopped mid-write).
    ended: bool,
    cut: usize,
}

struct Queue {
    chunks: VecDeque<Chunk>,
    /// Bytes handed over and not yet written, over every owner, the piece being written
    /// included.
    bytes: usize,
    /// The launches using the writer, by the number each was given.
    owners: BTreeMap<u64, Owner>,
    next_owner: u64,
    /// The thread serving the queue, while one does.
    thread: Option<JoinHandle<()>>,
    /// Which thread serves: one whose number is not this one's exits.
    generation: u64,
    /// The serving thread is inside a `write`.
    writing: bool,
}

/// The writer of one of the host's fds (1 or 2).
struct Writer {
    fd: i32,
    queue: Mutex<Queue>,
    /// Chunks came, or the thread is to exit (the thread waits on it).
    more: Condvar,
    /// Bytes were written, or an owner failed or ended (writers of the GPU's output and
    /// the ends of launches wait on it).
    room: Condvar,
}

/// The process's writers of fds 1 and 2.
static WRITERS: [Writer; 2] = [Writer::new(1), Writer::new(2)];

/// One launch's use of the writer of the host's fd 1 or 2.
pub(crate) struct Echo {
    writer: &'static Writer,
    owner: u64,
}

/// What [`Echo::finish`] could not write.
pub(crate) struct Unwritten {
    /// Bytes the host's stream had not taken by the deadline, dropped.
    pub late: usize,
    /// Bytes dropped after the host's stream refused a write.
    pub refused: usize,
}

impl Writer {
    const fn new(fd: i32) -> Writer {
        Writer {
            fd,
            queue: Mutex::new(Queue {
                chunks: VecDeque::new(),
                bytes: 0,
                owners: BTreeMap::new(),
                next_owner: 0,
                thread: None,
                generation: 0,
                writing: false,
            }),
            more: Condvar::new(),
            room: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the thread, if none serves.
    fn start(&'static self, q: &mut Queue) {
        if q.thread.is_some() {
            return;
        }
        q.generation += 1;
        let (fd, generation) = (self.fd, q.generation);
        match std::thread::Builder::new()
            .name(format!("hostcall-echo-{fd}"))
            .spawn(move || self.write_out(generation))
        {
            Ok(h) => q.thread = Some(h),
            Err(e) => {
                // No thread: the bytes are dropped and counted, as after a write error.
                log::warn!("starting the thread that writes GPU output to fd {fd}: {e}");
                let owners: Vec<u64> = q.owners.keys().copied().collect();
                for owner in owners {
                    fail(q, owner);
                }
            }
        }
    }

    /// The thread: takes a piece of the first chunk at a time and writes it to the host's
    /// fd (outside the lock), until no launch uses the writer or another thread serves.
    fn write_out(&self, generation: u64) {
        let mut piece = Vec::with_capacity(WRITE_MAX);
        loop {
            let owner = {
                let mut q = self.lock();
                loop {
                    if q.generation != generation {
                        return;
                    }
                    if let Some(owner) = take_piece(&mut q, &mut piece) {
                        q.writing = true;
                        break owner;
                    }
                    if q.owners.is_empty() {
                        // Nobody joins this thread: it leaves the queue to the next.
                        drop(q.thread.take());
                        return;
                    }
                    q = self.more.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            self.write_piece(owner, &piece);
            self.lock().writing = false;
        }
    }

    /// Writes `piece` of `owner`'s bytes to the host's fd, counting what is written as
    /// it goes; a refused write drops the rest of the owner's bytes.
    fn write_piece(&self, owner: u64, piece: &[u8]) {
        let mut at = 0;
        while at < piece.len() {
            let written = if self.fd == 1 {
                rustix::io::write(rustix::stdio::stdout(), &piece[at..])
            } else {
                rustix::io::write(rustix::stdio::stderr(), &piece[at..])
            };
            let mut q = self.lock();
            match written {
                Ok(n) => {
                    at += n;
                    q.bytes -= n;
                    if let Some(o) = q.owners.get_mut(&owner) {
                        o.bytes -= n;
                    }
                }
                Err(Errno::INTR) => {}
                Err(e) => {
                    log::warn!(
                        "writing GPU output to fd {}: {e}; the rest of it is dropped",
                        self.fd
                    );
                    let left = piece.len() - at;
                    q.bytes -= left;
                    if let Some(o) = q.owners.get_mut(&owner) {
                        o.bytes -= left;
                        o.dropped += left;
                    }
                    fail(&mut q, owner);
                    at = piece.len();
                }
            }
            drop(q);
            self.room.notify_all();
        }
    }
}

/// Copies the next piece of the first chunk into `piece` (at most [`WRITE_MAX`] bytes);
/// returns its owner, or `None` when nothing is queued.
fn take_piece(q: &mut Queue, piece: &mut Vec<u8>) -> Option<u64> {
    let c = q.chunks.front_mut()?;
    let end = c.data.len().min(c.taken + WRITE_MAX);
    piece.clear();
    piece.extend_from_slice(&c.data[c.taken..end]);
    c.taken = end;
    let owner = c.owner;
    if c.taken == c.data.len() {
        q.chunks.pop_front();
    }
    Some(owner)
}

/// Drops what `owner` has queued; returns how many bytes that was.
fn drop_queued(q: &mut Queue, owner: u64) -> usize {
    let mut dropped = 0;
    q.chunks.retain(|c| {
        let mine = c.owner == owner;
        if mine {
            dropped += c.data.len() - c.taken;
        }
        !mine
    });
    q.bytes -= dropped;
    if let Some(o) = q.owners.get_mut(&owner) {
        o.bytes -= dropped;
    }
    dropped
}

/// The host's stream refused `owner`'s bytes: what it has queued and what it hands over
/// from now on are dropped, and counted.
fn fail(q: &mut Queue, owner: u64) {
    let dropped = drop_queued(q, owner);
    if let Some(o) = q.owners.get_mut(&owner) {
        o.failed = true;
        o.dropped += dropped;
    }
}

impl Echo {
    /// A launch's use of the writer of the host's fd `fd` (1 or 2), whose thread starts
    /// with the first bytes.
    pub fn new(fd: i32) -> Echo {
        let writer = &WRITERS[usize::from(fd == 2)];
        let mut q = writer.lock();
        let owner = q.next_owner;
        q.next_owner += 1;
        q.owners.insert(owner, Owner::default());
        Echo { writer, owner }
    }

    /// Whether the writer has room for more: what it holds is under [`QUEUE_MAX`].
    pub fn has_room(&self) -> bool {
        self.writer.lock().bytes < QUEUE_MAX
    }

    /// Hands `data` to the writer; never waits (the caller checked for room, or has
    /// bounded reasons not to). Once the launch has ended, what a job left running
    /// hands over is dropped.
    pub fn push(&self, data: Vec<u8>) {
        let mut q = self.writer.lock();
        if let Some(o) = q.owners.get_mut(&self.owner)
            && o.ended
        {
            o.cut += data.len();
            return;
        }
        self.queue(&mut q, data);
    }

    /// Queues `data` as this launch's, unless its stream failed (then it is counted as
    /// dropped) or the launch has left the writer.
    fn queue(&self, q: &mut Queue, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        let Some(o) = q.owners.get_mut(&self.owner) else {
            return;
        };
        if o.failed {
            o.dropped += data.len();
            return;
        }
        o.bytes += data.len();
        q.bytes += data.len();
        q.chunks.push_back(Chunk {
            owner: self.owner,
            data,
            taken: 0,
        });
        self.writer.start(q);
        self.writer.more.notify_one();
    }

    /// Waits until the writer has room, or this launch's stream failed or the launch
    /// ended; for a host thread that may block (a pool worker), never a consumer.
    pub fn wait_room(&self) {
        let mut q = self.writer.lock();
        while q.bytes >= QUEUE_MAX
            && (q.owners.get(&self.owner)).is_some_and(|o| !o.failed && !o.ended)
        {
            q = self.writer.room.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The launch is over: a job still waiting for room stops waiting (what it hands
    /// over from now on is dropped, so that it leaves the launch's memory at once),
    /// `rest` is handed over as the writer has room, and this waits until every byte of
    /// the launch is written, or until `deadline`, when what is left is dropped. The
    /// writer's thread is joined unless another launch uses it or it is stuck in a
    /// `write` (then it goes on as the host's stream takes that piece).
    pub fn finish(&self, rest: &[u8], deadline: Option<Instant>) -> Unwritten {
        let mut q = self.writer.lock();
        if let Some(o) = q.owners.get_mut(&self.owner) {
            o.ended = true;
        }
        self.writer.room.notify_all();
        let mut rest = rest;
        while let Some(o) = q.owners.get(&self.owner) {
            if o.failed || (rest.is_empty() && o.bytes == 0) {
                break;
            }
            if !rest.is_empty() && q.bytes < QUEUE_MAX {
                let n = rest.len().min(QUEUE_MAX - q.bytes);
                self.queue(&mut q, rest[..n].to_vec());
                rest = &rest[n..];
                continue;
            }
            let passed;
            (q, passed) = self.wait(q, deadline);
            if passed {
                break;
            }
        }
        self.leave(q, rest.len())
    }

    /// Waits for the writer to write, or to fail; says whether `deadline` has passed
    /// instead.
    fn wait<'a>(
        &self,
        q: MutexGuard<'a, Queue>,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, Queue>, bool) {
        let room = &self.writer.room;
        let Some(deadline) = deadline else {
            return (room.wait(q).unwrap_or_else(|p| p.into_inner()), false);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (q, true);
        }
        let (q, _) = room
            .wait_timeout(q, left)
            .unwrap_or_else(|p| p.into_inner());
        (q, false)
    }

    /// Ends this launch's use of the writer: drops what it still has queued, and joins
    /// the thread when no launch uses it and it is not inside a `write`. `kept` bytes
    /// of the launch were never handed over.
    fn leave(&self, mut q: MutexGuard<'_, Queue>, kept: usize) -> Unwritten {
        let queued = drop_queued(&mut q, self.owner);
        let Some(o) = q.owners.remove(&self.owner) else {
            return Unwritten {
                late: 0,
                refused: 0,
            };
        };
        let joined = if q.owners.is_empty() && !q.writing {
            q.generation += 1;
            q.thread.take()
        } else {
            None
        };
        drop(q);
        self.writer.room.notify_all();
        self.writer.more.notify_all();
        if let Some(t) = joined {
            // It exits at once: it is not writing, and its generation has passed.
            let _ = t.join();
        }
        // What is left of a piece being written counts as not written by the deadline.
        let late = queued + o.bytes + o.cut;
        if o.failed {
            Unwritten {
                late,
                refused: o.dropped + kept,
            }
        } else {
            Unwritten {
                late: late + kept,
                refused: o.dropped,
            }
        }
    }
}

impl Drop for Echo {
    /// A launch that ends without [`Echo::finish`] (its set-up failed) leaves the writer
    /// all the same.
    fn drop(&mut self) {
        let q = self.writer.lock();
        if q.owners.contains_key(&self.owner) {
            self.leave(q, 0);
        }
    }
}
