//! Tagged streams (dh_comms's messages): one-way messages from GPU threads
//! into rings in host-pinned memory, which a host thread empties. No round trip: a
//! writer waits only when its ring is full.
//!
//! # A ring
//! - **Words**: `ring_words` 64-bit words in host-pinned memory (fewer than
//!   [`RING_MAX_WORDS`]). Batches follow one another at positions that only grow, each at
//!   `position % ring_words`, wrapping around the end.
//! - **A batch**: a commit word ([`BatchHeader`]), then the records of the lanes of one
//!   warp that submitted together (one record for a lane alone).
//! - **A record**: a [`RecordHeader`] word (the tag and the message's length), then the
//!   message's words.
//! - **[`RingCursor`]** (device memory, GPU atomics only): the next free position, and the
//!   messages dropped for want of room.
//! - **[`RingControl`]** (host-pinned): `tail`, the position the host has taken up to.
//!
//! Only the commit word is stored after a fence, and only one per batch: the records'
//! words, headers included, go out as whole lines of consecutive words, and the host
//! checks one word per batch, not per message.
//!
//! # The protocol, and the ordering of each handoff
//! 1. A writer reserves its batch: `reserved.fetch_add(length)` gives its position.
//!    With dropping on, it first checks for room (`reserved + length - tail` at most
//!    `ring_words`), and counts the batch's messages in `dropped` instead if there is
//!    none. Lanes of a warp that submit messages of one length to one ring together
//!    form one batch: the lowest lane reserves it and shares its position through
//!    `shfl.sync`; their records follow in lane order, so the host sees the messages
//!    of writers that reserved one after another.
//! 2. It waits until `position + length - tail <= ring_words`, learning `tail` anew only
//!    when the value it last learned shows too little room: first from the cursor's
//!    relayed copy in device memory, then, if that shows too little and no other writer
//!    of the ring is doing so (`polling`), from host memory. A writer that read host
//!    memory issues a system fence, then raises the relayed copy (`fetch_max`): the
//!    fence orders its read before the relay. If a writer learned a new `tail` either
//!    way, it issues a system fence (the batch's lanes after a `bar.warp.sync` that
//!    orders the lowest lane's read before them): its stores below come after its read
//!    of the `tail` that the host published after reading the words they overwrite. A
//!    `tail` learned by an earlier batch is ordered before these stores by that batch's
//!    fence of step 3. A relayed `tail` is one the host published, perhaps not its
//!    latest: it shows less room than there is, never more.
//! 3. The lanes store the records' words, headers included; each lane issues a system
//!    fence; after a `bar.warp.sync`, the lowest lane stores the commit word. The fences
//!    make every word of the batch visible to the host before the commit word.
//! 4. The host reads the commit word at its position. A batch is complete when the
//!    word's check equals the position's low 16 bits ([`BatchHeader::completes`]). The
//!    host then reads its records, advances its position past the batch, and stores
//!    `tail` with release once it is done with every message it took.
//!
//! `hostcall-model`'s `check_streams` explores every interleaving of this protocol, a
//! writer's message standing for a batch (its words, a fence, its commit word), with a
//! writer's stores reaching host memory in any order its fences allow. It finds a torn
//! message without the fence of step 3, and a batch from the ring's last lap when the
//! commit word names only its offset in the ring.

use core::sync::atomic::AtomicU64;

/// Words a ring may have, exclusive. The word the host finds at its position is the
/// batch's own commit word or a word from exactly one lap before, whose position differs by
/// `ring_words`; 16 bits of position tell the two apart when `ring_words < 2^16`.
pub const RING_MAX_WORDS: usize = 1 << 16;

/// Words a message may have: the record header's 15-bit length.
pub const MESSAGE_MAX_WORDS: usize = (1 << 15) - 1;

/// A batch's commit word: the words of its records, and the batch's position (its low
/// 16 bits), with a set bit that no zero word has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Words of the records after the commit word (fewer than the ring's).
    pub words: u16,
    /// The low 16 bits of the batch's position.
    pub check: u16,
}

/// The bit every commit word has (a ring starts zeroed).
const PRESENT: u64 = 1 << 63;

impl BatchHeader {
    /// The commit word of a batch of `words` words of records at `position`.
    pub const fn new(words: usize, position: u64) -> BatchHeader {
        BatchHeader {
            words: words as u16,
            check: position as u16,
        }
    }

    /// The header as its word: `1 << 63 | words << 16 | check`.
    pub const fn encode(self) -> u64 {
        PRESENT | (self.words as u64) << 16 | self.check as u64
    }

    /// The commit word in `word`, if it is one (a word never written is not).
    pub const fn decode(word: u64) -> Option<BatchHeader> {
        if word & PRESENT == 0 {
            return None;
        }
        Some(BatchHeader {
            words: (word >> 16) as u16,
            check: word as u16,
        })
    }

    /// Whether this is the commit word of the batch at `position`, not one a lap before.
    pub const fn completes(self, position: u64) -> bool {
        self.check == position as u16
    }
}

/// A record's first word, inside a batch: the message's tag and its length in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// What the message is; host callbacks are chosen by it.
    pub tag: u32,
    /// Words of the message after this one (at most [`MESSAGE_MAX_WORDS`]).
    pub words: u16,
}

impl RecordHeader {
    /// The header of a message of `words` words (at most [`MESSAGE_MAX_WORDS`]) under
    /// `tag`.
    pub const fn new(tag: u32, words: usize) -> RecordHeader {
        RecordHeader {
            tag,
            words: words as u16,
        }
    }

    /// The header as its word: `tag << 32 | words`.
    pub const fn encode(self) -> u64 {
        (self.tag as u64) << 32 | (self.words as u64 & 0x7fff)
    }

    /// The header in `word`.
    pub const fn decode(word: u64) -> RecordHeader {
        RecordHeader {
            tag: (word >> 32) as u32,
            words: (word & 0x7fff) as u16,
        }
    }
}

/// A ring's state in device memory, touched only by GPU atomics.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RingCursor {
    /// The next free position.
    pub reserved: AtomicU64,
    /// Messages dropped for want of room (with dropping on).
    pub dropped: AtomicU64,
    /// The greatest `tail` a writer has read from host memory, relayed to the ring's
    /// other writers: a writer waiting for room reads this, in device memory, and only
    /// one writer of a ring at a time reads host memory across PCIe.
    pub tail: AtomicU64,
    /// 1 while a writer of the ring is reading `tail` from host memory.
    pub polling: AtomicU64,
}

/// A ring's state in host-pinned memory, on a 128-byte line of its own: the host stores
/// `tail`, writers poll it.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct RingControl {
    /// The position the host has taken every batch before.
    pub tail: AtomicU64,
}

/// Where a kernel finds a stream's rings: what the stream's kernel argument points to
/// (in device memory; each thread reads it once, when it opens the stream). A GPU thread
/// writes to ring [`ring_of`] its warp, so one thread's messages stay in one ring, in
/// its order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamDesc {
    /// Device address of ring 0's words; ring `r`'s follow at `r * ring_words` words.
    pub words: u64,
    /// Device address of `RingControl[num_rings]` (host-pinned).
    pub controls: u64,
    /// Device address of `RingCursor[num_rings]` (device memory).
    pub cursors: u64,
    /// Rings in the stream.
    pub num_rings: u32,
    /// Words in each ring (fewer than [`RING_MAX_WORDS`]).
    pub ring_words: u32,
    /// 1: a message that finds its ring full is dropped and counted; 0: it waits.
    pub drop_when_full: u32,
    /// Zero.
    pub reserved: u32,
}

/// The ring GPU thread `thread` of linear block `block`, in blocks of `block_threads`,
/// writes to, of `num_rings`: its warp's index in the whole grid, modulo the rings
/// (dh_comms's flattened wave index), so that consecutive warps take consecutive rings
/// whatever the block's size.
pub const fn ring_of(block: u32, thread: u32, block_threads: u32, num_rings: u32) -> usize {
    let warps_per_block = block_threads.div_ceil(32) as u64;
    ((block as u64 * warps_per_block + thread as u64 / 32) % num_rings as u64) as usize
}

const _: () = assert!(core::mem::size_of::<StreamDesc>() == 40);
const _: () = assert!(core::mem::size_of::<RingControl>() == 128);
const _: () = assert!(core::mem::size_of::<RingCursor>() == 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_warps_of_the_grid_take_consecutive_rings_at_any_block_size() {
        for block_threads in [32u32, 96, 256, 1000, 1024] {
            let warps = block_threads.div_ceil(32);
            let mut used = [0u32; 64];
            for block in 0..16 {
                for thread in (0..block_threads).step_by(32) {
                    let r = ring_of(block, thread, block_threads, 64);
                    assert_eq!(r as u32, (block * warps + thread / 32) % 64);
                    used[r] += 1;
                }
            }
            // 16 blocks' warps spread evenly: no ring has two more than another.
            let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
            assert!(hi - lo <= 1, "{block_threads} threads a block: {used:?}");
        }
        assert_eq!(ring_of(3, 31, 64, 5), (3 * 2) % 5);
    }

    #[test]
    fn headers_round_trip_and_a_zero_word_commits_nothing() {
        let b = BatchHeader::new(RING_MAX_WORDS - 1, 0x1_2345);
        assert_eq!(BatchHeader::decode(b.encode()), Some(b));
        assert!(b.completes(0x1_2345) && b.completes(0x2345) && !b.completes(0x1_2346));
        assert_eq!(BatchHeader::decode(0), None);
        let r = RecordHeader::new(0xdead_beef, MESSAGE_MAX_WORDS);
        assert_eq!(RecordHeader::decode(r.encode()), r);
        assert_eq!(RecordHeader::decode(0), RecordHeader::new(0, 0));
    }

    #[test]
    fn a_header_a_lap_before_does_not_complete_in_any_ring_allowed() {
        for ring_words in [2u64, 3, 1000, RING_MAX_WORDS as u64 - 1] {
            for position in [ring_words, 70_000, u64::MAX / 2] {
                let stale = BatchHeader::new(1, position - ring_words);
                assert!(!stale.completes(position), "{ring_words} {position}");
            }
        }
    }
}
