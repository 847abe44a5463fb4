//! The port model: the modelled state (lanes, one port, the host) and every step it can
//! take, explored by [`crate::explore`].

mod host;
mod lanes;
mod program;
mod state;

pub use program::*;
pub(crate) use state::*;

use crate::violation::Violation;

/// A configuration made ready to explore: who each lane is and what it calls.
pub(crate) struct Model {
    pub protocol: Protocol,
    pub host: HostModel,
    program: &'static [Op],
    pub who: Vec<LaneRef>,
    calls: Vec<Vec<CallKind>>,
    ports: u8,
    /// How each lane's each call may block.
    blocks: Vec<Vec<Option<Blocks>>>,
}

/// What one step of the port protocol leads to.
pub(crate) type Next = crate::explore::Next<State>;

impl crate::explore::Space for Model {
    type State = State;
    type Action = Action;

    fn initial(&self) -> State {
        Model::initial(self)
    }

    fn successors(&self, s: &State) -> Vec<(Action, Next)> {
        Model::successors(self, s)
    }

    fn finished(&self, s: &State) -> Result<bool, Violation> {
        Model::finished(self, s)
    }
}

impl Model {
    pub fn new(config: &Config) -> Model {
        let mut who = Vec::new();
        let mut calls = Vec::new();
        for (i, c) in config.main.iter().enumerate() {
            who.push(LaneRef {
                warp: 0,
                lane: i as u8,
            });
            calls.push(c.clone());
        }
        for (lane, c) in &config.foreign {
            who.push(LaneRef {
                warp: 1,
                lane: *lane,
            });
            calls.push(c.clone());
        }
        assert!(
            who.iter().all(|w| (w.lane as usize) < MAX_LANES),
            "lane ids must be below {MAX_LANES}"
        );
        assert!(calls.iter().map(Vec::len).max().unwrap_or(0) <= 8 && who.len() <= 8);
        assert!(config.ports >= 1, "a port at least");
        let mut blocks: Vec<Vec<Option<Blocks>>> =
            calls.iter().map(|c| vec![None; c.len()]).collect();
        for (t, b) in &config.blocking {
            let i = who
                .iter()
                .position(|w| *w == t.who)
                .expect("a blocking call's lane is configured");
            blocks[i][t.call as usize] = Some(*b);
        }
        Model {
            protocol: config.protocol,
            host: config.host,
            program: config.protocol.program(),
            who,
            calls,
            ports: config.ports,
            blocks,
        }
    }

    pub fn token(&self, i: usize, call: u8) -> Token {
        Token {
            who: self.who[i],
            call,
        }
    }

    pub fn token_bit(&self, t: Token) -> u64 {
        1 << (self.index(t.who) * 8 + t.call as usize)
    }

    /// The index of lane `who` in the state's lanes.
    pub fn index(&self, who: LaneRef) -> usize {
        self.who.iter().position(|w| *w == who).expect("a lane")
    }

    /// Whether some call never ends by itself ([`Blocks::Forever`]).
    pub fn never_ends(&self) -> bool {
        self.blocks
            .iter()
            .flatten()
            .any(|b| *b == Some(Blocks::Forever))
    }

    /// How call `t` may block, if it may.
    pub fn blocks(&self, t: Token) -> Option<Blocks> {
        self.blocks[self.index(t.who)][t.call as usize]
    }

    fn fixed_kind(&self, i: usize, call: u8) -> Option<bool> {
        match self.calls[i].get(call as usize) {
            Some(CallKind::Posted) => Some(true),
            Some(CallKind::Waiting) => Some(false),
            _ => None,
        }
    }

    pub fn initial(&self) -> State {
        let lanes = (0..self.who.len())
            .map(|i| Lane::at_call(0, self.fixed_kind(i, 0), false, self.calls[i].is_empty()))
            .collect();
        let port = Port {
            lock: Lock::Free,
            seq: 0,
            request: 0,
            response: 0,
            mask: 0,
            packet: None,
            posted: false,
            slots: [Slot::default(); MAX_LANES],
            answers: [Answer::Done {
                seq: 0,
                reply: None,
            }; MAX_LANES],
            taken: 0,
        };
        State {
            lanes,
            ports: vec![port; self.ports as usize],
            host: Host::Idle,
            jobs: Vec::new(),
            holds: Vec::new(),
            tickets: vec![Ticket::None; self.who.len()],
            stopped: false,
            trapped: false,
            ended: false,
            served: 0,
        }
    }

    /// Whether `s` is a correct end: every lane exited and nothing is outstanding, or
    /// a stopped call trapped (the launch is over; the run's end stops what is left).
    pub fn finished(&self, s: &State) -> Result<bool, Violation> {
        if s.trapped {
            return Ok(true);
        }
        if !s.lanes.iter().all(|l| l.exited)
            || s.host != Host::Idle
            || !s.jobs.is_empty()
            || !s.holds.is_empty()
        {
            return Ok(false);
        }
        if s.ports.iter().any(|p| p.request != p.response) {
            return Ok(false);
        }
        for (i, t) in s.tickets.iter().enumerate() {
            if let Ticket::Waiting(t) | Ticket::Done(t) = t {
                return Err(Violation::Uncollected(*t));
            }
            debug_assert!(*t == Ticket::None || s.stopped, "lane {i}");
        }
        if s.stopped {
            return Ok(true);
        }
        for (i, c) in self.calls.iter().enumerate() {
            for call in 0..c.len() as u8 {
                let t = self.token(i, call);
                if s.served & self.token_bit(t) == 0 {
                    return Err(Violation::Lost(t));
                }
            }
        }
        Ok(true)
    }

    /// Every step possible from `s`.
    pub fn successors(&self, s: &State) -> Vec<(Action, Next)> {
        let mut out = Vec::new();
        if s.trapped {
            return out;
        }
        self.active_masks(s, &mut out);
        self.collections(s, &mut out);
        self.syncs(s, &mut out);
        for i in 0..s.lanes.len() {
            self.lane_step(s, i, &mut out);
        }
        self.host_steps(s, &mut out);
        out
    }
}

/// Explores every interleaving of `config` and reports the violations found. States
/// past a fatal violation are not explored; every other reachable state is.
///
/// Visited states are kept as 128-bit fingerprints (two independent SipHashes), as
/// explicit-state checkers such as TLC do: tens of millions of states then fit in a
/// few hundred MiB. Two distinct states sharing a fingerprint, which would hide one of
/// them, has a probability below 10^-22 at these sizes.
pub fn check(config: &Config) -> crate::explore::Report {
    crate::explore::explore(&Model::new(config))
}
