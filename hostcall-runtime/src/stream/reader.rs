//! The host's side of one ring (`hostcall_abi::stream`, which states the protocol):
//! take every complete batch at the front, in order, hand each message to the caller,
//! and publish how far it has taken, so that writers waiting for room go on.
//!
//! A batch is copied out of the ring (GPU-writable memory, read with byte-wise atomic
//! accesses: the host never holds a reference into it) and its words cleared before the
//! position past it is published: the word at the host's position is then the next
//! batch's commit word or a cleared one, never a message word of an earlier lap that
//! happens to look like the commit word it expects.

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

/// How far the host has taken one ring, and the room to copy a batch out into.
#[derive(Debug, Default)]
pub struct RingReader {
    taken: u64,
    batch: Vec<u64>,
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
    /// one ring's worth, calling `each(tag, message)` for each message with a copy of
    /// its words, and publishing the new position in `control` after each batch, whose
    /// words are cleared first. Returns the messages taken, or why the ring can be read
    /// no further.
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
            // The batch's words, copied out and then cleared (the commit word last of
            // all): one run, or two where they wrap around the ring's end.
            self.batch.clear();
            let start = if index + 1 == words.len() {
                0
            } else {
                index + 1
            };
            let n = length as usize;
            let (run, wrapped) = if start + n <= words.len() {
                (&words[start..start + n], &words[..0])
            } else {
                (&words[start..], &words[..start + n - words.len()])
            };
            // The acquire of the commit word above orders every writer's store to the
            // batch's words before these loads; no writer stores to them again before
            // `tail` is published past them (its release, below, orders these loads and
            // stores first). A kernel that breaks the protocol may still store to them
            // at any time: each word is read and cleared by atomic accesses (`take`),
            // never through a reference, so that is a wrong value, never a data race.
            for run in [run, wrapped] {
                take(run, &mut self.batch);
            }
            words[index].store(0, Relaxed);
            let mut r = 0;
            while r < self.batch.len() {
                let record = RecordHeader::decode(self.batch[r]);
                let m = usize::from(record.words);
                if r + 1 + m > self.batch.len() {
                    let room = (self.batch.len() - r - 1) as u64;
                    return Err(self.stop(control, at + 1 + r as u64, record.words, room));
                }
                each(record.tag, &self.batch[r + 1..r + 1 + m]);
                taken += 1;
                r += 1 + m;
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

/// Appends `words` (ring memory, which the GPU may store to at any time) to `batch` and
/// zeroes them. On x86-64 by `rep movsq` and `rep stosq`: byte-wise atomic accesses
/// (the hardware's, which inline assembly performs and the language has no type for),
/// at the speed of a memory copy, where a loop of word-sized atomics ran 64-byte
/// stream messages at 0.6 to 0.7 times the rate (H200). Elsewhere word by word.
fn take(words: &[AtomicU64], batch: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    {
        let n = words.len();
        batch.reserve(n);
        let at = batch.len();
        // SAFETY: `words` is `n` valid, 8-byte aligned words and `batch` has room for
        // `n` more past `at` (reserved above); the two do not overlap (one is the
        // ring, the other this reader's own vector). The assembly reads and writes
        // exactly those words and nothing else, leaves the direction flag clear as
        // it found it (the ABI's), and touches no stack.
        unsafe {
            let src = words.as_ptr().cast::<u64>();
            std::arch::asm!(
                "rep movsq",
                inout("rcx") n => _,
                inout("rsi") src => _,
                inout("rdi") batch.as_mut_ptr().add(at) => _,
                options(nostack, preserves_flags),
            );
            std::arch::asm!(
                "rep stosq",
                inout("rcx") n => _,
                inout("rdi") src => _,
                in("rax") 0u64,
                options(nostack, preserves_flags),
            );
            batch.set_len(at + n);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        batch.extend(words.iter().map(|w| w.load(Relaxed)));
        for w in words {
            w.store(0, Relaxed);
        }
    }
}
