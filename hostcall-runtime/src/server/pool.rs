//! Threads for calls that may keep the host a while, so that no consumer ever waits in
//! one: a consumer hands such a lane over, already copied out of its port, and goes on
//! polling its other ports. Two kinds of call, two kinds of thread:
//!
//! - A call that only takes time (a regular file, `stat`, a slow file system, a service
//!   declared `blocks`) runs on one of a set number of **workers**, in the order queued.
//!   Such a job ends without any GPU thread's help, so however many wait in the queue,
//!   the workers empty it; unless they are all in calls that never end (reads on a hung
//!   mount): a job that has waited [`STUCK`] in the queue while every worker had been in
//!   its call that long gets a worker started for it ([`BlockingPool::unstick`]), which
//!   leaves once idle for [`WAITER_IDLE`].
//! - A call that may wait as long as another party likes (a FIFO's other end, which may
//!   be another GPU thread; stdout's reader; a service declared `waits`) runs on a
//!   **waiter** of its own: an idle waiter takes it, or a new one starts for it. It
//!   never waits for a thread, nor holds one a call that only takes time needs, so no
//!   number of such calls waiting on each other can starve the host.
//!
//! # Bounds
//!
//! Host threads: the workers (`HostBuilder::blocking_threads`), one more per job that
//! waited [`STUCK`] behind workers all that long in their calls (at most one every
//! [`STUCK`]), and one waiter per waiting call being served, plus those idle less than
//! [`WAITER_IDLE`]. The waiting
//! calls a GPU thread waits on are at most one per GPU thread of the launch (each has
//! one call outstanding: on a port's lane, or parked under a wake word; a posted call,
//! which nobody waits for, takes a waiter too while it runs), and no smaller bound is
//! safe: with `n` waiters, `n` readers' opens of FIFOs leave the writers'
//! opens that would end them waiting for a thread, as Linux, which gives every blocked
//! thread its own kernel context, never does. The operating system's thread limit is
//! the only cap: a call no thread can be started for is refused (answered `EAGAIN`, as
//! `pthread_create` fails then), never queued behind calls that may wait for it.
//!
//! The workers' queue holds [`BlockingPool::has_room`]'s `capacity` jobs (32 per port):
//! past it, a consumer leaves a packet with a lane for the workers on its port, unserved
//! (the port waits, as when every port is busy), and takes it on a later sweep. That
//! cannot deadlock: the queued jobs only take time, so the queue empties (and one stuck
//! behind calls that never end gets a worker of its own); the packet
//! holds no worker and no other port meanwhile. Each consumer looks before it takes a
//! packet, so the queue holds at most one packet per consumer beyond `capacity` (and the
//! run's end, which serves each port once more without looking, one per port).
//!
//! Closing drops the jobs still queued. Threads are joined when the pool closes idle; a
//! busy one may sit in a system call that never returns, so then none is waited for.
//! The port memory is guarded instead: a job writes its answers under the read half of
//! [`PortsAlive`], and [`PortsAlive::retire`] takes the write half before the launch's
//! memory is freed, after which jobs write nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostcall_abi::park::TAKES_TIME_PARK_AFTER_NS;

/// A lane's service, to run off the consumer thread: run (`Fate::Run`), or answered
/// without running when no thread can take it (`Fate::Refused`); dropped unrun once
/// the pool is closed (the run is over, nobody waits for its answer).
pub(crate) type Job = Box<dyn FnOnce(Fate) + Send>;

/// What becomes of a job handed to the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// A thread runs it.
    Run,
    /// No thread could be started for it.
    Refused,
}

/// Which threads a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runs {
    /// A worker: the job only takes time.
    OnWorker,
    /// A waiter of its own: the job may wait on another party for as long as it likes.
    OnWaiter,
}

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

/// How long closing waits for jobs to finish before it leaves busy threads behind.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

/// How long an idle waiter, or a worker started past the set number, stays for the next
/// job before it exits: a burst of opens reuses the threads of the last, and a launch
/// that once had many waiting calls does not keep their threads.
const WAITER_IDLE: Duration = Duration::from_secs(1);

/// How long a job may wait in the workers' queue, no worker idle, before the pool starts
/// another worker for it: far longer than a call that only takes time takes on a working
/// file system (the time such a call keeps its port), so the workers are then in calls
/// that may never end.
const STUCK: Duration = Duration::from_nanos(TAKES_TIME_PARK_AFTER_NS);

/// The workers and waiters of one launch, started on first use (most launches never
/// make a call that may block, and pay for no thread): `workers` workers, and a waiter
/// per call that waits on another party while it waits, bounded by the launch's GPU
/// threads and no lower, since a lower bound lets such calls wait on each other for a
/// thread (the module's doc, under Bounds).
pub(crate) struct BlockingPool {
    shared: Arc<Shared>,
    /// Jobs the workers' queue holds before consumers leave packets on their ports.
    capacity: usize,
}

/// The queues the threads share, and how many jobs are queued or running.
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes a worker.
    for_worker: Condvar,
    /// Wakes an idle waiter.
    for_waiter: Condvar,
    busy: AtomicUsize,
    /// Workers to start, and to keep while idle.
    workers: usize,
    /// Jobs in the workers' queue (read without the lock by every consumer).
    queued: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    /// Jobs for the workers, each with when it was queued.
    jobs: VecDeque<(Instant, Job)>,
    /// Jobs for waiters, each promised to an idle one (`idle_waiters >= waiting.len()`).
    waiting: VecDeque<Job>,
    idle_waiters: usize,
    /// Workers running, and those of them waiting for a job (or starting).
    workers: usize,
    idle_workers: usize,
    /// When each job now on a worker began (a count per instant).
    began: BTreeMap<Instant, usize>,
    workers_started: bool,
    threads: Vec<JoinHandle<()>>,
    closed: bool,
}

impl Queue {
    /// The next job for a worker (`Runs::OnWorker`) or a waiter, and when it began.
    fn take(&mut self, shared: &Shared, runs: Runs) -> Option<(Job, Instant)> {
        let now = Instant::now();
        match runs {
            Runs::OnWorker => {
                let (_, job) = self.jobs.pop_front()?;
                shared.queued.fetch_sub(1, Relaxed);
                self.idle_workers -= 1;
                *self.began.entry(now).or_default() += 1;
                Some((job, now))
            }
            Runs::OnWaiter => {
                let job = self.waiting.pop_front()?;
                self.idle_waiters -= 1;
                Some((job, now))
            }
        }
    }

    /// Starts a thread of kind `runs`, and lets go of the handles of threads that have
    /// exited.
    fn start(&mut self, shared: &Arc<Shared>, runs: Runs) -> std::io::Result<()> {
        self.threads.retain(|t| !t.is_finished());
        let name = match runs {
            Runs::OnWorker => "hostcall-blocking",
            Runs::OnWaiter => "hostcall-waiting",
        };
        let s = shared.clone();
        let t = std::thread::Builder::new()
            .name(format!("{name}-{}", self.threads.len()))
            .spawn(move || serve(&s, runs))?;
        self.threads.push(t);
        if runs == Runs::OnWorker {
            self.workers += 1;
            self.idle_workers += 1;
        }
        Ok(())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BlockingPool {
    /// A pool of `workers` workers (at least one) whose queue holds `capacity` jobs
    /// before consumers hold packets back ([`BlockingPool::has_room`]), and of waiters as
    /// the calls that wait need them.
    pub fn new(workers: usize, capacity: usize) -> BlockingPool {
        BlockingPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                for_worker: Condvar::new(),
                for_waiter: Condvar::new(),
                busy: AtomicUsize::new(0),
                workers: workers.max(1),
                queued: AtomicUsize::new(0),
            }),
            capacity: capacity.max(1),
        }
    }

    /// Hands `job` to a thread of kind `runs`: queued for the workers (started on first
    /// use), or given to an idle waiter, else to a waiter started for it. A job no
    /// thread can be started for is refused (run with [`Fate::Refused`]), with a log
    /// line; one handed to a closed pool is dropped.
    pub fn submit(&self, job: Job, runs: Runs) {
        let mut q = self.shared.lock();
        if q.closed {
            drop(q);
            drop(job);
            return;
        }
        let started = match runs {
            Runs::OnWorker if !q.workers_started => {
                let mut started = Ok(());
                for _ in 0..self.shared.workers {
                    started = q.start(&self.shared, runs);
                    if started.is_err() {
                        break;
                    }
                    q.workers_started = true;
                }
                if q.workers_started { Ok(()) } else { started }
            }
            Runs::OnWaiter if q.idle_waiters <= q.waiting.len() => {
                q.start(&self.shared, runs).map(|()| q.idle_waiters += 1)
            }
            _ => Ok(()),
        };
        if let Err(e) = started {
            drop(q);
            log::warn!(
                "starting a thread for a hostcall that may block: {e}; the call is answered EAGAIN"
            );
            job(Fate::Refused);
            return;
        }
        self.shared.busy.fetch_add(1, Relaxed);
        match runs {
            Runs::OnWorker => {
                q.jobs.push_back((Instant::now(), job));
                self.shared.queued.fetch_add(1, Relaxed);
                drop(q);
                self.shared.for_worker.notify_one();
            }
            Runs::OnWaiter => {
                q.waiting.push_back(job);
                drop(q);
                self.shared.for_waiter.notify_one();
            }
        }
    }

    /// Starts one more worker if the job first in the workers' queue has waited
    /// [`STUCK`], no worker is idle, and every worker has been in its call for [`STUCK`]:
    /// they are all in calls that outlast any file operation (a hung mount), which must
    /// not hold up the calls behind them. Workers that are only slow (a loaded file
    /// server's 25 ms calls) are seldom all that far into their calls at once, and the
    /// worker started takes a job at once, so the next can start only [`STUCK`] later.
    /// Called by the consumers as they sweep; costs one load while the queue is empty.
    pub fn unstick(&self) {
        if self.shared.queued.load(Relaxed) == 0 {
            return;
        }
        let mut q = self.shared.lock();
        let waited = q.jobs.front().is_some_and(|(at, _)| at.elapsed() >= STUCK);
        let all_long = q
            .began
            .keys()
            .next_back()
            .is_none_or(|t| t.elapsed() >= STUCK);
        if !waited || !all_long || q.idle_workers > 0 || q.closed {
            return;
        }
        if let Err(e) = q.start(&self.shared, Runs::OnWorker) {
            drop(q);
            log::warn!("starting a worker for calls queued behind calls that do not end: {e}");
            return;
        }
        drop(q);
        self.shared.for_worker.notify_one();
    }

    /// Whether the workers' queue has room for more jobs: a consumer takes no packet
    /// with a lane for the workers while it has not.
    pub fn has_room(&self) -> bool {
        self.shared.queued.load(Relaxed) < self.capacity
    }

    /// Jobs queued, not yet taken by a thread.
    #[cfg(feature = "fuzzing")]
    pub fn queued(&self) -> usize {
        let q = self.shared.lock();
        q.jobs.len() + q.waiting.len()
    }

    /// Jobs queued or running.
    pub fn busy(&self) -> usize {
        self.shared.busy.load(Relaxed)
    }

    /// Takes no more jobs and drops the queued ones; idle threads exit, busy ones when
    /// their job ends. When none is busy (after [`CLOSE_GRACE`] for jobs just
    /// answering), waits for them to exit, so a finished run leaves no thread behind.
    pub fn close(&self) {
        let dropped = {
            let mut q = self.shared.lock();
            q.closed = true;
            self.shared.queued.store(0, Relaxed);
            let mut jobs: VecDeque<Job> = std::mem::take(&mut q.jobs)
                .into_iter()
                .map(|(_, job)| job)
                .collect();
            jobs.append(&mut q.waiting);
            jobs
        };
        self.shared.busy.fetch_sub(dropped.len(), Relaxed);
        // Outside the lock: a job's drop releases its port.
        drop(dropped);
        self.shared.for_worker.notify_all();
        self.shared.for_waiter.notify_all();
        let deadline = Instant::now() + CLOSE_GRACE;
        while self.busy() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
        if self.busy() == 0 {
            let threads = std::mem::take(&mut self.shared.lock().threads);
            for t in threads {
                // A thread that panicked has reported through the panic hook.
                let _ = t.join();
            }
        }
    }
}

/// How long a thread polls for its next job before it sleeps: file calls come in bursts
/// (a large write is many calls), and waking a sleeping thread can cost hundreds of
/// microseconds on a virtual machine.
const WARM: Duration = Duration::from_micros(500);

/// A worker's or a waiter's life: the jobs of its kind, until the pool closes (or, for
/// a waiter or a worker past the set number, until it has been idle for
/// [`WAITER_IDLE`]).
fn serve(shared: &Shared, runs: Runs) {
    crate::services::wait::blocking_thread();
    crate::services::wait::serving_live(true);
    while let Some((job, began)) = next(shared, runs) {
        job(Fate::Run);
        shared.busy.fetch_sub(1, Relaxed);
        let mut q = shared.lock();
        match runs {
            Runs::OnWaiter => q.idle_waiters += 1,
            Runs::OnWorker => {
                q.idle_workers += 1;
                if let Some(n) = q.began.get_mut(&began) {
                    *n -= 1;
                    if *n == 0 {
                        q.began.remove(&began);
                    }
                }
            }
        }
    }
}

/// The next job of kind `runs`, polled for [`WARM`], then waited for; `None` once the
/// pool is closed, or a waiter, or a worker past the set number, has been idle for
/// [`WAITER_IDLE`] (it then counts itself out of the idle threads, with no job promised
/// to it: the queue is empty).
fn next(shared: &Shared, runs: Runs) -> Option<(Job, Instant)> {
    let warm_until = Instant::now() + WARM;
    let idle_until = warm_until + WAITER_IDLE;
    let mut q = shared.lock();
    loop {
        if let Some(job) = q.take(shared, runs) {
            return Some(job);
        }
        let now = Instant::now();
        let may_leave = runs == Runs::OnWaiter || q.workers > shared.workers;
        if q.closed || (may_leave && now >= idle_until) {
            match runs {
                Runs::OnWaiter => q.idle_waiters -= 1,
                Runs::OnWorker => {
                    q.workers -= 1;
                    q.idle_workers -= 1;
                }
            }
            return None;
        }
        if now < warm_until {
            drop(q);
            std::thread::yield_now();
            q = shared.lock();
            continue;
        }
        let wake = match runs {
            Runs::OnWorker => &shared.for_worker,
            Runs::OnWaiter => &shared.for_waiter,
        };
        q = if may_leave {
            let waited = wake.wait_timeout(q, idle_until - now);
            waited.unwrap_or_else(|p| p.into_inner()).0
        } else {
            wake.wait(q).unwrap_or_else(|p| p.into_inner())
        };
    }
}
