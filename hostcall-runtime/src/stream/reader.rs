//! The host's side of one ring (`hostcall_abi::stream`, which states the protocol):
//! take every complete batch at the front, in order, hand each message to the caller,
//! and publish how far it has taken, so that writers waiting for room go on.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use hostcall_abi::stream::{BatchHeader, RING_MAX_WORDS, RecordHeader, RingControl};

/// A header the host cannot follow: a batch longer than its ring, or a record running
/// past the end of its batch. Only a kernel that ignores the protocol writes one; the
/// ring is read no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the header at position {position} claims {words} words, more than the {room} it has room for"
)]
pub struct BrokenRecord {
    /// The header's position.
    pub position: u64,
    /// The words it claims.
    pub words: u16,
    /// The words it could have: the ring's less one for a batch, the rest of its batch
    /// for a record.
    pub room: u64,
}

/// How far the host has taken one ring, and the room to copy out a message that wraps
/// around the ring's end.
#[derive(Debug, Default)]
pub struct RingReader {
    taken: u64,
    wrapped: Vec<u64>,
    broken: Option<BrokenRecord>,
}

impl RingReader {
    /// A reader of a ring nothing has been written to.
    pub fn new() -> RingReader {
        RingReader::default()
    }

    /// The position up to which every batch has been taken.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The header that stopped this reader, if one did.
    pub fn broken(&self) -> Option<BrokenRecord> {
        self.broken
    }

    /// Takes the complete batches at the front of the ring `words`, in order, at most
    /// one ring's worth, calling `each(tag, message)` for each message and publishing
    /// the new position in `control` after each batch. Messages are read where they lie (copied only
    /// where one wraps around the ring's end). Returns the messages taken, or why the
    /// ring can be read no further.
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
        let end = self.taken + ring;
        let mut taken = 0;
        while self.taken < end {
            let at = self.taken;
            let index = (at % ring) as usize;
            let Some(batch) = BatchHeader::decode(words[index].load(Acquire)) else {
                break;
            };
            if !batch.completes(at) {
                break;
            }
            let length = u64::from(batch.words);
            if length >= ring {
                return Err(self.stop(control, at, batch.words, ring - 1));
            }
            // Offsets from the commit word, brought back into the ring without dividing.
            let wrap = |i: u64| {
                let i = index + i as usize;
                if i >= words.len() { i - words.len() } else { i }
            };
            let mut i = 1;
            while i <= length {
                let record = RecordHeader::decode(words[wrap(i)].load(Relaxed));
                let m = u64::from(record.words);
                if i + m > length {
                    return Err(self.stop(control, at + i, record.words, length - i));
                }
                let first = wrap(i + 1);
                let last = first + m as usize;
                // The message where it lies: one piece, or two where it wraps.
                let (before_end, after_start) = if last <= words.len() {
                    (&words[first..last], &words[..0])
                } else {
                    (&words[first..], &words[..last - words.len()])
                };
                // SAFETY: the words lie inside a batch whose commit word was read with
                // acquire, which the writers' fences put after every word of the batch;
                // no writer stores to them before `tail` is published past them, after
                // the slices are gone.
                let (before_end, after_start) =
                    unsafe { (settled(before_end), settled(after_start)) };
                if after_start.is_empty() {
                    each(record.tag, before_end);
                } else {
                    self.wrapped.clear();
                    self.wrapped.extend_from_slice(before_end);
                    self.wrapped.extend_from_slice(after_start);
                    each(record.tag, &self.wrapped);
                }
                taken += 1;
                i += 1 + m;
            }
            self.taken = at + 1 + length;
            // Room goes back batch by batch, so that writers waiting for it go on
            // while the rest is read.
            self.publish(control);
        }
        Ok(taken)
    }

    /// Stops at the header at `position` claiming `words` words where `room` fit:
    /// publishes what was taken before it, and keeps the reason.
    fn stop(
        &mut self,
        control: &RingControl,
        position: u64,
        words: u16,
        room: u64,
    ) -> BrokenRecord {
        let m = BrokenRecord {
            position,
            words,
            room,
        };
        self.broken = Some(m);
        self.publish(control);
        m
    }

    /// Stores `tail` with release: every word taken was read before a writer may
    /// overwrite it.
    fn publish(&self, control: &RingControl) {
        control.tail.store(self.taken, Release);
    }
}

/// `words` as plain integers, read where they lie.
///
/// # Safety
/// No store to `words` may happen while the slice returned lives, and every store
/// before it must happen before this call.
unsafe fn settled(words: &[AtomicU64]) -> &[u64] {
    // SAFETY: `AtomicU64` has `u64`'s size and alignment; the caller rules out races.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u64>(), words.len()) }
}
