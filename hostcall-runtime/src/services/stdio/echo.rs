//! The thread that writes the GPU's output to the host's own stdout or stderr. No other
//! host thread writes there for the GPU: a reader of the host's stdout that pauses (a
//! pager, a full pipe) then holds up only this thread, never a consumer polling the
//! ports, nor a lock the services share. The bytes it has not written yet are bounded
//! ([`QUEUE_MAX`]); past it the GPU's output waits (`super::Stdio`).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes handed to the writer and not yet written, past which more output waits.
pub(crate) const QUEUE_MAX: usize = 4 << 20;

/// How long a waiting writer sleeps before it looks again whether the echo has closed.
const WAIT_SLICE: Duration = Duration::from_millis(10);

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The run has ended: waiting writers stop waiting.
    closing: bool,
    /// The host's stream refused a write: the rest is dropped (and counted).
    failed: bool,
    dropped: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Chunks came (the writer waits on it).
    more: Condvar,
    /// Room came (writers of the GPU's output wait on it).
    room: Condvar,
}

/// The writer of one of the host's own fds (1 or 2) for one launch.
pub(crate) struct Echo {
    fd: i32,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Echo {
    /// The writer of the host's fd `fd` (1 or 2), its thread started with the first
    /// bytes.
    pub fn new(fd: i32) -> Echo {
        Echo {
            fd,
            shared: Arc::new(Shared {
                queue: Mutex::default(),
                more: Condvar::new(),
                room: Condvar::new(),
            }),
            thread: Mutex::new(None),
        }
    }

    /// Whether it has room for more: what it holds is under [`QUEUE_MAX`].
    pub fn has_room(&self) -> bool {
        self.shared.lock().bytes < QUEUE_MAX
    }

    /// Hands `data` to the writer; never waits (the caller checked for room, or has
    /// bounded reasons not to).
    pub fn push(&self, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        {
            let mut q = self.shared.lock();
            if q.failed {
                q.dropped += data.len();
                return;
            }
            q.bytes += data.len();
            q.chunks.push_back(data);
        }
        self.shared.more.notify_one();
        self.start();
    }

    fn start(&self) {
        let mut t = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_some() {
            return;
        }
        let (fd, shared) = (self.fd, self.shared.clone());
        match std::thread::Builder::new()
            .name(format!("hostcall-echo-{fd}"))
            .spawn(move || write_out(fd, &shared))
        {
            Ok(h) => *t = Some(h),
            Err(e) => {
                // No thread: the bytes are dropped and counted, as after a write error.
                log::warn!("starting the thread that writes GPU output to fd {fd}: {e}");
                let mut q = self.shared.lock();
                q.failed = true;
                q.dropped += q.bytes;
                q.bytes = 0;
                q.chunks.clear();
            }
        }
    }

    /// Waits until it has room or is closing; for a host thread that may block (a pool
    /// worker), never a consumer.
    pub fn wait_room(&self) {
        let mut q = self.shared.lock();
        while q.bytes >= QUEUE_MAX && !q.closing && !q.failed {
            q = self
                .shared
                .room
                .wait_timeout(q, WAIT_SLICE)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The run is over: waiting writers stop waiting, and this waits until everything
    /// handed over is written, or `deadline`. What is left then is written as the host's
    /// stream takes it, by the writer thread, which is not waited for; returns how many
    /// bytes that is, and how many were dropped after a write error.
    pub fn finish(&self, deadline: Instant) -> (usize, usize) {
        let mut q = self.shared.lock();
        q.closing = true;
        self.shared.room.notify_all();
        self.shared.more.notify_all();
        while q.bytes > 0 && !q.failed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = self
                .shared
                .room
                .wait_timeout(q, left.min(WAIT_SLICE))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let left = (q.bytes, q.dropped);
        drop(q);
        if left.0 == 0 {
            let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = t {
                // It exits once closing with nothing queued.
                let _ = t.join();
            }
        }
        left
    }
}

/// The writer thread: each chunk in turn, written whole to the host's fd (outside the
/// lock), until the echo closes with nothing left.
fn write_out(fd: i32, shared: &Shared) {
    loop {
        let chunk = {
            let mut q = shared.lock();
            loop {
                if let Some(c) = q.chunks.pop_front() {
                    break c;
                }
                if q.closing {
                    return;
                }
                q = shared.more.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let written = if fd == 1 {
            let mut out = std::io::stdout().lock();
            out.write_all(&chunk).and_then(|()| out.flush())
        } else {
            std::io::stderr().lock().write_all(&chunk)
        };
        let mut q = shared.lock();
        q.bytes -= chunk.len();
        if let Err(e) = written {
            log::warn!("writing GPU output to fd {fd}: {e}; the rest of it is dropped");
            q.failed = true;
            q.dropped += chunk.len() + q.bytes;
            q.bytes = 0;
            q.chunks.clear();
        }
        drop(q);
        shared.room.notify_all();
    }
}
