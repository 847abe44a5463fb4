//! The hand-off of threads to GPU threads held back at launch (`hostcall_abi::spawn`,
//! `hostcall_client::spawn::Slot`): creators give threads to parked workers and join or
//! detach them, workers run them and end them, or retire after a thread that panicked
//! (the GPU thread exits); at the end (once creator 0, the thread that calls `exit`, is
//! done) the ending thread announces it and waits for the count of threads gone to reach
//! every other thread, while each parked worker and each thread that waits (a join, a
//! search for a worker, a futex in a running thread) sees the announcement at its next
//! look, marks its word `CLOSED`, counts itself gone and exits (libc-hostcall's
//! `ending`), or the ending thread's wait runs out while a thread still runs and it
//! traps; workers that may not have parked yet park first. Every interleaving of the steps is
//! explored; each load, store and compare-exchange of a hand-off word is a step (but a
//! join's load of `DONE` and its store of `IDLE`, between which nobody else may act on
//! the slot), and memory is sequentially consistent (the acquire/release pairs are
//! stated in `hostcall_abi::spawn`).
//!
//! Invariants: each thread given runs once, reading the start routine its creator wrote;
//! `join` returns only after its thread ended, and never fails for a thread it may join;
//! no slot is given again while a creator can still join its thread, nor ever once its
//! worker retired; every run ends with every thread run (or refused, `EAGAIN`, when every
//! worker retired) and every worker parked or retired; with the end, the count reaches
//! the other threads only once every worker has exited (or retired), and it reaches them
//! unless a thread still runs (then the program traps, which stops them all): a worker
//! left waiting would keep the launch alive, and a trap costs a third of a second.

use std::fmt;

use crate::explore::{Next, Space, explore};
use crate::{Report, Violation};

/// The states of a hand-off word (as `hostcall_abi::spawn`).
const IDLE: u8 = 1;
const CLAIMED: u8 = 2;
const RUNNING: u8 = 3;
const DETACHED: u8 = 4;
const DONE: u8 = 5;
const DONE_LAST: u8 = 6;
const RETIRED: u8 = 7;
const CLOSED: u8 = 8;
/// `NOT_A_WORKER`: the zeroed word, before the worker's first park.
const UNPARKED: u8 = 0;

/// What a creator does with each thread it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Then {
    /// Joins it.
    Join,
    /// Detaches it.
    Detach,
}

/// Workers and creators: each creator starts its threads in turn, each followed by
/// what it does with it.
#[derive(Clone, Debug)]
pub struct SpawnConfig {
    /// Held-back GPU threads.
    pub workers: u8,
    /// Per creator, its threads in order.
    pub creators: Vec<Vec<Then>>,
    /// Whether `join` waits for `DONE` (`Slot::join`); `false` is a join that frees the
    /// slot once the thread has started, for the model to show what that breaks.
    pub join_waits: bool,
    /// Whether a thread may end in a panic, after which its worker retires.
    pub panics: bool,
    /// Whether a creator may fail to ready a claimed worker (no heap left for its frame
    /// stack): it stores `IDLE` back with a compare-exchange from `CLAIMED`, and the
    /// spawn is refused.
    pub ready_may_fail: bool,
    /// Whether the program ends once creator 0 is done (the thread that calls `exit`;
    /// the other creators are threads still running, which leave at their waits): it
    /// announces the end, waits for the count of threads gone, and traps if a thread
    /// runs on.
    pub ends: bool,
    /// Whether workers start unparked (the launch's first moments), so the end may be
    /// announced before a park.
    pub late_start: bool,
    /// Whether a parked worker looks for the end between two looks at its word
    /// (`Slot::wait_for_thread`'s `between`); `false` models one that waits for a
    /// thread only, for the model to show the worker it strands.
    pub park_sees_end: bool,
    /// How a joiner treats its thread's slot found `CLOSED` (the thread left at the
    /// end): `true` leaves too (`Slot::join`'s `between`); `false` reports no thread, as
    /// a join that did not know the end would (std would panic: "failed to join").
    pub join_leaves: bool,
}

/// Explores every interleaving of `config` (see the module's documentation).
pub fn check_spawn(config: &SpawnConfig) -> Report {
    explore(&Spawn(config.clone()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Worker {
    /// Started, its first park to come.
    Unparked,
    /// Parked, waiting for a thread.
    Waiting,
    /// Running thread `task`.
    Running(u8),
    /// Its thread (and the destructors) done, about to end it.
    Ending(u8),
    /// Retired after a thread that panicked: the GPU thread has exited.
    Gone,
    /// Saw the end, closed its slot and exited.
    Exited,
}

/// The program's end, by its last thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum End {
    /// Not yet: some creator is not done.
    Pending,
    /// Announced; waiting for the count of threads gone.
    Announced,
    /// The count reached every other thread: the last thread exits.
    Closed,
    /// Its wait ran out while a thread still ran: the program traps, which stops every
    /// GPU thread.
    Trapped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Creator {
    /// About to start its next thread: looks for an idle slot.
    Looking,
    /// Saw slot `s` idle; its compare-exchange comes next.
    SawIdle(u8),
    /// Claimed slot `s`: writes the start routine, then publishes `RUNNING`.
    Claimed(u8),
    /// Its current thread runs on slot `s`: joins or detaches it next.
    Holding(u8),
    /// Every thread started and joined or detached.
    Done,
    /// Saw the program's end where it waited (a join, a search for a worker) and left.
    Left,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    words: Vec<u8>,
    /// The thread written into each slot (its start routine and argument).
    given: Vec<Option<u8>>,
    workers: Vec<Worker>,
    creators: Vec<(Creator, u8)>,
    /// Per thread: runs, and whether it ended.
    runs: Vec<u8>,
    ended: Vec<bool>,
    /// Per thread: refused by `pthread_create` (every worker retired).
    refused: Vec<bool>,
    end: End,
    /// Threads that counted themselves gone (each worker that exited or retired, each
    /// other creator done or left).
    gone: u8,
}

/// A step, for traces.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Action {
    Look(u8, u8),
    Claim(u8, u8),
    Unclaim(u8, u8),
    Publish(u8, u8),
    Join(u8, u8),
    Detach(u8, u8),
    Take(u8),
    Run(u8),
    End(u8),
    Retire(u8),
    Refuse(u8),
    Park(u8),
    Exit(u8),
    Announce,
    AllGone,
    Trap,
    Leave(u8),
    CreatorLeaves(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Look(c, s) => write!(f, "creator {c} sees slot {s} idle"),
            Action::Claim(c, s) => write!(f, "creator {c} claims slot {s}"),
            Action::Unclaim(c, s) => {
                write!(
                    f,
                    "creator {c} cannot ready slot {s}'s worker: idle again, EAGAIN"
                )
            }
            Action::Publish(c, s) => {
                write!(f, "creator {c} writes its thread, RUNNING on slot {s}")
            }
            Action::Join(c, s) => write!(f, "creator {c} joins slot {s}"),
            Action::Detach(c, s) => write!(f, "creator {c} detaches slot {s}"),
            Action::Take(w) => write!(f, "worker {w} takes its thread"),
            Action::Run(w) => write!(f, "worker {w} runs it"),
            Action::End(w) => write!(f, "worker {w} ends it"),
            Action::Retire(w) => write!(f, "worker {w} ends it in a panic and retires"),
            Action::Refuse(c) => write!(f, "creator {c} finds every worker retired (EAGAIN)"),
            Action::Park(w) => write!(f, "worker {w} parks for the first time"),
            Action::Exit(w) => write!(f, "parked worker {w} sees the end and exits"),
            Action::Announce => write!(f, "the program's end is announced"),
            Action::AllGone => write!(f, "every other thread counted itself gone"),
            Action::Trap => write!(f, "a thread still runs: the program traps"),
            Action::Leave(w) => write!(f, "worker {w}'s thread sees the end and leaves"),
            Action::CreatorLeaves(c) => {
                write!(f, "creator {c} sees the end where it waits and leaves")
            }
        }
    }
}

struct Spawn(SpawnConfig);

impl Spawn {
    /// The thread id of creator `c`'s `k`-th thread.
    fn task(&self, c: usize, k: u8) -> u8 {
        (self.0.creators[..c].iter().map(Vec::len).sum::<usize>() + k as usize) as u8
    }

    fn tasks(&self) -> usize {
        self.0.creators.iter().map(Vec::len).sum()
    }
}

impl Spawn {
    /// Worker `w` runs its thread to its end (one step).
    fn run(&self, out: &mut Vec<(Action, Next<State>)>, n: &State, w: usize) {
        let Worker::Running(task) = n.workers[w] else {
            return;
        };
        let mut n = n.clone();
        n.runs[task as usize] += 1;
        n.ended[task as usize] = true;
        n.workers[w] = Worker::Ending(task);
        let next = if n.runs[task as usize] > 1 {
            Next::Broken(Violation::RunTwice { thread: task })
        } else {
            Next::State(n)
        };
        out.push((Action::Run(w as u8), next));
    }

    /// The threads the ending thread waits for: every worker and every other creator.
    fn others(&self) -> u8 {
        self.0.workers + self.0.creators.len().saturating_sub(1) as u8
    }

    /// The end's next steps, once creator 0 is done: the announcement; then, once the
    /// count reaches the other threads, the ending thread's exit, or, while a thread
    /// still runs (a worker's, or another creator that is not waiting), the trap when
    /// its wait runs out.
    fn end_steps(&self, s: &State, out: &mut Vec<(Action, Next<State>)>) {
        let exiting = s.creators.first().is_none_or(|&(p, _)| p == Creator::Done);
        let mut n = s.clone();
        match s.end {
            End::Pending if self.0.ends && exiting => {
                n.end = End::Announced;
                out.push((Action::Announce, Next::State(n)));
            }
            End::Announced if s.gone >= self.others() => {
                // Past this exit nothing can stop a thread: a worker not gone yet would
                // keep the launch alive for as long as its thread runs.
                let next = match (0..s.workers.len())
                    .find(|&w| !matches!(s.workers[w], Worker::Exited | Worker::Gone))
                {
                    Some(w) => Next::Broken(Violation::Stranded { worker: w as u8 }),
                    None => {
                        n.end = End::Closed;
                        Next::State(n)
                    }
                };
                out.push((Action::AllGone, next));
            }
            End::Announced => {
                let worker_runs =
                    (s.workers.iter()).any(|w| matches!(w, Worker::Running(_) | Worker::Ending(_)));
                let creator_runs = (s.creators.iter().skip(1))
                    .any(|&(p, _)| matches!(p, Creator::SawIdle(_) | Creator::Claimed(_)));
                if worker_runs || creator_runs {
                    n.end = End::Trapped;
                    out.push((Action::Trap, Next::State(n)));
                }
            }
            _ => {}
        }
    }

    /// With the end: finished once the program trapped, or the ending thread exited (with
    /// every worker gone, which its step checks); a worker still waiting when nothing
    /// else can move would keep the launch alive.
    fn ended(&self, s: &State) -> Result<bool, Violation> {
        let waiting = (0..s.workers.len())
            .find(|&w| matches!(s.workers[w], Worker::Waiting | Worker::Unparked));
        match (s.end, waiting) {
            (End::Trapped | End::Closed, _) => Ok(true),
            (End::Announced, Some(w)) => Err(Violation::Stranded { worker: w as u8 }),
            (End::Pending | End::Announced, _) => Ok(false),
        }
    }
}

impl Space for Spawn {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        let w = self.0.workers as usize;
        State {
            // Workers start parked (the model begins after each has parked once), or,
            // with `late_start`, about to park.
            words: vec![if self.0.late_start { UNPARKED } else { IDLE }; w],
            given: vec![None; w],
            workers: vec![
                if self.0.late_start {
                    Worker::Unparked
                } else {
                    Worker::Waiting
                };
                w
            ],
            creators: self
                .0
                .creators
                .iter()
                .map(|threads| {
                    if threads.is_empty() {
                        (Creator::Done, 0)
                    } else {
                        (Creator::Looking, 0)
                    }
                })
                .collect(),
            runs: vec![0; self.tasks()],
            ended: vec![false; self.tasks()],
            refused: vec![false; self.tasks()],
            end: End::Pending,
            gone: 0,
        }
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next<State>)> {
        let mut out = Vec::new();
        let announced = s.end != End::Pending;
        for (c, &(phase, k)) in s.creators.iter().enumerate() {
            let ci = c as u8;
            let leave = || {
                let mut n = s.clone();
                n.creators[c].0 = Creator::Left;
                n.gone += 1;
                (Action::CreatorLeaves(ci), Next::State(n))
            };
            // Creator `c` moves on to its next thread, or is done (and, unless it is the
            // ending thread, counts itself gone: its GPU thread parks and leaves).
            let advance = |n: &mut State| {
                n.creators[c] = if k as usize + 1 == self.0.creators[c].len() {
                    n.gone += u8::from(c != 0);
                    (Creator::Done, k + 1)
                } else {
                    (Creator::Looking, k + 1)
                };
            };
            match phase {
                Creator::Done | Creator::Left => {}
                Creator::Looking => {
                    // pthread_create, finding no idle worker once the end is announced.
                    if announced && !s.words.contains(&IDLE) {
                        out.push(leave());
                    }
                    if s.words.iter().all(|&w| w == RETIRED) {
                        let mut n = s.clone();
                        n.refused[self.task(c, k) as usize] = true;
                        advance(&mut n);
                        out.push((Action::Refuse(ci), Next::State(n)));
                    }
                    for slot in 0..s.words.len() {
                        if s.words[slot] == IDLE {
                            let mut n = s.clone();
                            n.creators[c].0 = Creator::SawIdle(slot as u8);
                            out.push((Action::Look(ci, slot as u8), Next::State(n)));
                        }
                    }
                }
                Creator::SawIdle(slot) => {
                    let mut n = s.clone();
                    if n.words[slot as usize] == IDLE {
                        n.words[slot as usize] = CLAIMED;
                        n.creators[c].0 = Creator::Claimed(slot);
                        // A creator holding a joinable thread on this slot must not lose it.
                        let held = s.creators.iter().enumerate().any(|(o, &(p, _))| {
                            o != c
                                && p == Creator::Holding(slot)
                                && self.0.creators[o][s.creators[o].1 as usize] == Then::Join
                        });
                        let next = if s.workers[slot as usize] == Worker::Gone {
                            Next::Broken(Violation::ThreadLost {
                                thread: self.task(c, k),
                            })
                        } else if held {
                            Next::Broken(Violation::HandleReused { slot })
                        } else {
                            Next::State(n)
                        };
                        out.push((Action::Claim(ci, slot), next));
                    } else {
                        n.creators[c].0 = Creator::Looking;
                        out.push((Action::Claim(ci, slot), Next::State(n)));
                    }
                }
                Creator::Claimed(slot) => {
                    if self.0.ready_may_fail {
                        let mut r = s.clone();
                        if r.words[slot as usize] == CLAIMED {
                            r.words[slot as usize] = IDLE;
                        }
                        r.refused[self.task(c, k) as usize] = true;
                        advance(&mut r);
                        out.push((Action::Unclaim(ci, slot), Next::State(r)));
                    }
                    let mut n = s.clone();
                    n.given[slot as usize] = Some(self.task(c, k));
                    n.words[slot as usize] = RUNNING;
                    n.creators[c].0 = Creator::Holding(slot);
                    out.push((Action::Publish(ci, slot), Next::State(n)));
                }
                Creator::Holding(slot) => {
                    let task = self.task(c, k);
                    let word = s.words[slot as usize];
                    let then = self.0.creators[c][k as usize];
                    let mut n = s.clone();
                    match then {
                        Then::Join if word == CLOSED => {
                            if self.0.join_leaves {
                                out.push(leave());
                            } else {
                                out.push((
                                    Action::Join(ci, slot),
                                    Next::Broken(Violation::JoinFailed { thread: task }),
                                ));
                            }
                        }
                        Then::Join => {
                            let done = word == DONE || word == DONE_LAST;
                            let ready = if self.0.join_waits {
                                done
                            } else {
                                word == RUNNING || done
                            };
                            if !ready && word == RUNNING {
                                // A look at the end between two looks at the word.
                                if announced && self.0.join_leaves {
                                    out.push(leave());
                                }
                                continue;
                            }
                            let next = if !ready {
                                Next::Broken(Violation::JoinFailed { thread: task })
                            } else if !s.ended[task as usize] {
                                Next::Broken(Violation::JoinedEarly { thread: task })
                            } else {
                                n.words[slot as usize] =
                                    if word == DONE_LAST { RETIRED } else { IDLE };
                                advance(&mut n);
                                Next::State(n)
                            };
                            out.push((Action::Join(ci, slot), next));
                        }
                        Then::Detach => {
                            match word {
                                RUNNING => n.words[slot as usize] = DETACHED,
                                DONE => n.words[slot as usize] = IDLE,
                                DONE_LAST => n.words[slot as usize] = RETIRED,
                                // The thread left at the end: the detach's ESRCH is
                                // ignored (std's handle drop), and the creator goes on.
                                CLOSED => {}
                                _ => {
                                    out.push((
                                        Action::Detach(ci, slot),
                                        Next::Broken(Violation::JoinFailed { thread: task }),
                                    ));
                                    continue;
                                }
                            }
                            advance(&mut n);
                            out.push((Action::Detach(ci, slot), Next::State(n)));
                        }
                    }
                }
            }
        }
        for (w, &phase) in s.workers.iter().enumerate() {
            let wi = w as u8;
            let mut n = s.clone();
            match phase {
                Worker::Unparked => {
                    n.words[w] = IDLE;
                    n.workers[w] = Worker::Waiting;
                    out.push((Action::Park(wi), Next::State(n)));
                }
                Worker::Waiting => {
                    if announced && self.0.park_sees_end {
                        let mut l = n.clone();
                        l.words[w] = CLOSED;
                        l.workers[w] = Worker::Exited;
                        l.gone += 1;
                        out.push((Action::Exit(wi), Next::State(l)));
                    }
                    if !matches!(s.words[w], RUNNING | DETACHED) {
                        continue;
                    }
                    let Some(task) = s.given[w] else {
                        out.push((
                            Action::Take(wi),
                            Next::Broken(Violation::ThreadLost { thread: u8::MAX }),
                        ));
                        continue;
                    };
                    n.workers[w] = Worker::Running(task);
                    out.push((Action::Take(wi), Next::State(n)));
                }
                Worker::Running(_) if s.end != End::Pending => {
                    // A look at the end (a futex, a join, a sleep): the thread leaves.
                    let mut l = n.clone();
                    l.words[w] = CLOSED;
                    l.workers[w] = Worker::Exited;
                    l.gone += 1;
                    out.push((Action::Leave(wi), Next::State(l)));
                    self.run(&mut out, &n, w);
                }
                Worker::Running(_) => self.run(&mut out, &n, w),
                Worker::Ending(_) => {
                    if self.0.panics {
                        let mut r = n.clone();
                        r.words[w] = if s.words[w] == RUNNING {
                            DONE_LAST
                        } else {
                            RETIRED
                        };
                        r.given[w] = None;
                        r.workers[w] = Worker::Gone;
                        r.gone += 1;
                        out.push((Action::Retire(wi), Next::State(r)));
                    }
                    n.words[w] = if s.words[w] == RUNNING { DONE } else { IDLE };
                    n.given[w] = None;
                    n.workers[w] = Worker::Waiting;
                    out.push((Action::End(wi), Next::State(n)));
                }
                Worker::Gone | Worker::Exited => {}
            }
        }
        self.end_steps(s, &mut out);
        out
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        if self.0.ends {
            return self.ended(s);
        }
        if let Some(t) = (0..s.runs.len()).find(|&t| s.runs[t] == 0 && !s.refused[t]) {
            let done = s.creators.iter().all(|&(p, _)| p == Creator::Done);
            return if done {
                Err(Violation::ThreadLost { thread: t as u8 })
            } else {
                Ok(false)
            };
        }
        Ok(s.creators.iter().all(|&(p, _)| p == Creator::Done)
            && s.workers.iter().zip(&s.words).all(|(&w, &word)| {
                matches!((w, word), (Worker::Waiting, IDLE) | (Worker::Gone, RETIRED))
            }))
    }
}
