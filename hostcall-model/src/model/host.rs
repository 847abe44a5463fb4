//! The host's steps: the consumer, the pool's jobs, serving a slot and marking it
//! served.

use super::*;
use crate::violation::Violation;

impl Model {
    pub(super) fn host_steps(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        match self.host {
            HostModel::Atomic => self.atomic_host(s, out),
            HostModel::Pooled {
                response_at_handover,
            } => {
                self.consumer(s, response_at_handover, out);
                for j in 0..s.jobs.len() {
                    self.pool_job(s, j, out);
                }
            }
            HostModel::Holding(h) => self.holding_host(s, h, out),
        }
    }

    /// The consumer's step that begins serving port `p`'s packet, every lane of it to do
    /// (`killing`: the run has stopped, so each is answered killed).
    pub(crate) fn begin_serving(s: &State, p: usize, killing: bool) -> (Action, Next) {
        let port = &s.ports[p];
        let (seq, mask) = (port.request, port.mask);
        let mut n = s.clone();
        n.host = Host::Serving {
            port: p as u8,
            seq,
            todo: mask,
            packet: port.packet,
            killing,
        };
        let action = Action::HostBegin {
            port: p as u8,
            seq,
            mask,
        };
        (action, Next::State(n))
    }

    /// The consumer's step that answers port `port`'s packet `seq`, every lane of it
    /// served: `response` stored (and `taken`, by a consumer that keeps its own record
    /// of what it took), the consumer idle.
    fn answer_packet(s: &State, port: u8, seq: u8, record_taken: bool) -> (Action, Next) {
        let mut n = s.clone();
        n.ports[port as usize].response = seq;
        if record_taken {
            n.ports[port as usize].taken = seq;
        }
        n.host = Host::Idle;
        (Action::HostAnswer { port, seq }, Next::State(n))
    }

    /// The consumer's step while it serves a packet: its next lane, or, every lane
    /// served, the packet's answer (`record_taken` as for [`Model::answer_packet`]).
    fn serving_step(&self, s: &State, record_taken: bool, out: &mut Vec<(Action, Next)>) {
        if let Host::Serving {
            port,
            seq,
            todo,
            packet,
            ..
        } = s.host
        {
            if todo == 0 {
                out.push(Model::answer_packet(s, port, seq, record_taken));
            } else {
                self.host_serve(s, (port, seq), todo, packet, out);
            }
        }
    }

    /// A port with a request not yet answered (by the header).
    pub(super) fn published(&self, s: &State) -> impl Iterator<Item = usize> {
        (0..s.ports.len()).filter(move |&p| s.ports[p].request != s.ports[p].response)
    }

    pub(super) fn atomic_host(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        match s.host {
            Host::Idle => {
                for p in self.published(s) {
                    out.push(Model::begin_serving(s, p, false));
                }
            }
            Host::Serving { .. } => self.serving_step(s, false, out),
        }
    }

    /// The runtime's consumer before lanes were handed off one job each (600ca0b): a doorbell other than its own record is
    /// a new packet; posted packets it serves itself, waiting ones go to the pool.
    pub(super) fn consumer(
        &self,
        s: &State,
        response_at_handover: bool,
        out: &mut Vec<(Action, Next)>,
    ) {
        match s.host {
            Host::Idle => {
                for p in 0..s.ports.len() {
                    let port = &s.ports[p];
                    if port.request == port.taken {
                        continue;
                    }
                    let (seq, mask, packet) = (port.request, port.mask, port.packet);
                    if port.posted {
                        out.push(Model::begin_serving(s, p, false));
                    } else if s.jobs.len() < MAX_JOBS {
                        let mut n = s.clone();
                        n.jobs.push(Job {
                            port: p as u8,
                            seq,
                            todo: mask,
                            packet,
                            responded: response_at_handover,
                            requests: [None; MAX_LANES],
                            answers: true,
                        });
                        if response_at_handover {
                            n.ports[p].response = seq;
                        }
                        n.ports[p].taken = seq;
                        out.push((Action::HostToPool { seq, mask }, Next::State(n)));
                    }
                }
            }
            Host::Serving { .. } => self.serving_step(s, true, out),
        }
    }

    /// The next step of pool job `j`: its lanes' answers, then its `response` store
    /// unless the consumer made it.
    pub(super) fn pool_job(&self, s: &State, j: usize, out: &mut Vec<(Action, Next)>) {
        let job = s.jobs[j];
        if job.todo == 0 && !job.responded {
            let mut n = s.clone();
            n.ports[job.port as usize].response = job.seq;
            n.jobs[j].responded = true;
            if n.jobs[j].todo == 0 {
                n.jobs.remove(j);
            }
            out.push((Action::PoolResponse { seq: job.seq }, Next::State(n)));
            return;
        }
        let lane = job.todo.trailing_zeros() as u8;
        let at = (job.port, job.seq);
        self.push_served(
            s,
            at,
            lane,
            job.packet,
            Action::PoolServe { lane },
            out,
            |n| {
                n.jobs[j].todo &= !(1 << lane);
                if n.jobs[j].todo == 0 && n.jobs[j].responded {
                    n.jobs.remove(j);
                }
            },
        );
    }

    /// The host serves the next lane of the packet it is serving itself.
    pub(super) fn host_serve(
        &self,
        s: &State,
        (port, seq): (u8, u8),
        todo: u8,
        packet: Option<Token>,
        out: &mut Vec<(Action, Next)>,
    ) {
        let lane = todo.trailing_zeros() as u8;
        let action = Action::HostServe { lane };
        self.push_served(s, (port, seq), lane, packet, action, out, |n| {
            n.host = Host::Serving {
                port,
                seq,
                todo: todo & !(1 << lane),
                packet,
                killing: false,
            };
        });
    }

    /// Pushes `action`: slot `lane` served ([`Model::serve_slot`]) and then `then`, or
    /// the violation serving it breaks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_served(
        &self,
        s: &State,
        at: (u8, u8),
        lane: u8,
        packet: Option<Token>,
        action: Action,
        out: &mut Vec<(Action, Next)>,
        then: impl FnOnce(&mut State),
    ) {
        match self.serve_slot(s, at, lane, packet) {
            Ok(mut n) => {
                then(&mut n);
                out.push((action, Next::State(n)));
            }
            Err(v) => out.push((action, Next::Broken(v))),
        }
    }

    /// Slot `lane` of port `port` served as part of `packet`, published as `seq`: its
    /// request marked served and its answer written.
    pub fn serve_slot(
        &self,
        s: &State,
        (port, seq): (u8, u8),
        lane: u8,
        packet: Option<Token>,
    ) -> Result<State, Violation> {
        let t = self.slot_request(s, port, lane, packet)?;
        let mut n = s.clone();
        self.mark_served(&mut n, t)?;
        let p = &mut n.ports[port as usize];
        p.slots[lane as usize].answered = true;
        p.slots[lane as usize].reply = Some(t);
        p.answers[lane as usize] = Answer::Done {
            seq,
            reply: Some(t),
        };
        Ok(n)
    }

    /// The request in slot `lane` of `port`, which must have been written for `packet`.
    pub fn slot_request(
        &self,
        s: &State,
        port: u8,
        lane: u8,
        packet: Option<Token>,
    ) -> Result<Token, Violation> {
        let sl = s.ports[port as usize].slots[lane as usize];
        if sl.packet != packet || packet.is_none() {
            return Err(Violation::StaleSlot { lane });
        }
        Ok(sl.request.expect("a written slot names its request"))
    }

    /// Request `t` is served (once).
    pub fn mark_served(&self, n: &mut State, t: Token) -> Result<(), Violation> {
        if n.served & self.token_bit(t) != 0 {
            return Err(Violation::DoubleServe(t));
        }
        n.served |= self.token_bit(t);
        Ok(())
    }
}
