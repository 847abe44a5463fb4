//! Taking a port (protocol step 2): the home port at once, then sweeps of every port,
//! passing over those whose posted packet the host holds back for lack of room for its
//! output, and the wait's limit, which counts only while no port moves.

use core::sync::atomic::Ordering::Relaxed;

use hostcall_abi::{
    FaultKind, PORT_HELD, PORT_HELD_BACK, PORT_POSTED, PORT_SEQ_SHIFT, continuation_ports,
};

use super::{Channel, Wait};
use crate::Platform;

/// What one sweep of [`Channel::acquire`] over the ports saw.
#[derive(Default)]
struct Sweep {
    /// The sum of the sequences in the lock words it read: a change from one sweep to
    /// the next means some port moved.
    moved: u32,
    /// Whether a port's posted packet was held back by the host.
    held_back: bool,
}

impl Sweep {
    #[inline(always)]
    fn note(&mut self, word: u32) {
        self.moved = self.moved.wrapping_add(word >> PORT_SEQ_SHIFT);
    }
}

impl Channel {
    /// Takes a free port, starting at a place spread by the caller's coordinates so that
    /// warps do not all contend for port 0, and returns it with the sequence its packet
    /// will be published under: one of the continuation ports for a request that
    /// `continues`, one of the others otherwise. Backs off while all are held. A port
    /// whose last request was posted is used only once the host has finished with it;
    /// one whose posted packet the host holds back is given back and passed over, and
    /// once every other port is held or held back the continuation ports are tried too
    /// (the host never holds them back, so printers cannot take every port from a thread
    /// that does not print). `None`, for a request `unsent_if_held`, as soon as it meets
    /// a held-back port.
    ///
    /// A wait gives up only once no port it looks at has moved for the wait limit:
    /// while their sequences advance, the host is serving, and a thread that keeps
    /// losing the race for a port (thousands of writers retrying while stdout is
    /// stalled) waits on, as a blocked `write(2)` would. Nor while a port is held back.
    pub(super) fn acquire<P: Platform>(
        &self,
        continues: bool,
        unsent_if_held: bool,
    ) -> Option<(u32, u32)> {
        let (block, thread) = P::caller();
        let kept = continuation_ports(self.num_ports);
        let (base, n) = if continues && kept > 0 {
            (self.num_ports - kept, kept)
        } else {
            (0, self.num_ports - kept)
        };
        let start = block.wrapping_mul(0x9E37_79B1).wrapping_add(thread / 32) % n;
        // The home port is tried at once, with the one atomic that takes it: free, and
        // done with by the host, in the common case.
        let mut sweep = Sweep::default();
        if let Some(taken) = self.try_take::<P>(base + start, false, unsent_if_held, &mut sweep) {
            return taken;
        }
        self.search::<P>((base, n, start), unsent_if_held, sweep.held_back)
    }

    /// [`Channel::acquire`] past its home port: sweeps of every port, each read before it
    /// is taken, so that warps searching a busy channel do not flood it with atomics.
    /// Apart (not inlined), so that the common case keeps few registers.
    #[inline(never)]
    fn search<P: Platform>(
        &self,
        (base, n, start): (u32, u32, u32),
        unsent_if_held: bool,
        held_back: bool,
    ) -> Option<(u32, u32)> {
        let mut wait = Wait::new(64);
        let mut seen = None;
        let mut sweep = Sweep {
            held_back,
            ..Sweep::default()
        };
        loop {
            for i in 0..n {
                let p = base + (start + i) % n;
                if let Some(taken) = self.try_take::<P>(p, true, unsent_if_held, &mut sweep) {
                    return taken;
                }
            }
            if sweep.held_back && base == 0 {
                for p in n..self.num_ports {
                    if let Some(taken) = self.try_take::<P>(p, true, false, &mut sweep) {
                        return taken;
                    }
                }
            }
            if sweep.held_back || seen.replace(sweep.moved) != Some(sweep.moved) {
                wait.since = 0;
            }
            let limit = if sweep.held_back {
                0
            } else {
                self.wait_limit_ns
            };
            if let Some(waited) = wait.pause::<P>(0, limit) {
                self.give_up::<P>(FaultKind::NoPort, u32::MAX, 0, waited, 0);
            }
            sweep = Sweep::default();
        }
    }

    /// One try of [`Channel::acquire`] at port `p` (its lock word read first if `look`):
    /// `Some(Some(..))` if it took the port, `Some(None)` if it met a held-back port and
    /// `unsent_if_held`, `None` to go on; notes in `sweep` what it saw.
    #[inline(always)]
    fn try_take<P: Platform>(
        &self,
        p: u32,
        look: bool,
        unsent_if_held: bool,
        sweep: &mut Sweep,
    ) -> Option<Option<(u32, u32)>> {
        // SAFETY: `p < num_ports`, the length of the state array (`new`'s contract).
        let state = unsafe { &*self.states.add(p as usize) };
        if look {
            let word = state.word.load(Relaxed);
            sweep.note(word);
            if word & PORT_HELD != 0 {
                return None;
            }
        }
        // One atomic takes the port if free (and changes nothing if held).
        let was = P::lock_or(&state.word, PORT_HELD);
        sweep.note(was);
        if was & PORT_HELD != 0 {
            return None;
        }
        let last = was >> PORT_SEQ_SHIFT;
        if was & PORT_POSTED != 0 && !self.finished::<P>(p, last) {
            // Held back: the word goes back as it was, for the host's answer.
            P::lock_store(&state.word, was);
            sweep.held_back = true;
            return unsent_if_held.then_some(None);
        }
        Some(Some((p, (last + 1) & (u32::MAX >> PORT_SEQ_SHIFT))))
    }

    /// Waits until the host has finished with posted packet `last` on port `p`, whose
    /// lock word this lane holds: `true` then; `false` at once if the host holds the
    /// packet back (its output has no room yet).
    #[inline(always)]
    fn finished<P: Platform>(&self, p: u32, last: u32) -> bool {
        // SAFETY: `p < num_ports` (`new`'s contract); the header is atomics only.
        let header = unsafe { &(*self.ports.add(p as usize)).header };
        let mut posted = Wait::new(32);
        loop {
            if P::load_acquire_system(&header.response) == last {
                return true;
            }
            if header.held.load(Relaxed) == PORT_HELD_BACK | last {
                return false;
            }
            if let Some(waited) = posted.pause::<P>(0, self.wait_limit_ns) {
                self.give_up::<P>(FaultKind::NoPostedAnswer, p, last, waited, 0);
            }
        }
    }
}
