//! Threads for services that may block (stdin, FIFOs, slow file systems). A consumer
//! hands such a packet over, already copied out of its port, and goes on polling its
//! other ports, so one stuck `read(0)` never holds up another warp's calls. A worker
//! that finished a job polls briefly for the next before it sleeps.
//!
//! The queue is bounded: the server hands over at most one packet per port (a port is
//! not served again until its jobs have answered), as one job, or one per lane when its
//! calls may wait on a peer, and the pool refuses more than its capacity all the same. Closing drops the jobs still queued. Workers are joined when
//! the pool closes idle; a busy one may sit in a system call that never returns, so
//! then none is waited for. The port memory is guarded instead: a worker writes its
//! answers under the read half of [`PortsAlive`], and [`PortsAlive::retire`] takes the
//! write half before the launch's memory is freed, after which workers write nothing.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A packet's service, to run off the consumer thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// Whether the ports may still be written (the launch's memory is still allocated).
#[derive(Clone, Default)]
pub(crate) struct PortsAlive(Arc<RwLock<bool>>);

impl PortsAlive {
    pub fn new() -> PortsAlive {
        PortsAlive(Arc::new(RwLock::new(true)))
    }

    /// Holds the ports alive while the guard lives; `None` once retired.
    pub fn hold(&self) -> Option<RwLockReadGuard<'_, bool>> {
        let g = self.0.read().unwrap_or_else(|p| p.into_inner());
        (*g).then_some(g)
    }

    /// Waits for every writer to finish, then forbids further writes.
    pub fn retire(&self) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = false;
    }
}

/// How long closing waits for jobs to finish before it leaves busy workers behind.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

/// Worker threads taking jobs from one bounded queue, started on first use: a set
/// number, and more, up to a bound, for jobs that wait on a peer.
pub(crate) struct BlockingPool {
    shared: Arc<Shared>,
    /// Workers to start.
    size: usize,
    /// Workers there may be, started for jobs that wait on a peer.
    max_workers: usize,
    /// Jobs the queue holds at most.
    capacity: usize,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// The queue the workers share, and how many jobs are queued or running.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    busy: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BlockingPool {
    /// A pool of `workers` threads (at least one), started with its first job (most
    /// launches never make a call that may block, and pay for no thread), growing to
    /// `max_workers` for jobs that wait on a peer, queueing at most `capacity` jobs.
    pub fn new(workers: usize, max_workers: usize, capacity: usize) -> BlockingPool {
        BlockingPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
                busy: AtomicUsize::new(0),
            }),
            size: workers.max(1),
            max_workers: max_workers.max(workers).max(1),
            capacity: capacity.max(1),
            workers: Mutex::new(Vec::new()),
        }
    }

    /// Queues `job`, starting the workers on first use; hands it back if the pool is
    /// closed, its queue full, or no worker could be started (the caller then runs it
    /// itself, or drops it once closed). A job that may wait on another party
    /// (`waits`: a socket's peer, perhaps another GPU thread whose own call is queued
    /// behind it) gets a worker started for it when none is idle, up to `max_workers`, so
    /// such jobs never wait for each other.
    pub fn submit(&self, job: Job, waits: bool) -> Result<(), Job> {
        // Held until the job is queued: two waiting jobs submitted at once both count
        // the other as busy.
        let mut workers = self.lock_workers();
        let idle = workers.len().saturating_sub(self.busy());
        let want = if waits && idle == 0 {
            (workers.len() + 1).clamp(self.size, self.max_workers)
        } else {
            self.size
        };
        while workers.len() < want {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hostcall-blocking-{}", workers.len()))
                .spawn(move || worker(&shared));
            match spawned {
                Ok(t) => workers.push(t),
                Err(e) if workers.is_empty() => {
                    log::warn!("starting a thread for blocking hostcalls: {e}");
                    return Err(job);
                }
                Err(_) => break,
            }
        }
        let mut q = self.shared.lock();
        if q.closed || q.jobs.len() >= self.capacity {
            return Err(job);
        }
        self.shared.busy.fetch_add(1, Relaxed);
        q.jobs.push_back(job);
        drop(q);
        drop(workers);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Whether the pool takes no more jobs.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Jobs queued, not yet taken by a worker.
    #[cfg(feature = "fuzzing")]
    pub fn queued(&self) -> usize {
        self.shared.lock().jobs.len()
    }

    /// Jobs queued or running.
    pub fn busy(&self) -> usize {
        self.shared.busy.load(Relaxed)
    }

    /// Takes no more jobs and drops the queued ones; idle workers exit, busy ones when
    /// their job ends. When none is busy (after [`CLOSE_GRACE`] for jobs just
    /// answering), waits for them to exit, so a finished run leaves no thread behind.
    pub fn close(&self) {
        let dropped = {
            let mut q = self.shared.lock();
            q.closed = true;
            std::mem::take(&mut q.jobs)
        };
        self.shared.busy.fetch_sub(dropped.len(), Relaxed);
        // Outside the lock: a job's drop releases its port.
        drop(dropped);
        self.shared.ready.notify_all();
        let deadline = Instant::now() + CLOSE_GRACE;
        while self.busy() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
        if self.busy() == 0 {
            for t in self.lock_workers().drain(..) {
                // A worker that panicked has reported through the panic hook.
                let _ = t.join();
            }
        }
    }

    fn lock_workers(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How long a worker polls for its next job before it sleeps: file calls come in bursts
/// (a large write is many calls), and waking a sleeping thread can cost hundreds of
/// microseconds on a virtual machine.
const WARM: Duration = Duration::from_micros(500);

fn worker(shared: &Shared) {
    crate::services::wait::blocking_thread();
    crate::services::wait::serving_live(true);
    loop {
        let warm_until = Instant::now() + WARM;
        let job = loop {
            let mut q = shared.lock();
            if let Some(job) = q.jobs.pop_front() {
                break Some(job);
            }
            if q.closed {
                break None;
            }
            if Instant::now() < warm_until {
                drop(q);
                std::thread::yield_now();
                continue;
            }
            while q.jobs.is_empty() && !q.closed {
                q = shared.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            break q.jobs.pop_front();
        };
        let Some(job) = job else { return };
        job();
        shared.busy.fetch_sub(1, Relaxed);
    }
}
