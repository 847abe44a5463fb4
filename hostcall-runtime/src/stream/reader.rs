//! The host's side of one ring (`hostcall_abi::stream`, which states the protocol):
//! take every complete record at the front, in order, hand each message to the caller,
//! and publish how far it has taken, so that writers waiting for room go on.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

use hostcall_abi::stream::{RING_MAX_WORDS, RecordHeader, RingControl};

/// A record the host cannot take: a header whose message is longer than the ring.
/// Only a kernel that ignores the protocol writes one; the ring is read no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the record at position {position} claims {words} words, more than its ring of {ring_words}"
)]
pub struct BrokenRecord {
    /// Its position.
    pub position: u64,
    /// The words its header claims.
    pub words: u16,
    /// The ring's words.
    pub ring_words: usize,
}

/// How far the host has taken one ring, and the room to copy a message out of it.
#[derive(Debug, Default)]
pub struct RingReader {
    taken: u64,
    message: Vec<u64>,
    broken: Option<BrokenRecord>,
}

impl RingReader {
    /// A reader of a ring nothing has been written to.
    pub fn new() -> RingReader {
        RingReader::default()
    }

    /// The position up to which every record has been taken.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The record that stopped this reader, if one did.
    pub fn broken(&self) -> Option<BrokenRecord> {
        self.broken
    }

    /// Takes every complete record at the front of the ring `words`, in order, calling
    /// `each(tag, message)` for each, then publishes the new position in `control`.
    /// Returns the messages taken, or why the ring can be read no further.
    pub fn take(
        &mut self,
        words: &[AtomicU64],
        control: &RingControl,
        mut each: impl FnMut(u32, &[u64]),
    ) -> Result<usize, BrokenRecord> {
        if let Some(m) = self.broken {
            return Err(m);
        }
        let ring = words.len() as u64;
        debug_assert!(words.len() > 1 && words.len() < RING_MAX_WORDS);
        let mut taken = 0;
        loop {
            let at = self.taken;
            // Acquire: the writer's fence put every word of the message before this one.
            let Some(header) = RecordHeader::decode(words[(at % ring) as usize].load(Acquire))
            else {
                break;
            };
            if !header.completes(at) {
                break;
            }
            if u64::from(header.words) >= ring {
                let m = BrokenRecord {
                    position: at,
                    words: header.words,
                    ring_words: words.len(),
                };
                self.broken = Some(m);
                self.publish(control);
                return Err(m);
            }
            // The message's words, in one piece or two where it wraps: one division per
            // record, not one per word.
            let start = ((at + 1) % ring) as usize;
            let end = start + usize::from(header.words);
            let (first, wrapped) = (
                start..end.min(words.len()),
                0..end.saturating_sub(words.len()),
            );
            self.message.clear();
            self.message.extend(
                words[first]
                    .iter()
                    .chain(&words[wrapped])
                    .map(|w| w.load(Acquire)),
            );
            each(header.tag, &self.message);
            self.taken = at + 1 + u64::from(header.words);
            taken += 1;
        }
        if taken > 0 {
            self.publish(control);
        }
        Ok(taken)
    }

    /// Stores `tail` with release: every word taken was read before a writer may
    /// overwrite it.
    fn publish(&self, control: &RingControl) {
        control.tail.store(self.taken, Release);
    }
}
