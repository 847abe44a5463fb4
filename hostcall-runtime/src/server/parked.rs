//! Parked calls, the host's side (`hostcall_abi::park` states the protocol): the
//! tickets of calls answered with a wake word instead of their result, their answers
//! once they come, and the wake words the lanes poll.
//!
//! A ticket's wake word is stored (release) only after its answer is in the table; the
//! lane's `Collect` takes the answer out and frees the ticket. A stop answers every
//! parked call `Killed` and wakes it.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Release;
use std::sync::{Mutex, MutexGuard};

use hostcall_abi::Status;
use hostcall_abi::errno::EIO;
use hostcall_abi::park::Ticket;

use crate::services::Reply;

/// A call's answer, held for its collection.
pub(crate) struct Answered {
    pub status: Status,
    pub reply: Reply,
    /// Its output bytes (as many as the reply's count).
    pub out: Vec<u8>,
    /// A typed value's words, for the slot's `args[1..5]`.
    pub words: Option<[u64; 4]>,
}

impl Answered {
    /// The answer of a call stopped by the host.
    pub fn killed() -> Answered {
        Answered {
            status: Status::Killed,
            reply: Reply::errno(EIO),
            out: Vec::new(),
            words: None,
        }
    }
}

/// Who made a parked call, for the report of a stopped launch: the port it was
/// published on, the caller's block and thread, and the service.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caller {
    pub port: usize,
    pub block: u32,
    pub thread: u32,
    pub service: u32,
}

/// One wake word's call.
#[derive(Default)]
struct Entry {
    /// The generation of its current (or last) ticket.
    generation: u32,
    /// Whether a ticket is out.
    taken: bool,
    /// Who made the call.
    caller: Caller,
    /// The answer, once it came.
    answer: Option<Answered>,
}

#[derive(Default)]
struct Slots {
    entries: Vec<Entry>,
    free: Vec<u32>,
}

/// The launch's parked calls.
pub(crate) struct Parked {
    /// The wake words, as the host sees them.
    words: *const AtomicU64,
    count: usize,
    slots: Mutex<Slots>,
}

// SAFETY: the wake words are host-mapped memory the module keeps for the launch; the
// host only stores to them, through atomics, and only while the launch's memory is
// alive (the callers hold `PortsAlive`).
unsafe impl Send for Parked {}
// SAFETY: as for Send.
unsafe impl Sync for Parked {}

impl Parked {
    /// The parked calls of a launch whose `count` wake words are at `words` (none: no
    /// call is ever parked, and a call that waits keeps its port).
    pub fn new(words: *const AtomicU64, count: usize) -> Parked {
        Parked {
            words,
            count: if words.is_null() { 0 } else { count },
            slots: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for `caller`'s call about to be parked; `None` when every wake word is
    /// taken (the call then keeps its port).
    pub fn take(&self, caller: Caller) -> Option<Ticket> {
        let mut s = self.lock();
        let word = match s.free.pop() {
            Some(w) => w,
            None if s.entries.len() < self.count => {
                s.entries.push(Entry::default());
                (s.entries.len() - 1) as u32
            }
            None => return None,
        };
        let e = &mut s.entries[word as usize];
        // Never 0 (a zeroed word is never ready), and within 31 bits.
        e.generation = (e.generation % (u32::MAX >> 1)) + 1;
        e.taken = true;
        e.caller = caller;
        e.answer = None;
        Some(Ticket {
            word,
            generation: e.generation,
        })
    }

    /// Gives back a ticket no call was parked under.
    pub fn put_back(&self, t: Ticket) {
        let mut s = self.lock();
        if let Some(e) = s.entries.get_mut(t.word as usize)
            && e.taken
            && e.generation == t.generation
        {
            e.taken = false;
            s.free.push(t.word);
        }
    }

    /// Holds the answer of the call parked under `t` and wakes its lane. The caller
    /// holds the launch's memory alive.
    pub fn complete(&self, t: Ticket, answer: Answered) {
        {
            let mut s = self.lock();
            let Some(e) = s.entries.get_mut(t.word as usize) else {
                return;
            };
            if !e.taken || e.generation != t.generation || e.answer.is_some() {
                return;
            }
            e.answer = Some(answer);
        }
        self.wake(t);
    }

    /// Stores `t`'s ready value into its wake word, with release: the answer is in the
    /// table before the lane can see it.
    fn wake(&self, t: Ticket) {
        debug_assert!((t.word as usize) < self.count);
        // SAFETY: `t.word < count` (tickets come from `take`), inside the wake words;
        // they are only ever accessed as atomics.
        unsafe { &*self.words.add(t.word as usize) }.store(t.ready(), Release);
    }

    /// The answer of the call parked under `t`, taken out, and the ticket freed;
    /// `None` unless `t` is a ticket out whose answer has come (a lane that collects
    /// before its wake word, or with a forged ticket, breaks the protocol).
    pub fn collect(&self, t: Ticket) -> Option<Answered> {
        let mut s = self.lock();
        let e = s.entries.get_mut(t.word as usize)?;
        if !e.taken || e.generation != t.generation {
            return None;
        }
        let answer = e.answer.take()?;
        e.taken = false;
        s.free.push(t.word);
        Some(answer)
    }

    /// The callers of the parked calls still waiting for their answer.
    pub fn waiting(&self) -> Vec<Caller> {
        let s = self.lock();
        s.entries
            .iter()
            .filter(|e| e.taken && e.answer.is_none())
            .map(|e| e.caller)
            .collect()
    }

    /// Answers every parked call not yet answered `Killed`, and wakes it. The caller
    /// holds the launch's memory alive.
    pub fn kill_all(&self) {
        let woken: Vec<Ticket> = {
            let mut s = self.lock();
            s.entries
                .iter_mut()
                .enumerate()
                .filter(|(_, e)| e.taken && e.answer.is_none())
                .map(|(word, e)| {
                    e.answer = Some(Answered::killed());
                    Ticket {
                        word: word as u32,
                        generation: e.generation,
                    }
                })
                .collect()
        };
        for t in woken {
            self.wake(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_wakes_once_answered_and_is_collected_once() {
        let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
        let p = Parked::new(words.as_ptr(), 2);
        let who = Caller::default();
        let (a, b) = (p.take(who).unwrap(), p.take(who).unwrap());
        assert!(p.take(who).is_none(), "two words, two tickets");
        assert!(p.collect(a).is_none(), "not answered yet");
        p.complete(a, Answered::killed());
        let ready = words[a.word as usize].load(std::sync::atomic::Ordering::Acquire);
        assert_eq!(ready, a.ready());
        assert!(p.collect(a).is_some_and(|x| x.status == Status::Killed));
        assert!(p.collect(a).is_none(), "collected once");
        let again = p.take(who).unwrap();
        assert_eq!(again.word, a.word);
        assert_ne!(
            again.generation, a.generation,
            "an old ticket never matches"
        );
        p.complete(a, Answered::killed());
        assert!(
            p.collect(again).is_none(),
            "the old ticket's answer is not the new one's"
        );
        assert_eq!(p.waiting().len(), 2);
        p.kill_all();
        assert!(p.waiting().is_empty());
        assert!(p.collect(b).is_some() && p.collect(again).is_some());
    }
}
