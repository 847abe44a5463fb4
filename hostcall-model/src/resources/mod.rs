//! The host's bounded resources, as the server has them: ports taken as the client
//! takes them, consumers, the pool's base workers and their queue, waiters, parking,
//! and stdout (a writer with a bounded queue, a reader that may stall for good, the end
//! of the run). One rule is checked through all of them: **nothing that can wait
//! without bound holds a bounded resource** that a call which only needs the host is
//! waiting for.
//!
//! # What is modelled
//!
//! * **GPU threads**, one lane each, run a short script of [`Call`]s: one that only
//!   takes time ([`Call::Stat`]), one that never returns ([`Call::HungRead`]: a hung
//!   mount), a FIFO's opens, which wait for the other end ([`Call::FifoOpenRead`],
//!   [`Call::FifoOpenWrite`]), a posted one-piece print ([`Call::Print`]), a write that
//!   waits for room ([`Call::Write`]), and a call the consumer answers itself
//!   ([`Call::Ping`]).
//! * **Ports** ([`ResourceConfig::ports`]; from two on, the last is the continuation
//!   port, which the host never holds back). A thread looks for a port from its home
//!   port on, as [`Search`] says: at c839d74 it takes the first free lock word and, if
//!   that port's last packet was posted and the host has not finished it, waits on it.
//!   The host may leave a posted print on its port while stdout has no room (*held
//!   back*), and today marks it so.
//! * **Consumers** (port `p` is consumer `p % consumers`'s) serve a published packet in
//!   any order: a ping, a collection and a posted print themselves, any other call
//!   handed off to the pool. Two consumers differ from one only while one of them runs
//!   a call itself (c839d74's full queue).
//! * **The pool**: base workers ([`ResourceConfig::workers`]) behind a queue of
//!   [`ResourceConfig::queue`] jobs, one more worker while a job waits in the queue
//!   with none idle ([`Rules::replaces_stuck_workers`]), and (with [`Rules::waiters`])
//!   a waiter of its own for each call that waits on another party.
//! * **Parking**: a lane handed off and still waiting may be answered a ticket at any
//!   step (the delay is not counted), which frees its port; once its call ends, it
//!   collects the answer on a port. The host gives one wake word per GPU thread, so a
//!   ticket is never short.
//! * **Stdout**: units of output the host holds unwritten, at most
//!   [`ResourceConfig::bound`]; a reader that takes them one by one and, with
//!   [`ResourceConfig::stalls`], may stop for good at any step; the end of the run once
//!   every thread is done, and the process's exit.
//!
//! Each field of [`Rules`] is a way the host or client was at c839d74
//! ([`Rules::c839d74`]) or is now ([`Rules::today`]).
//!
//! # Invariants ([`Violation`])
//!
//! * A call that needs only the host (a stat, a ping, a collection, a FIFO open whose
//!   other end is already there) always ends: when no step is possible and one is still
//!   waiting, the model reports it **held up**, by output waiting for a stalled reader,
//!   by a call that never returns, or by calls that wait on another party.
//! * No deadlock: when no step is possible, some thread is not done, the reader has not
//!   stalled and no call hangs, that is a deadlock.
//! * No thread gives up (the launch fails) because the reader stalled.
//! * Stdout never holds more than its bound, and nothing printed is lost when the
//!   process ends while its reader still reads.
//!
//! # What it leaves out
//!
//! * Warps: each thread is one lane and each packet one lane (the port model in this
//!   crate checks packets, `activemask` and warp barriers), and memory is sequentially
//!   consistent, each step atomic (a client's search of the ports included).
//! * Time: a delay (parking, a wait limit, a job's wait in the queue, a worker's idle
//!   time) may run out at any step; so c839d74's client gives up only while it waits on
//!   output held back for a stalled reader, the one wait no step can end (today's never
//!   gives up).
//! * Bytes: output counts in units of one piece; the order of pieces and their tickets
//!   are [`check_tickets`](crate::check_tickets)'s.
//! * The reactor (sockets, pipes, stdin waiting for readiness), stops and the time
//!   limit's kill, `exit`, stderr and the host's own log lines (and so std's locks on
//!   them), the pool's thread limit, and the host memory each waiting call takes.
//!
//! # Why a model, not the server under a scheduler
//!
//! Exploring the real server with a deterministic scheduler (`shuttle`, `loom`) would
//! mean every `std::sync` type and every thread of the server and its services swapped
//! for the scheduler's, and a simulated operating system beneath them for FIFOs, pipes
//! and a stdout that stalls; `shuttle` then samples schedules at random, and `loom`,
//! which explores them all, does so only for a handful of threads and operations. This
//! model is explored exhaustively at the sizes where these bugs live, with a shortest
//! trace to each, and each of its rules names what in the server it stands for; the
//! price is that it must be kept in step with the server by hand.

mod steps;

use std::fmt;

use crate::explore::{Next, Space, explore};
use crate::violation::Holder;
use crate::{Report, Violation};

/// A call a GPU thread makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// A call that only takes time (a `stat`, a regular file's read): a worker's job.
    Stat,
    /// A call that only takes time and never returns (a read of a hung mount).
    HungRead,
    /// Opens FIFO `n` to read: waits until a writer opens it.
    FifoOpenRead(u8),
    /// Opens FIFO `n` to write: waits until a reader opens it.
    FifoOpenWrite(u8),
    /// A one-piece write to stdout, posted: nobody waits for its answer.
    Print,
    /// A write to stdout that waits for room (one too long to post).
    Write,
    /// A call the consumer answers itself.
    Ping,
}

impl Call {
    /// Whether the call waits on nobody: it runs on a worker.
    fn only_takes_time(self) -> bool {
        matches!(self, Call::Stat | Call::HungRead)
    }

    /// A FIFO open's bit among the ends opened.
    fn fifo_bit(self) -> Option<u16> {
        match self {
            Call::FifoOpenRead(n) => Some(1 << (2 * n)),
            Call::FifoOpenWrite(n) => Some(1 << (2 * n + 1)),
            _ => None,
        }
    }

    /// The FIFO's other end.
    fn other_end(self) -> Option<Call> {
        match self {
            Call::FifoOpenRead(n) => Some(Call::FifoOpenWrite(n)),
            Call::FifoOpenWrite(n) => Some(Call::FifoOpenRead(n)),
            _ => None,
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Stat => write!(f, "stat"),
            Call::HungRead => write!(f, "hung read"),
            Call::FifoOpenRead(n) => write!(f, "open of FIFO {n} to read"),
            Call::FifoOpenWrite(n) => write!(f, "open of FIFO {n} to write"),
            Call::Print => write!(f, "posted print"),
            Call::Write => write!(f, "write that waits for room"),
            Call::Ping => write!(f, "ping"),
        }
    }
}

/// How a GPU thread looks for a port among the ports that are not continuation ports,
/// from its home port on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// As at c839d74: it takes the first free lock word and waits on that port's posted
    /// packet, giving up (the launch fails) once its limit passes.
    FirstFree,
    /// It skips a port whose posted packet the host marked held back (and lets go of one
    /// marked while it waits on it) and tries the others, never giving up once it has
    /// seen one; a print that meets one comes back unsent and goes again as a
    /// [`Call::Write`], which the host parks while stdout has no room. Not enough: one
    /// printer may hold back every port.
    SkipsHeld,
    /// As [`Search::SkipsHeld`], and a request that finds no port free after seeing one
    /// held back takes the continuation port too: a printer may hold back every other
    /// port, the continuation port is never held back.
    SkipsHeldOrContinues,
}

/// How the host and the client behave, one rule a field: [`Rules::c839d74`] sets each
/// as it was then (a flag `false`), [`Rules::today`] as it is now (`true`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// How a thread looks for a port.
    pub search: Search,
    /// A call that waits on another party (a FIFO's other end, stdout's reader) runs
    /// on a waiter of its own; the workers run only calls that take time. `false`: one
    /// pool for all, which starts a worker for a call that waits on a FIFO while none
    /// is idle, up to `max(ports, workers)`, and queues the rest for the workers there
    /// are.
    pub waiters: bool,
    /// A packet for the workers that finds their queue full stays on its port. `false`:
    /// the consumer runs it itself.
    pub full_queue_leaves: bool,
    /// While the job first in the workers' queue waits and no worker is idle, the pool
    /// starts one more worker, which leaves once idle: calls that never return (reads
    /// of a hung mount) hold up no call behind them. `false`: the base workers only.
    pub replaces_stuck_workers: bool,
    /// A call that only takes time is parked too (after a longer delay). `false`: it
    /// keeps its port until it returns.
    pub parks_time_calls: bool,
    /// The run ends once everything printed is written (or once the reader has stalled
    /// past the limit). `false`: its end hands every held-back piece to stdout past its
    /// bound, and the process exits a fixed time later, written or not.
    pub end_waits_written: bool,
}

impl Rules {
    /// The host and client at c839d74.
    pub fn c839d74() -> Rules {
        Rules {
            search: Search::FirstFree,
            waiters: false,
            full_queue_leaves: false,
            replaces_stuck_workers: false,
            parks_time_calls: false,
            end_waits_written: false,
        }
    }

    /// The host and client of this round.
    pub fn today() -> Rules {
        Rules {
            search: Search::SkipsHeldOrContinues,
            waiters: true,
            full_queue_leaves: true,
            replaces_stuck_workers: true,
            parks_time_calls: true,
            end_waits_written: true,
        }
    }
}

/// A configuration to explore.
#[derive(Clone, Debug)]
pub struct ResourceConfig {
    /// Per GPU thread, its home port (where its search for a port starts, among the
    /// ports that are not continuation ports) and its calls in order.
    pub threads: Vec<(u8, Vec<Call>)>,
    /// Ports; from two on, the last is the continuation port.
    pub ports: u8,
    /// Consumer threads.
    pub consumers: u8,
    /// The pool's base workers.
    pub workers: u8,
    /// Jobs the workers' queue holds at most.
    pub queue: u8,
    /// Units of output stdout holds unwritten at most.
    pub bound: u8,
    /// Whether stdout's reader may stop reading for good.
    pub stalls: bool,
    /// The host's and client's rules.
    pub rules: Rules,
}

impl ResourceConfig {
    /// A bit of everything, with a reader that may stall for good: a printer that opens
    /// a FIFO's write end between its prints; the FIFO's reader, which then stats and
    /// pings; a thread that stats, pings and writes; and a hung read. Three ports (one
    /// the continuation port), one consumer, one base worker behind a queue of one,
    /// room for one unit of output.
    pub fn mixed(rules: Rules) -> ResourceConfig {
        ResourceConfig {
            threads: vec![
                (0, vec![Call::Print, Call::FifoOpenWrite(0), Call::Print]),
                (1, vec![Call::FifoOpenRead(0), Call::Stat, Call::Ping]),
                (0, vec![Call::Stat, Call::Ping, Call::Write]),
                (1, vec![Call::HungRead]),
            ],
            ports: 3,
            consumers: 1,
            workers: 1,
            queue: 1,
            bound: 1,
            stalls: true,
            rules,
        }
    }
}

/// Explores every interleaving of `config` (see the module's documentation).
pub fn check_resources(config: &ResourceConfig) -> Report {
    explore(&Resources::new(config))
}

/// Where a thread's current request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum At {
    /// About to look for a port (done, past its last call).
    Next,
    /// Holds port `p`'s lock, waiting for the host to finish its last, posted packet.
    Behind(u8),
    /// Its request is on port `p`; it waits for the answer there.
    Waiting(u8),
    /// Parked on its wake word; `true` once its call's answer is in.
    Parked(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lane {
    /// Its current call.
    pc: u8,
    /// Its request is the collection of its parked call's answer.
    collecting: bool,
    /// Its print came back unsent (it met a held-back port): it goes again as a
    /// [`Call::Write`].
    unsent: bool,
    at: At,
}

/// A packet published and not yet taken by its consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Packet {
    /// Thread `t`'s current call.
    Call(u8),
    /// Thread `t`'s collection.
    Collect(u8),
    /// A posted print, its thread gone on.
    Posted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Port {
    /// The lock word is held.
    locked: bool,
    pending: Option<Packet>,
    /// The host marked its posted packet held back.
    held: bool,
}

/// Where a handed-off call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum On {
    /// Queued for the workers.
    Queue,
    Worker,
    Waiter,
    /// On consumer `k` itself.
    Consumer(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Job {
    thread: u8,
    on: On,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Run {
    Running,
    /// The end's drain gave stdout every held-back piece (c839d74); the process exits
    /// at any step.
    Drained,
    Exited,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    lanes: Vec<Lane>,
    ports: Vec<Port>,
    /// In queue order.
    jobs: Vec<Job>,
    /// Workers started.
    workers: u8,
    /// Units of output held unwritten.
    out: u8,
    stalled: bool,
    /// FIFO ends opened ([`Call::fifo_bit`]).
    opened: u16,
    run: Run,
}

/// A request, for traces.
#[derive(Clone, Copy, Debug)]
enum What {
    Call(Call),
    Collect,
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Call(c) => write!(f, "{c}"),
            What::Collect => write!(f, "collection"),
        }
    }
}

/// A step, for traces.
#[derive(Clone, Copy, Debug)]
enum Action {
    Publishes(u8, u8, What),
    Behind(u8, u8),
    LeavesHeld(u8, u8),
    MeetsHeld(u8),
    GivesUp(u8, u8),
    Answers(u8, u8, What),
    TakesPosted(u8),
    HoldsBack(u8),
    HandsOff(u8, u8, On),
    WorkerTakes(u8),
    StartsWorker,
    WorkerLeaves,
    Returns(u8, Call),
    Parks(u8),
    Wakes(u8),
    Reads,
    Stalls,
    Drains,
    Exits,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Publishes(t, p, w) => write!(f, "thread {t}: takes port {p}, its {w}"),
            Action::Behind(t, p) => write!(
                f,
                "thread {t}: takes port {p}'s lock, waits for its posted packet"
            ),
            Action::LeavesHeld(t, p) => {
                write!(f, "thread {t}: sees port {p} held back, lets it go")
            }
            Action::MeetsHeld(t) => write!(
                f,
                "thread {t}: met a held-back port, its print goes again as a waiting write"
            ),
            Action::GivesUp(t, p) => write!(f, "thread {t}: gives up waiting on port {p}"),
            Action::Answers(p, t, w) => {
                write!(f, "consumer: answers thread {t}'s {w} on port {p}")
            }
            Action::TakesPosted(p) => write!(f, "consumer: takes port {p}'s posted print"),
            Action::HoldsBack(p) => write!(
                f,
                "consumer: no room, leaves port {p}'s posted print there, marked held back"
            ),
            Action::HandsOff(p, t, on) => {
                let to = match on {
                    On::Queue => "to the workers' queue",
                    On::Worker => "to a worker",
                    On::Waiter => "to a waiter of its own",
                    On::Consumer(_) => "to nobody: the queue is full, the consumer runs it",
                };
                write!(f, "consumer: hands thread {t}'s call on port {p} {to}")
            }
            Action::WorkerTakes(t) => write!(f, "pool: a worker takes thread {t}'s call"),
            Action::StartsWorker => write!(
                f,
                "pool: the first job queued has waited with no worker idle, starts a worker"
            ),
            Action::WorkerLeaves => write!(f, "pool: a worker past the base, idle, leaves"),
            Action::Returns(t, c) => write!(f, "pool: thread {t}'s {c} returns"),
            Action::Parks(t) => write!(f, "host: parks thread {t}'s call, frees its port"),
            Action::Wakes(t) => write!(f, "thread {t}: its wake word is set"),
            Action::Reads => write!(f, "reader: takes a unit of output"),
            Action::Stalls => write!(f, "reader: stops reading for good"),
            Action::Drains => write!(
                f,
                "end: every thread done; the drain gives stdout what is held back"
            ),
            Action::Exits => write!(f, "end: the process exits"),
        }
    }
}

/// A configuration made ready to explore.
struct Resources {
    threads: Vec<(u8, Vec<Call>)>,
    /// Ports that are not continuation ports (the first ones).
    normal: u8,
    ports: u8,
    consumers: u8,
    workers: u8,
    /// Workers the c839d74 pool starts at most.
    max_workers: u8,
    queue: u8,
    bound: u8,
    stalls: bool,
    rules: Rules,
}

impl Resources {
    fn new(c: &ResourceConfig) -> Resources {
        let continuation = u8::from(c.ports >= 2);
        let normal = c.ports - continuation;
        assert!(normal >= 1 && c.consumers >= 1 && c.workers >= 1 && c.bound >= 1);
        assert!(
            c.rules.search != Search::SkipsHeldOrContinues || continuation == 1,
            "taking the continuation port needs one"
        );
        assert!(c.threads.iter().all(|(home, _)| *home < normal));
        assert!(c.threads.len() <= 8);
        Resources {
            threads: c.threads.clone(),
            normal,
            ports: c.ports,
            consumers: c.consumers,
            workers: c.workers,
            max_workers: c.ports.max(c.workers),
            queue: c.queue,
            bound: c.bound,
            stalls: c.stalls,
            rules: c.rules,
        }
    }

    /// Thread `t`'s current call, if it has one left (a print that came back unsent
    /// goes as a write that waits).
    fn call(&self, s: &State, t: usize) -> Option<Call> {
        let lane = s.lanes[t];
        match self.threads[t].1.get(lane.pc as usize).copied() {
            Some(Call::Print) if lane.unsent => Some(Call::Write),
            call => call,
        }
    }

    /// Thread `t`'s current request, if it is not done.
    fn request(&self, s: &State, t: usize) -> Option<What> {
        if s.lanes[t].collecting {
            return Some(What::Collect);
        }
        self.call(s, t).map(What::Call)
    }

    /// Whether FIFO end `c` is open or inside its open on some thread.
    fn end_there(&self, s: &State, c: Call) -> bool {
        s.opened & c.fifo_bit().unwrap_or(0) != 0
            || s.jobs
                .iter()
                .any(|j| j.on != On::Queue && self.call(s, j.thread as usize) == Some(c))
    }

    /// Whether a call that never returns runs.
    fn hangs(&self, s: &State) -> bool {
        s.jobs
            .iter()
            .any(|j| j.on != On::Queue && self.call(s, j.thread as usize) == Some(Call::HungRead))
    }

    /// Whether thread `t`'s request needs only the host to end (a write, once stdout
    /// has room; a FIFO's open, once its other end is there): its waiting can only be
    /// for a resource something else holds.
    fn needs_only_host(&self, s: &State, t: usize) -> bool {
        match self.request(s, t) {
            Some(What::Collect | What::Call(Call::Stat | Call::Ping)) => true,
            Some(What::Call(Call::Write)) => s.out < self.bound,
            Some(What::Call(c @ (Call::FifoOpenRead(_) | Call::FifoOpenWrite(_)))) => {
                self.end_there(s, c.other_end().expect("a FIFO's open"))
            }
            _ => false,
        }
    }
}

/// The worst of `holders`: a call that never returns, then output, then waiting calls.
fn worst(holders: impl Iterator<Item = Holder>) -> Holder {
    let rank = |h: &Holder| match h {
        Holder::WaitingCalls => 0,
        Holder::StalledOutput => 1,
        Holder::HungCall => 2,
    };
    holders.max_by_key(rank).unwrap_or(Holder::WaitingCalls)
}

impl Resources {
    /// What holds the resource thread `t`'s request waits for, with no step possible:
    /// the ports it may take, its consumer, or the workers.
    fn holder(&self, s: &State, t: usize) -> Holder {
        match s.lanes[t].at {
            At::Behind(p) => self.pending_holder(s, p),
            At::Next => {
                let continues = self.rules.search == Search::SkipsHeldOrContinues;
                let ports = self.normal + u8::from(continues);
                worst((0..ports).map(|p| self.port_holder(s, p)))
            }
            At::Waiting(p) if s.ports[p as usize].pending.is_some() => self.pending_holder(s, p),
            // Its call is queued for the workers.
            At::Waiting(_) | At::Parked(_) => self.workers_holder(s),
        }
    }

    /// What keeps port `p`'s packet from being taken: no room for its output, its
    /// consumer running a call itself, or the workers' full queue.
    fn pending_holder(&self, s: &State, p: u8) -> Holder {
        if s.out >= self.bound && matches!(s.ports[p as usize].pending, Some(Packet::Posted)) {
            return Holder::StalledOutput;
        }
        let k = p % self.consumers;
        match s.jobs.iter().find(|j| j.on == On::Consumer(k)) {
            Some(j) => self.call_holder(s, j.thread as usize),
            None => self.workers_holder(s),
        }
    }

    /// What keeps port `p`: its packet, or the call of the thread holding its lock.
    fn port_holder(&self, s: &State, p: u8) -> Holder {
        if s.ports[p as usize].pending.is_some() {
            return self.pending_holder(s, p);
        }
        let holding = (0..s.lanes.len())
            .find(|&u| matches!(s.lanes[u].at, At::Behind(q) | At::Waiting(q) if q == p));
        holding.map_or(Holder::WaitingCalls, |u| self.call_holder(s, u))
    }

    /// What thread `u`'s current call waits on.
    fn call_holder(&self, s: &State, u: usize) -> Holder {
        match self.request(s, u) {
            Some(What::Call(Call::HungRead)) => Holder::HungCall,
            Some(What::Call(Call::Print | Call::Write)) => Holder::StalledOutput,
            _ => Holder::WaitingCalls,
        }
    }

    /// What keeps every worker.
    fn workers_holder(&self, s: &State) -> Holder {
        let running = s.jobs.iter().filter(|j| j.on == On::Worker);
        worst(running.map(|j| self.call_holder(s, j.thread as usize)))
    }
}

impl Space for Resources {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        State {
            lanes: vec![
                Lane {
                    pc: 0,
                    collecting: false,
                    unsent: false,
                    at: At::Next,
                };
                self.threads.len()
            ],
            ports: vec![
                Port {
                    locked: false,
                    pending: None,
                    held: false,
                };
                self.ports as usize
            ],
            jobs: Vec::new(),
            workers: self.workers,
            out: 0,
            stalled: false,
            opened: 0,
            run: Run::Running,
        }
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next<State>)> {
        self.steps(s)
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        if s.run == Run::Exited {
            return Ok(true);
        }
        let waiting: Vec<usize> = (0..s.lanes.len())
            .filter(|&t| self.request(s, t).is_some())
            .collect();
        let hangs = self.hangs(s);
        if let Some(&t) = waiting.iter().find(|&&t| self.needs_only_host(s, t)) {
            return Err(Violation::HeldUp {
                thread: t as u8,
                by: self.holder(s, t),
            });
        }
        // Threads that wait for the stalled reader, or on a call that never returns
        // (or on a thread that does), wait as they would on Linux.
        Ok(s.stalled || hangs)
    }
}
