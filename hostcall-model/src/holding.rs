//! [`HostModel::Holding`]: the runtime's server today. The consumer sweeps a
//! packet lane by lane, serving each lane itself or handing it off (a call that may
//! block: [`Config::blocking`]) as a job of its own; the port stays the packet's until
//! its last waiting lane has an answer; a handed-off lane may be parked (answered a
//! ticket, its answer collected later by a call of its own); a stop answers every call
//! `Killed`; the end of the run serves or drops what is left.
//!
//! [`Config::blocking`]: crate::Config::blocking

use crate::Violation;
use crate::model::{
    Action, Answer, Blocks, Hold, Holding, Host, HostModel, Job, MAX_LANES, Model, Next, State,
    Stop, Ticket, Token,
};

/// A lane's final answer from its handler (its request) or from a stop.
#[derive(Clone, Copy)]
enum Final {
    Result(Token),
    Killed,
}

impl Model {
    /// Every step the host can take: its consumer's, its jobs', the park timer's, a
    /// stop and the end of the run.
    pub(crate) fn holding_host(&self, s: &State, h: Holding, out: &mut Vec<(Action, Next)>) {
        self.holding_consumer(s, h, out);
        for j in 0..s.jobs.len() {
            self.holding_job(s, h, j, out);
        }
        if h.parks {
            self.parks(s, out);
        }
        if h.stop != Stop::Never && !s.stopped && s.lanes.iter().any(|l| !l.exited) {
            let mut n = s.clone();
            n.stopped = true;
            if h.stop != Stop::NewCalls {
                self.kill_handed(&mut n);
            }
            // A run that only a stop can end hangs: a deadlock, as if it could not be
            // stopped; what the stop then does is explored on. With a call that never
            // ends, that is the program's doing, and only the stop is checked.
            let next = if out.is_empty() && !self.never_ends() {
                Next::Flagged(n, Violation::Deadlock)
            } else {
                Next::State(n)
            };
            out.push((Action::Stop, next));
        }
        if !h.end_serves && !s.ended && s.lanes.iter().all(|l| l.exited) && s.host == Host::Idle {
            // The run's end drops the pool's jobs; its drain serves what was published
            // and not taken, except lanes that may block.
            let mut n = s.clone();
            n.ended = true;
            n.jobs.clear();
            out.push((Action::End, Next::State(n)));
        }
    }

    fn holding(&self) -> Holding {
        match self.host {
            HostModel::Holding(h) => h,
            _ => unreachable!("the holding host's steps"),
        }
    }

    /// The consumer: takes a packet on a port it does not hold back, then serves or
    /// hands off its lanes one step each, then stores `response` or leaves it to the
    /// last answer.
    fn holding_consumer(&self, s: &State, h: Holding, out: &mut Vec<(Action, Next)>) {
        let Host::Serving {
            port,
            seq,
            todo,
            packet,
            killing,
        } = s.host
        else {
            for p in 0..s.ports.len() {
                let pt = &s.ports[p];
                let held = s.holds.iter().any(|x| x.port as usize == p && !x.released);
                if pt.request == pt.taken || (h.hold_port && held) {
                    continue;
                }
                out.push(Model::begin_serving(s, p, s.stopped));
            }
            return;
        };
        let mut n = s.clone();
        if todo == 0 {
            n.host = Host::Idle;
            n.ports[port as usize].taken = seq;
            match self.hold_of(s, port, seq) {
                Some(k) if h.hold_port => self.done(&mut n, k),
                Some(k) => {
                    n.ports[port as usize].response = seq;
                    self.done(&mut n, k);
                }
                None => n.ports[port as usize].response = seq,
            }
            out.push((Action::HostAnswer { port, seq }, Next::State(n)));
            return;
        }
        let lane = todo.trailing_zeros() as u8;
        let bit = 1u8 << lane;
        let Host::Serving { todo: left, .. } = &mut n.host else {
            unreachable!()
        };
        *left &= !bit;
        if killing {
            n.ports[port as usize].answers[lane as usize] = Answer::Killed { seq };
            out.push((Action::Killed { port, lane }, Next::State(n)));
            return;
        }
        let t = match self.slot_request(s, port, lane, packet) {
            Ok(t) => t,
            Err(v) => {
                out.push((Action::HostServe { lane }, Next::Broken(v)));
                return;
            }
        };
        let slot = s.ports[port as usize].slots[lane as usize];
        if slot.collect {
            let i = self.index(t.who);
            n.ports[port as usize].answers[lane as usize] = match s.tickets[i] {
                Ticket::Done(r) => Answer::Done {
                    seq,
                    reply: Some(r),
                },
                Ticket::Killed => Answer::Killed { seq },
                other => unreachable!("a lane collects after its wake word, not at {other:?}"),
            };
            n.tickets[i] = Ticket::None;
            out.push((Action::Collect { port, lane }, Next::State(n)));
            return;
        }
        if self.blocks(t).is_none() {
            let action = Action::HostServe { lane };
            match self.mark_served(&mut n, t) {
                Ok(()) => {
                    n.ports[port as usize].answers[lane as usize] = if n.stopped {
                        Answer::Killed { seq }
                    } else {
                        Answer::Done {
                            seq,
                            reply: Some(t),
                        }
                    };
                    out.push((action, Next::State(n)));
                }
                Err(v) => out.push((action, Next::Broken(v))),
            }
            return;
        }
        if s.ended {
            // The drain does not serve a call that may block.
            out.push((Action::JobDropped { port, lane }, Next::State(n)));
            return;
        }
        let posted = s.ports[port as usize].posted;
        let answers = !(posted && h.posted_free);
        let k = match self.hold_of(&n, port, seq) {
            Some(k) => k,
            None => {
                n.holds.push(Hold {
                    port,
                    seq,
                    posted,
                    left: 1,
                    released: false,
                    handed: 0,
                    answered: 0,
                    parked: 0,
                    requests: [None; MAX_LANES],
                });
                n.holds.len() - 1
            }
        };
        if answers {
            n.holds[k].left += 1;
            n.holds[k].handed |= bit;
            n.holds[k].requests[lane as usize] = Some(t);
        }
        let shared = n
            .jobs
            .iter()
            .position(|j| !h.per_lane && j.port == port && j.seq == seq);
        match shared {
            Some(j) => {
                n.jobs[j].todo |= bit;
                n.jobs[j].requests[lane as usize] = Some(t);
            }
            None => {
                let mut requests = [None; MAX_LANES];
                requests[lane as usize] = Some(t);
                n.jobs.push(Job {
                    port,
                    seq,
                    todo: bit,
                    packet,
                    responded: true,
                    requests,
                    answers,
                });
            }
        }
        if h.stop == Stop::Everything && n.stopped && answers {
            // A stop that came after the sweep began may have looked at the handed-off
            // lanes before this one: the consumer answers it itself.
            self.finish(&mut n, k, lane, Final::Killed);
        }
        out.push((Action::HandOff { port, lane }, Next::State(n)));
    }

    /// The hold of packet `seq` on `port`, if some of its lanes were handed off.
    fn hold_of(&self, s: &State, port: u8, seq: u8) -> Option<usize> {
        s.holds.iter().position(|x| x.port == port && x.seq == seq)
    }

    /// The next step of job `j`: its next lane served and answered once its call can
    /// end, or not served at all once the run is being stopped.
    fn holding_job(&self, s: &State, h: Holding, j: usize, out: &mut Vec<(Action, Next)>) {
        let job = s.jobs[j];
        let lane = job.todo.trailing_zeros() as u8;
        let (port, seq) = (job.port, job.seq);
        let mut n = s.clone();
        n.jobs[j].todo &= !(1 << lane);
        if n.jobs[j].todo == 0 {
            n.jobs.remove(j);
        }
        if s.stopped && h.stop != Stop::NewCalls {
            out.push((Action::JobDropped { port, lane }, Next::State(n)));
            return;
        }
        let t = job.requests[lane as usize].expect("a handed-off lane's request");
        let ready = match self.blocks(t) {
            None | Some(Blocks::Later) => true,
            Some(Blocks::Until(u)) => s.served & self.token_bit(u) != 0,
            Some(Blocks::Forever) => false,
        };
        if !ready {
            return;
        }
        let action = Action::JobAnswer { port, lane };
        if let Err(v) = self.mark_served(&mut n, t) {
            out.push((action, Next::Broken(v)));
            return;
        }
        if job.answers {
            let k = self.hold_of(&n, port, seq).expect("a lane answered holds");
            let answer = if n.stopped {
                Final::Killed
            } else {
                Final::Result(t)
            };
            self.finish(&mut n, k, lane, answer);
        }
        out.push((action, Next::State(n)));
    }

    /// The park timer: a lane handed off and still waiting for its answer on the port
    /// is answered a ticket there.
    fn parks(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        for (k, x) in s.holds.iter().enumerate() {
            let waiting = x.handed & !x.answered & !x.parked;
            for lane in (0..MAX_LANES as u8).filter(|l| waiting & (1 << l) != 0) {
                let t = x.requests[lane as usize].expect("a handed-off lane's request");
                let mut n = s.clone();
                n.tickets[self.index(t.who)] = Ticket::Waiting(t);
                n.holds[k].parked |= 1 << lane;
                n.ports[x.port as usize].answers[lane as usize] = Answer::Parked { seq: x.seq };
                self.done(&mut n, k);
                let action = Action::Park { port: x.port, lane };
                out.push((action, Next::State(n)));
            }
        }
    }

    /// A stop: every handed-off lane without its final answer is answered `Killed`, on
    /// its port or in its ticket, and every ticket still waiting is.
    fn kill_handed(&self, n: &mut State) {
        let lanes: Vec<(u8, u8, u8)> = n
            .holds
            .iter()
            .flat_map(|x| {
                let left = x.handed & !x.answered;
                (0..MAX_LANES as u8)
                    .filter(move |l| left & (1 << l) != 0)
                    .map(move |l| (x.port, x.seq, l))
            })
            .collect();
        for (port, seq, lane) in lanes {
            let k = self.hold_of(n, port, seq).expect("held until answered");
            self.finish(n, k, lane, Final::Killed);
        }
        for t in &mut n.tickets {
            if matches!(t, Ticket::Waiting(_)) {
                *t = Ticket::Killed;
            }
        }
    }

    /// Gives lane `lane` of hold `k` its final answer, once: on its port if it waits
    /// there, in its ticket if it was parked.
    fn finish(&self, n: &mut State, k: usize, lane: u8, answer: Final) {
        let bit = 1 << lane;
        let x = n.holds[k];
        if x.answered & bit != 0 {
            return;
        }
        n.holds[k].answered |= bit;
        if x.parked & bit != 0 {
            let t = x.requests[lane as usize].expect("a parked lane's request");
            n.tickets[self.index(t.who)] = match answer {
                Final::Result(t) => Ticket::Done(t),
                Final::Killed => Ticket::Killed,
            };
            self.forget(n, k);
            return;
        }
        let seq = x.seq;
        n.ports[x.port as usize].answers[lane as usize] = match answer {
            Final::Result(t) => Answer::Done {
                seq,
                reply: Some(t),
            },
            Final::Killed => Answer::Killed { seq },
        };
        self.done(n, k);
    }

    /// One of hold `k`'s answers on the port is written (or the consumer's share is
    /// done): the last stores `response` (when the port is held) and frees the port.
    fn done(&self, n: &mut State, k: usize) {
        n.holds[k].left -= 1;
        if n.holds[k].left == 0 {
            if self.holding().hold_port {
                let x = n.holds[k];
                n.ports[x.port as usize].response = x.seq;
            }
            n.holds[k].released = true;
        }
        self.forget(n, k);
    }

    /// Drops hold `k` once its port is free and every lane handed off has its answer.
    fn forget(&self, n: &mut State, k: usize) {
        let x = n.holds[k];
        if x.released && x.answered == x.handed {
            n.holds.remove(k);
        }
    }
}
