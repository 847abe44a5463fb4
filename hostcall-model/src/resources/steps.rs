//! Every step of [`Resources`]: the threads', the consumers', the pool's, the park
//! timer's, the reader's and the end's.

use super::{Action, At, Call, Job, On, Packet, Port, Resources, Run, Search, State, What};
use crate::Violation;
use crate::explore::Next;

type Steps = Vec<(Action, Next<State>)>;

impl Resources {
    fn skips_held(&self) -> bool {
        self.rules.search != Search::FirstFree
    }

    pub(super) fn steps(&self, s: &State) -> Steps {
        let mut out = Vec::new();
        if s.run == Run::Exited {
            return out;
        }
        for t in 0..s.lanes.len() {
            self.thread(s, t, &mut out);
        }
        for k in 0..self.consumers {
            self.consumer(s, k, &mut out);
        }
        self.pool(s, &mut out);
        self.parks(s, &mut out);
        if s.out > 0 && !s.stalled {
            let mut n = s.clone();
            n.out -= 1;
            out.push((Action::Reads, Next::State(n)));
        }
        if self.stalls && !s.stalled {
            let mut n = s.clone();
            n.stalled = true;
            out.push((Action::Stalls, Next::State(n)));
        }
        self.end(s, &mut out);
        out
    }

    /// Thread `t`'s step: it looks for a port, waits on one, or wakes.
    fn thread(&self, s: &State, t: usize, out: &mut Steps) {
        let Some(what) = self.request(s, t) else {
            return;
        };
        let tt = t as u8;
        let print = matches!(what, What::Call(Call::Print));
        match s.lanes[t].at {
            At::Next => self.acquire(s, t, what, out),
            At::Behind(p) => {
                let port = s.ports[p as usize];
                let mut n = s.clone();
                if port.pending.is_none() {
                    self.publish(&mut n, t, p, what);
                    out.push((Action::Publishes(tt, p, what), Next::State(n)));
                } else if self.skips_held() && port.held {
                    n.ports[p as usize].locked = false;
                    n.lanes[t].at = At::Next;
                    n.lanes[t].unsent = print;
                    let action = if print {
                        Action::MeetsHeld(tt)
                    } else {
                        Action::LeavesHeld(tt, p)
                    };
                    out.push((action, Next::State(n)));
                } else if !self.skips_held() && s.stalled && s.out >= self.bound {
                    // Its limit passes while the reader never comes back.
                    let v = Violation::GaveUp { thread: tt };
                    out.push((Action::GivesUp(tt, p), Next::Broken(v)));
                }
            }
            At::Waiting(_) | At::Parked(false) => {}
            At::Parked(true) => {
                let mut n = s.clone();
                n.lanes[t].collecting = true;
                n.lanes[t].at = At::Next;
                out.push((Action::Wakes(tt), Next::State(n)));
            }
        }
    }

    /// Thread `t` looks for a port for `what`, from its home port on, as its client
    /// does.
    fn acquire(&self, s: &State, t: usize, what: What, out: &mut Steps) {
        let tt = t as u8;
        let home = self.threads[t].0;
        let mut seen_held = false;
        let found = (0..self.normal)
            .map(|k| (home + k) % self.normal)
            .find(|&p| {
                let port = s.ports[p as usize];
                if port.locked {
                    return false;
                }
                if self.skips_held() && port.held {
                    seen_held = true;
                    return false;
                }
                true
            });
        let mut n = s.clone();
        if seen_held && matches!(what, What::Call(Call::Print)) {
            n.lanes[t].unsent = true;
            out.push((Action::MeetsHeld(tt), Next::State(n)));
            return;
        }
        let c = self.normal;
        let continues = self.rules.search == Search::SkipsHeldOrContinues
            && seen_held
            && !s.ports[c as usize].locked;
        let Some(p) = found.or(continues.then_some(c)) else {
            // Every port is taken (or held back): it waits, and never gives up while it
            // has seen one held back.
            return;
        };
        n.ports[p as usize].locked = true;
        if n.ports[p as usize].pending.is_some() {
            n.lanes[t].at = At::Behind(p);
            out.push((Action::Behind(tt, p), Next::State(n)));
        } else {
            self.publish(&mut n, t, p, what);
            out.push((Action::Publishes(tt, p, what), Next::State(n)));
        }
    }

    /// Thread `t` publishes `what` on port `p`, whose lock it holds; a posted print
    /// frees the lock at once and the thread goes on.
    fn publish(&self, n: &mut State, t: usize, p: u8, what: What) {
        let port = &mut n.ports[p as usize];
        port.held = false;
        match what {
            What::Call(Call::Print) => {
                port.locked = false;
                port.pending = Some(Packet::Posted);
                n.lanes[t].pc += 1;
            }
            What::Call(_) => {
                port.pending = Some(Packet::Call(t as u8));
                n.lanes[t].at = At::Waiting(p);
            }
            What::Collect => {
                port.pending = Some(Packet::Collect(t as u8));
                n.lanes[t].at = At::Waiting(p);
            }
        }
    }

    /// Thread `t`'s request is answered on port `p`: it frees the port and goes on.
    fn answered(n: &mut State, t: usize, p: u8) {
        n.ports[p as usize].locked = false;
        let lane = &mut n.lanes[t];
        lane.collecting = false;
        lane.unsent = false;
        lane.pc += 1;
        lane.at = At::Next;
    }

    /// Consumer `k`'s steps: it serves one of its ports' packets, unless it runs a job.
    fn consumer(&self, s: &State, k: u8, out: &mut Steps) {
        if s.jobs.iter().any(|j| j.on == On::Consumer(k)) {
            return;
        }
        let room = s.out < self.bound;
        for p in (k..self.ports).step_by(self.consumers as usize) {
            let Some(packet) = s.ports[p as usize].pending else {
                continue;
            };
            let mut n = s.clone();
            n.ports[p as usize].pending = None;
            match packet {
                Packet::Posted if room => {
                    n.out += 1;
                    n.ports[p as usize].held = false;
                    out.push((Action::TakesPosted(p), Next::State(n)));
                }
                Packet::Posted => {
                    if self.skips_held() && !s.ports[p as usize].held {
                        let mut n = s.clone();
                        n.ports[p as usize].held = true;
                        out.push((Action::HoldsBack(p), Next::State(n)));
                    }
                }
                Packet::Collect(t) => {
                    Resources::answered(&mut n, t as usize, p);
                    out.push((Action::Answers(p, t, What::Collect), Next::State(n)));
                }
                Packet::Call(t) => {
                    let call = self.call(s, t as usize).expect("a published call");
                    if call == Call::Ping {
                        Resources::answered(&mut n, t as usize, p);
                        out.push((Action::Answers(p, t, What::Call(call)), Next::State(n)));
                    } else if let Some(on) = self.hand_off(&mut n, k, call) {
                        n.jobs.push(Job { thread: t, on });
                        out.push((Action::HandsOff(p, t, on), Next::State(n)));
                    }
                }
            }
        }
    }

    /// Where consumer `k` hands `call` off to, the pool grown as it does; `None` while
    /// it leaves the packet on its port.
    fn hand_off(&self, n: &mut State, k: u8, call: Call) -> Option<On> {
        if self.rules.waiters && !call.only_takes_time() {
            return Some(On::Waiter);
        }
        let queued = n.jobs.iter().filter(|j| j.on == On::Queue).count() as u8;
        if queued >= self.queue && self.rules.full_queue_leaves {
            return None;
        }
        if !self.rules.waiters && call.fifo_bit().is_some() {
            // c839d74's pool counted queued jobs as busy, and started a worker for a
            // call that waits on a FIFO while none was idle.
            let busy = n
                .jobs
                .iter()
                .filter(|j| matches!(j.on, On::Queue | On::Worker));
            if busy.count() as u8 >= n.workers && n.workers < self.max_workers {
                n.workers += 1;
            }
        }
        Some(if queued >= self.queue {
            On::Consumer(k)
        } else {
            On::Queue
        })
    }

    /// The pool's steps: a worker takes the first job queued, one more worker starts
    /// for it while none is idle (today) and leaves once idle, and a call that can
    /// return does.
    fn pool(&self, s: &State, out: &mut Steps) {
        let running = s.jobs.iter().filter(|j| j.on == On::Worker).count() as u8;
        let first = s.jobs.iter().position(|j| j.on == On::Queue);
        if running < s.workers
            && let Some(i) = first
        {
            let mut n = s.clone();
            n.jobs[i].on = On::Worker;
            out.push((Action::WorkerTakes(s.jobs[i].thread), Next::State(n)));
        }
        if self.rules.replaces_stuck_workers {
            // Only while every worker runs a call and one more waits, each a GPU
            // thread's: it never starts more workers than there are GPU threads.
            if first.is_some() && running == s.workers {
                let mut n = s.clone();
                n.workers += 1;
                out.push((Action::StartsWorker, Next::State(n)));
            }
            if first.is_none() && running < s.workers && s.workers > self.workers {
                let mut n = s.clone();
                n.workers -= 1;
                out.push((Action::WorkerLeaves, Next::State(n)));
            }
        }
        for (i, job) in s.jobs.iter().enumerate() {
            if job.on == On::Queue {
                continue;
            }
            let t = job.thread as usize;
            let call = self.call(s, t).expect("a handed-off call");
            let ready = match call {
                Call::Stat => true,
                Call::HungRead => false,
                Call::FifoOpenRead(_) | Call::FifoOpenWrite(_) => {
                    self.end_there(s, call.other_end().expect("a FIFO's open"))
                }
                // c839d74's write on a consumer did not wait for room.
                Call::Write => s.out < self.bound || matches!(job.on, On::Consumer(_)),
                Call::Print | Call::Ping => unreachable!("never handed off"),
            };
            if !ready {
                continue;
            }
            let mut n = s.clone();
            n.jobs.remove(i);
            n.opened |= call.fifo_bit().unwrap_or(0);
            match n.lanes[t].at {
                At::Waiting(p) => Resources::answered(&mut n, t, p),
                At::Parked(false) => n.lanes[t].at = At::Parked(true),
                other => unreachable!("a handed-off call's thread at {other:?}"),
            }
            let action = Action::Returns(job.thread, call);
            if call == Call::Write {
                n.out += 1;
                if n.out > self.bound {
                    let v = Violation::OverBound { units: n.out };
                    out.push((action, Next::Flagged(n, v)));
                    continue;
                }
            }
            out.push((action, Next::State(n)));
        }
    }

    /// The park timer: a handed-off call still waiting on its port is answered a
    /// ticket, which frees the port; at c839d74, never one that only takes time.
    fn parks(&self, s: &State, out: &mut Steps) {
        for job in &s.jobs {
            let t = job.thread as usize;
            let At::Waiting(p) = s.lanes[t].at else {
                continue;
            };
            let call = self.call(s, t).expect("a handed-off call");
            if call.only_takes_time() && !self.rules.parks_time_calls {
                continue;
            }
            let mut n = s.clone();
            n.ports[p as usize].locked = false;
            n.lanes[t].at = At::Parked(false);
            out.push((Action::Parks(job.thread), Next::State(n)));
        }
    }

    /// The end, once every thread is done: today, the run returns once stdout has
    /// written everything printed (or its reader stalled past the limit); at c839d74,
    /// the drain gives stdout every piece held back, whatever its bound, and the process
    /// exits a fixed time later.
    fn end(&self, s: &State, out: &mut Steps) {
        if (0..s.lanes.len()).any(|t| self.request(s, t).is_some()) {
            return;
        }
        let held = s
            .ports
            .iter()
            .filter(|p| p.pending == Some(Packet::Posted))
            .count() as u8;
        let mut n = s.clone();
        match s.run {
            Run::Running if self.rules.end_waits_written => {
                if (s.out == 0 && held == 0) || s.stalled {
                    n.run = Run::Exited;
                    out.push((Action::Exits, Next::State(n)));
                }
            }
            Run::Running => {
                for p in &mut n.ports {
                    if p.pending == Some(Packet::Posted) {
                        *p = Port {
                            locked: false,
                            pending: None,
                            held: false,
                        };
                    }
                }
                n.out += held;
                n.run = Run::Drained;
                let next = if n.out > self.bound {
                    let v = Violation::OverBound { units: n.out };
                    Next::Flagged(n, v)
                } else {
                    Next::State(n)
                };
                out.push((Action::Drains, next));
            }
            Run::Drained if s.out > 0 && !s.stalled => {
                let v = Violation::OutputLost { units: s.out };
                out.push((Action::Exits, Next::Broken(v)));
            }
            Run::Drained => {
                n.run = Run::Exited;
                out.push((Action::Exits, Next::State(n)));
            }
            Run::Exited => {}
        }
    }
}
