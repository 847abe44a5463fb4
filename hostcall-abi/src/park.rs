//! Parked calls: a call that waits long on the host (a socket's peer, a pipe, stdin, a
//! slow file system) does not keep its port. Ports are few (128 by default) and GPU
//! threads many: were each waiting call to hold one, 129 threads waiting on their peers
//! would leave none for the peers' own calls, and a program that completes on Linux
//! would hang.
//!
//! # Protocol
//!
//! 1. The host serves a lane's call as ever; once it has waited [`PARK_AFTER_NS`]
//!    without an answer (or at once, where the host knows the wait is long), the host
//!    takes a **ticket**: a wake word of the launch's array
//!    ([`crate::DeviceConfig::wake`]) and the generation that word will carry once the
//!    call is answered. It answers the lane on the port with the ticket instead of the
//!    result: an answer that is not inline, whose slot holds the ticket in `args[0]`
//!    and [`PARKED`] in `args[5]` (where a result's bulk count goes; no count is that
//!    large). The port is then released as after any answer (protocol step 7).
//! 2. The lane, its port released, waits until its wake word equals
//!    [`Ticket::ready`] (relaxed polls with a growing pause, then an acquire fence).
//!    The host stores that value with release once it holds the call's answer, in host
//!    memory of its own.
//! 3. The lane then calls [`crate::Service::Collect`] with the ticket in `args[0]`, on
//!    any port, and gets the parked call's answer (its status, result and bulk bytes)
//!    as the answer to that call. The host frees the ticket then: the next call given
//!    the same wake word gets the next generation, which an old ticket never matches.
//!
//! A stop (a timeout, a kill, an `exit`) answers every parked call `Killed` and wakes
//! it: the lane collects that answer and traps. A parked wait has no wait limit: a call
//! may wait for its peer as long as Linux would let it.

/// `args[5]` of a parked call's answer: no bulk count is this large.
pub const PARKED: u64 = u64::MAX;

/// How long the host lets a call wait on its port before it parks it, in nanoseconds:
/// a file operation or a socket round trip usually ends well before, and then costs no
/// second round trip; a call that waits longer frees its port for others.
pub const PARK_AFTER_NS: u64 = 100_000;

/// How long a call that only takes time (a regular file's read or write) keeps its port
/// before the host parks it, in nanoseconds: far longer than such a call takes on a
/// working file system (the GPU's 8 MiB file writes take 2 to 3 ms), so parking costs
/// them nothing, while calls on a hung mount, which may never end, do not hold every
/// port.
pub const TAKES_TIME_PARK_AFTER_NS: u64 = 20_000_000;

/// Longest pause between two polls of a parked call's wake word, in nanoseconds: a
/// parked call is a long wait, and thousands of them polling host memory across PCIe
/// must not fill the bus; a wake-up is seen within this of the host's store.
pub const PARKED_POLL_MAX_NS: u32 = 256_000;

/// A parked call's ticket: its wake word, and the generation the word carries once
/// the call is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The index of its wake word.
    pub word: u32,
    /// The word's generation for this call (never 0: a zeroed word is never ready).
    pub generation: u32,
}

impl Ticket {
    /// The ticket as `args[0]` carries it.
    pub const fn encode(self) -> u64 {
        (self.generation as u64) << 32 | self.word as u64
    }

    /// The ticket in `word`.
    pub const fn decode(word: u64) -> Ticket {
        Ticket {
            word: word as u32,
            generation: (word >> 32) as u32,
        }
    }

    /// What its wake word holds once the call is answered.
    pub const fn ready(self) -> u64 {
        (self.generation as u64) << 32 | 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_round_trip_and_are_ready_only_in_their_generation() {
        let t = Ticket {
            word: 65_535,
            generation: 7,
        };
        assert_eq!(Ticket::decode(t.encode()), t);
        let next = Ticket { generation: 8, ..t };
        assert_ne!(t.ready(), next.ready());
        assert_ne!(t.ready(), 0, "a zeroed word is never ready");
    }
}
