//! Threads for services that may block (stdin, FIFOs, slow file systems). A consumer
//! hands such a packet over, already copied out of its port, and goes on polling its
//! other ports, so one stuck `read(0)` never holds up another warp's calls.
//!
//! Workers are joined when the pool closes idle; a busy one may sit in a system call
//! that never returns, so then none is waited for. The port memory is guarded instead: a worker writes its answers under the read half of
//! [`PortsAlive`], and [`PortsAlive::retire`] takes the write half before the launch's
//! memory is freed, after which workers write nothing.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
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

/// A fixed set of worker threads taking jobs from one queue.
pub(crate) struct BlockingPool {
    queue: Mutex<Option<Sender<Job>>>,
    busy: Arc<AtomicUsize>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl BlockingPool {
    /// Starts `workers` threads (at least one).
    pub fn start(workers: usize) -> std::io::Result<BlockingPool> {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let busy = Arc::new(AtomicUsize::new(0));
        let pool = BlockingPool {
            queue: Mutex::new(Some(tx)),
            busy,
            workers: Mutex::new(Vec::new()),
        };
        for k in 0..workers.max(1) {
            let (rx, busy) = (rx.clone(), pool.busy.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("hostcall-blocking-{k}"))
                .spawn(move || worker(&rx, &busy));
            match spawned {
                Ok(t) => pool.lock_workers().push(t),
                Err(e) => {
                    pool.close();
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    /// Queues `job`; false once the pool is closed.
    pub fn submit(&self, job: Job) -> bool {
        let q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        match &*q {
            Some(tx) => {
                self.busy.fetch_add(1, Relaxed);
                tx.send(job).is_ok()
            }
            None => false,
        }
    }

    /// Jobs queued or running.
    pub fn busy(&self) -> usize {
        self.busy.load(Relaxed)
    }

    /// Takes no more jobs; idle workers exit, busy ones when their job ends. When none
    /// is busy (after [`CLOSE_GRACE`] for jobs just answering), waits for them to exit,
    /// so a finished run leaves no thread behind.
    pub fn close(&self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
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

    fn lock_workers(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, busy: &AtomicUsize) {
    loop {
        let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = job else { return };
        job();
        busy.fetch_sub(1, Relaxed);
    }
}
