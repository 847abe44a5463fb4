//! The per-lane answer word: how the host hands one lane its answer.
//!
//! The host writes it last for each lane, with release semantics, and the lane polls it
//! with relaxed loads: one 64-bit word, single-copy atomic across PCIe, that says
//! *this lane's request of sequence `seq` is answered* and, for most calls, carries the
//! result itself, so that a lane learns both from one read of host memory.
//!
//! ```text
//!  63   62 .. 51   50 .. 49   48       47 .. 0
//! done  seq % 4096  status   inline   result (sign-extended), when inline
//! ```
//!
//! [`PENDING`] (zero) is what the lane stores before publishing; the host never writes
//! it, since `done` is set in every answer. An inline answer is the word itself, so its
//! polls need no ordering. When `inline` is clear the result and the count of bulk bytes
//! written back are in the slot's `args[0]` and `args[5]`, written before the word (the
//! release orders them), and the lane issues an acquire fence after reading the word and
//! before reading them. A parked call's answer is such an answer, with
//! [`crate::park::PARKED`] for the count and its ticket for the result.

use crate::Status;

/// The answer word before the host answers.
pub const PENDING: u64 = 0;

const DONE: u64 = 1 << 63;
const INLINE: u64 = 1 << 48;
const SEQ_SHIFT: u32 = 51;
const STATUS_SHIFT: u32 = 49;
const RESULT_BITS: u32 = 48;

/// Bits of the sequence number the answer word carries.
pub const SEQ_BITS: u32 = 12;

/// The sequence number as the answer word carries it.
pub const fn seq_tag(seq: u32) -> u32 {
    seq & ((1 << SEQ_BITS) - 1)
}

/// An answer, as written into or read from the word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// [`seq_tag`] of the request's sequence.
    pub seq: u32,
    /// Whether the service ran.
    pub status: Status,
    /// The result when it travels in the word; `None`: it is in the slot.
    pub inline: Option<i64>,
}

impl Answer {
    /// Whether `result` fits in the word.
    pub const fn fits(result: i64) -> bool {
        let limit = 1i64 << (RESULT_BITS - 1);
        -limit <= result && result < limit
    }

    /// The word for this answer.
    pub const fn encode(self) -> u64 {
        let mut w =
            DONE | (seq_tag(self.seq) as u64) << SEQ_SHIFT | (self.status as u64) << STATUS_SHIFT;
        if let Some(r) = self.inline {
            w |= INLINE | (r as u64 & ((1 << RESULT_BITS) - 1));
        }
        w
    }

    /// The answer in `word`, or `None` while it is [`PENDING`].
    pub const fn decode(word: u64) -> Option<Answer> {
        if word & DONE == 0 {
            return None;
        }
        let status = Status::from_code(((word >> STATUS_SHIFT) & 3) as u32);
        let inline = if word & INLINE != 0 {
            // Sign-extend the low 48 bits.
            Some(((word << (64 - RESULT_BITS)) as i64) >> (64 - RESULT_BITS))
        } else {
            None
        };
        Some(Answer {
            seq: ((word >> SEQ_SHIFT) as u32) & ((1 << SEQ_BITS) - 1),
            status,
            inline,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_and_are_never_pending() {
        let limit = 1i64 << 47;
        for seq in [0, 1, 4095, 4096, 4097, u32::MAX] {
            for status in [
                Status::Ok,
                Status::UnknownService,
                Status::Malformed,
                Status::Killed,
            ] {
                for inline in [
                    None,
                    Some(0),
                    Some(-1),
                    Some(-22),
                    Some(limit - 1),
                    Some(-limit),
                ] {
                    let a = Answer {
                        seq,
                        status,
                        inline,
                    };
                    let w = a.encode();
                    assert_ne!(w, PENDING);
                    let back = Answer::decode(w).unwrap();
                    assert_eq!(
                        back,
                        Answer {
                            seq: seq_tag(seq),
                            ..a
                        }
                    );
                }
            }
        }
        assert_eq!(Answer::decode(PENDING), None);
    }

    #[test]
    fn only_48_bit_results_fit() {
        let limit = 1i64 << 47;
        assert!(Answer::fits(limit - 1) && Answer::fits(-limit) && Answer::fits(0));
        assert!(!Answer::fits(limit) && !Answer::fits(-limit - 1) && !Answer::fits(i64::MAX));
    }
}
