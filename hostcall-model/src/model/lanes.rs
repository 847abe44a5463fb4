//! The lanes' steps: active masks, packets, warp syncs, and each lane's protocol.

use super::Op::*;
use super::*;
use crate::violation::Violation;

impl Model {
    pub(super) fn op(&self, l: &Lane) -> Op {
        self.program[l.pc as usize]
    }

    /// `activemask`: any non-empty subset of a warp's lanes waiting at the entry (a lane
    /// that collects a parked call's answer goes alone: [`Model::collections`]).
    pub(super) fn active_masks(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        for warp in [0u8, 1] {
            let at_entry: Vec<usize> = (0..s.lanes.len())
                .filter(|&i| {
                    let l = &s.lanes[i];
                    self.who[i].warp == warp
                        && !l.exited
                        && !l.collecting
                        && self.op(l) == ActiveMask
                })
                .collect();
            for subset in 1u32..(1 << at_entry.len()) {
                let members: Vec<usize> = at_entry
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| subset & (1 << k) != 0)
                    .map(|(_, &i)| i)
                    .collect();
                let mask = members.iter().fold(0u8, |m, &i| m | 1 << self.who[i].lane);
                // Each member's call is posted or not: every choice not fixed by the
                // configuration is explored (taken here rather than as a step of its own,
                // which would only multiply interleavings of a lane-private choice).
                let open: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&i| s.lanes[i].posted.is_none())
                    .collect();
                for choice in 0u32..(1 << open.len()) {
                    let mut n = s.clone();
                    let mut posted = 0u8;
                    for (k, &i) in open.iter().enumerate() {
                        n.lanes[i].posted = Some(choice & (1 << k) != 0);
                    }
                    for &i in &members {
                        n.lanes[i].mask = mask;
                        n.lanes[i].group = mask;
                        if n.lanes[i].posted == Some(true) {
                            posted |= 1 << self.who[i].lane;
                        }
                    }
                    if self.protocol != Protocol::V2 {
                        self.set_packet(&mut n, &members);
                    }
                    for &i in &members {
                        self.advance(&mut n, i);
                    }
                    out.push((Action::ActiveMask { warp, mask, posted }, Next::State(n)));
                }
            }
        }
    }

    /// A lane whose call was parked starts its collection, alone, once its wake word is
    /// set.
    pub(super) fn collections(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        for (i, l) in s.lanes.iter().enumerate() {
            if l.exited || !l.collecting || self.op(l) != ActiveMask {
                continue;
            }
            if !matches!(s.tickets[i], Ticket::Done(_) | Ticket::Killed) {
                continue;
            }
            let mut n = s.clone();
            let mask = 1 << self.who[i].lane;
            n.lanes[i].mask = mask;
            n.lanes[i].group = mask;
            self.advance(&mut n, i);
            out.push((
                Action::ActiveMask {
                    warp: self.who[i].warp,
                    mask,
                    posted: 0,
                },
                Next::State(n),
            ));
        }
    }

    /// The packet id of `members` (one packet): its leader's current call.
    pub(super) fn set_packet(&self, n: &mut State, members: &[usize]) {
        let leader = *members
            .iter()
            .min_by_key(|&&i| self.who[i].lane)
            .expect("a packet has a lane");
        let packet = self.token(leader, n.lanes[leader].call);
        for &i in members {
            n.lanes[i].packet = Some(packet);
        }
    }

    /// Warp-synchronous steps: all lanes of a mask waiting at a step of the same kind
    /// with that mask (wherever in the program) proceed once every other lane of the
    /// mask has exited.
    pub(super) fn syncs(&self, s: &State, out: &mut Vec<(Action, Next)>) {
        let mut seen: Vec<(u8, Op, u8)> = Vec::new();
        for (i, l) in s.lanes.iter().enumerate() {
            if l.exited || !self.op(l).is_sync() {
                continue;
            }
            let op = self.op(l);
            let mask = if op == MatchPosted { l.mask } else { l.group };
            let warp = self.who[i].warp;
            if seen.contains(&(warp, op, mask)) {
                continue;
            }
            seen.push((warp, op, mask));
            let waiting: Vec<usize> = (0..s.lanes.len())
                .filter(|&j| {
                    let m = &s.lanes[j];
                    self.who[j].warp == warp
                        && !m.exited
                        && self.op(m) == op
                        && (if op == MatchPosted { m.mask } else { m.group }) == mask
                })
                .collect();
            let all_there = bits(mask).all(|lane| {
                (0..s.lanes.len())
                    .filter(|&j| self.who[j].warp == warp && self.who[j].lane == lane)
                    .all(|j| s.lanes[j].exited || waiting.contains(&j))
            });
            if !all_there {
                continue;
            }
            let mut n = s.clone();
            if op == MatchPosted {
                for posted in [false, true] {
                    let group: Vec<usize> = waiting
                        .iter()
                        .copied()
                        .filter(|&j| s.lanes[j].posted == Some(posted))
                        .collect();
                    let g = group.iter().fold(0u8, |m, &j| m | 1 << self.who[j].lane);
                    for &j in &group {
                        n.lanes[j].group = g;
                    }
                    if !group.is_empty() {
                        self.set_packet(&mut n, &group);
                    }
                }
            }
            let port = if op == Broadcast {
                waiting
                    .iter()
                    .find(|&&j| self.is_leader(j, &s.lanes[j]))
                    .map(|&j| s.lanes[j].port)
            } else {
                None
            };
            for &j in &waiting {
                if let Some(p) = port {
                    n.lanes[j].port = p;
                    // V2: every lane then reads the sequence its packet will be
                    // published under. The counter changes only at the lock holder's
                    // publication, which waits for this lane at the next barrier: the
                    // read commutes with every step in between, so it is taken here,
                    // with the broadcast.
                    if self.protocol == Protocol::V2 {
                        n.lanes[j].seq = s.ports[p as usize].seq.wrapping_add(1);
                    }
                }
                self.advance(&mut n, j);
            }
            out.push((Action::Sync { warp, op, mask }, Next::State(n)));
        }
    }

    pub(super) fn is_leader(&self, i: usize, l: &Lane) -> bool {
        l.group.trailing_zeros() as u8 == self.who[i].lane
    }

    /// The next non-synchronous step of lane `i`, if it can take one (a leader may take
    /// any free port: one step per port).
    pub(super) fn lane_step(&self, s: &State, i: usize, out: &mut Vec<(Action, Next)>) {
        let l = s.lanes[i];
        if l.exited {
            return;
        }
        let op = self.op(&l);
        if op == ActiveMask || op.is_sync() {
            return;
        }
        let who = self.who[i];
        let action = Action::Step { lane: who, op };
        let leader = self.is_leader(i, &l);
        let mut n = s.clone();
        let me = self.token(i, l.call);
        let slot = who.lane as usize;
        let p = l.port as usize;
        let mut flagged = None;
        debug_assert!(leader || !op.leader_only());
        match op {
            LeaderAcquire => {
                for (k, port) in s.ports.iter().enumerate() {
                    if port.lock == Lock::Held {
                        continue;
                    }
                    let mut n = s.clone();
                    n.lanes[i].took_posted = port.lock == Lock::FreePosted;
                    n.lanes[i].port = k as u8;
                    n.ports[k].lock = Lock::Held;
                    self.advance(&mut n, i);
                    let action = Action::Acquire {
                        lane: who,
                        port: k as u8,
                    };
                    out.push((action, Next::State(n)));
                }
                return;
            }
            LeaderWaitPosted => {
                if l.took_posted && s.ports[p].response != s.ports[p].seq {
                    return;
                }
            }
            WriteSlot => {
                n.ports[p].slots[slot] = Slot {
                    request: Some(me),
                    packet: l.packet,
                    collect: l.collecting,
                    answered: false,
                    reply: None,
                };
                n.ports[p].answers[slot] = Answer::Pending;
                n.lanes[i].finished = l.posted == Some(true);
            }
            Publish => {
                if leader {
                    let seq = s.ports[p].seq.wrapping_add(1);
                    let port = &mut n.ports[p];
                    port.seq = seq;
                    port.mask = l.group;
                    port.request = seq;
                    port.packet = l.packet;
                    port.posted = l.posted == Some(true);
                    n.lanes[i].seq = seq;
                    if l.posted == Some(true) {
                        n.ports[p].lock = Lock::FreePosted;
                        flagged = self.release_check(s, i);
                    }
                }
                if l.posted == Some(true) {
                    self.end_call(&mut n, i);
                    out.push((action, outcome(n, flagged)));
                    return;
                }
            }
            LeaderPollResponse => {
                if s.ports[p].response != l.seq {
                    return;
                }
            }
            ReadSlot => {
                let recheck = matches!(self.protocol, Protocol::V1 { recheck: true });
                let sl = s.ports[p].slots[slot];
                if recheck && !(sl.answered && sl.request == Some(me)) {
                    return;
                }
                let got = if sl.answered { sl.reply } else { None };
                if got != Some(me) {
                    let v = Violation::WrongReply { expected: me, got };
                    out.push((action, Next::Broken(v)));
                    return;
                }
                n.lanes[i].finished = true;
            }
            PollAnswer => {
                let (seq, reply) = match s.ports[p].answers[slot] {
                    Answer::Pending => return,
                    Answer::Done { seq, reply } => (seq, Some(reply)),
                    Answer::Killed { seq } | Answer::Parked { seq } => (seq, None),
                };
                if seq != l.seq {
                    let v = Violation::ForeignAnswer {
                        lane: who,
                        expected: l.seq,
                        found: seq,
                    };
                    out.push((action, Next::Broken(v)));
                    return;
                }
                match (s.ports[p].answers[slot], reply) {
                    (_, Some(reply)) if reply != Some(me) => {
                        let v = Violation::WrongReply {
                            expected: me,
                            got: reply,
                        };
                        out.push((action, Next::Broken(v)));
                        return;
                    }
                    (Answer::Killed { .. }, _) => {
                        // The thread traps, which ends the launch.
                        n.trapped = true;
                        out.push((action, Next::State(n)));
                        return;
                    }
                    (Answer::Parked { .. }, _) => n.lanes[i].parked = true,
                    _ => {}
                }
                n.lanes[i].finished = true;
            }
            LeaderRelease => {
                n.ports[p].lock = Lock::Free;
                flagged = self.release_check(s, i);
            }
            Return => unreachable!("`advance` returns on reaching it"),
            ActiveMask | MatchPosted | Broadcast | Barrier => unreachable!("handled as syncs"),
        }
        self.advance(&mut n, i);
        out.push((action, outcome(n, flagged)));
    }

    /// Moves lane `i` to its next step, past leader-only steps it does not take: they
    /// touch nothing, so skipping them at once changes no behaviour and saves states.
    ///
    /// Likewise a leader that found the lock plainly free skips the wait for a posted
    /// answer, and a lane reaching `Return` returns at once (both are lane-private), and
    /// fields no later step reads are cleared, so that equal futures are equal states.
    pub(super) fn advance(&self, n: &mut State, i: usize) {
        let l = &mut n.lanes[i];
        l.pc += 1;
        let leader = l.group.trailing_zeros() as u8 == self.who[i].lane;
        loop {
            match self.program[l.pc as usize] {
                op if op.leader_only() && !leader => l.pc += 1,
                LeaderWaitPosted if !l.took_posted => l.pc += 1,
                _ => break,
            }
        }
        if self.program[l.pc as usize] != MatchPosted {
            l.mask = 0;
        }
        if self.program[l.pc as usize] == Return {
            self.end_call(n, i);
        }
    }

    /// Lane `i` (a leader) releases the port: every lane of its packet must be done.
    pub(super) fn release_check(&self, s: &State, i: usize) -> Option<Violation> {
        let l = &s.lanes[i];
        (0..s.lanes.len())
            .find(|&j| {
                let m = &s.lanes[j];
                self.who[j].warp == self.who[i].warp
                    && l.group & (1 << self.who[j].lane) != 0
                    && m.packet == l.packet
                    && !m.exited
                    && !m.finished
            })
            .map(|j| Violation::EarlyRelease {
                waiting: self.who[j],
            })
    }

    /// Lane `i`'s request is done: on to its next call, or, if it was parked, to the
    /// collection of its answer.
    pub(super) fn end_call(&self, n: &mut State, i: usize) {
        let parked = n.lanes[i].parked;
        let call = n.lanes[i].call + u8::from(!parked);
        let posted = if parked {
            Some(false)
        } else {
            self.fixed_kind(i, call)
        };
        let exited = call as usize >= self.calls[i].len();
        n.lanes[i] = Lane::at_call(call, posted, parked, exited);
    }
}
