//! The writer's side of a tagged stream's ring (`hostcall_abi::stream`, which states the
//! protocol): a GPU thread submits a message and goes on, without a round trip. It waits
//! only while its ring is full, or, with dropping on, counts the message as dropped.

use core::cell::{Cell, OnceCell};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use hostcall_abi::stream::{
    MESSAGE_MAX_WORDS, RING_MAX_WORDS, RecordHeader, RingControl, RingCursor, StreamDesc, ring_of,
};

use crate::{Plain, Platform};

/// One ring as a writer reaches it, with the host's `tail` as this writer last read it:
/// `tail` only grows, so an old value shows less room than there is, never more, and
/// host memory is read only when it shows too little.
pub struct Ring<'a> {
    words: &'a [AtomicU64],
    control: &'a RingControl,
    cursor: &'a RingCursor,
    drop_when_full: bool,
    seen_tail: Cell<u64>,
}

/// What became of a submitted message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// It is in the ring, after every message this thread submitted to it before.
    Queued,
    /// The ring was full and dropping is on: it was counted, not queued.
    Dropped,
}

impl<'a> Ring<'a> {
    /// The ring of `words` (host-pinned, fewer than [`RING_MAX_WORDS`] and more than one),
    /// its `control` (host-pinned) and its `cursor` (device memory). With
    /// `drop_when_full`, a message that finds the ring full is dropped and counted
    /// instead of waiting for room.
    pub fn new(
        words: &'a [AtomicU64],
        control: &'a RingControl,
        cursor: &'a RingCursor,
        drop_when_full: bool,
    ) -> Ring<'a> {
        assert!(
            words.len() > 1 && words.len() < RING_MAX_WORDS,
            "a ring has 2 to 2^16 - 1 words"
        );
        Ring {
            words,
            control,
            cursor,
            drop_when_full,
            seen_tail: Cell::new(0),
        }
    }

    /// Submits `message` under `tag`: its bytes, in whole words (the last one padded
    /// with zeros). It must fit the ring with its header.
    pub fn submit<P: Platform, T: Plain>(&self, tag: u32, message: &T) -> Submitted {
        let bytes = size_of::<T>();
        let words = bytes.div_ceil(8);
        assert!(
            words <= MESSAGE_MAX_WORDS && words < self.words.len(),
            "a message longer than its ring"
        );
        let start = (message as *const T).cast::<u8>();
        self.submit_words::<P>(tag, words, |i| {
            let mut w = [0u8; 8];
            let n = (bytes - i * 8).min(8);
            // SAFETY: bytes `8 i .. 8 i + n` lie inside `message` (`n` is cut at its
            // end); a `Plain` value's bytes are all initialized.
            unsafe { core::ptr::copy_nonoverlapping(start.add(i * 8), w.as_mut_ptr(), n) };
            u64::from_le_bytes(w)
        })
    }

    /// Submits a message of `words` words, word `i` being `word(i)`, under `tag`. The
    /// lanes of the warp submitting records of the same length to this ring at the same
    /// time reserve them with one atomic, in lane order, and store them together
    /// ([`Ring::write_group`]), so that their stores reach the host as whole lines.
    fn submit_words<P: Platform>(
        &self,
        tag: u32,
        words: usize,
        word: impl Fn(usize) -> u64,
    ) -> Submitted {
        let length = 1 + words as u64;
        let mask = P::active_mask();
        let cursor = core::ptr::from_ref(self.cursor) as u64;
        // Every lane of `mask` takes part in the three matches.
        let group = P::match_any(mask, cursor as u32)
            & P::match_any(mask, (cursor >> 32) as u32)
            & P::match_any(mask, length as u32);
        let n = u64::from(group.count_ones());
        // Every lane of `group` sees the same `n` and `length`, so all take one path.
        if n == 1 || n * length > self.words.len() as u64 {
            return match self.reserve::<P>(length, 1) {
                Reserved::Dropped => Submitted::Dropped,
                Reserved::At { at, read_tail } => {
                    self.write::<P>(at, tag, words, word, read_tail);
                    Submitted::Queued
                }
            };
        }
        let leader = group.trailing_zeros();
        let lane = P::lane_id();
        let (first, fate) = if lane == leader {
            match self.reserve::<P>(length * n, n) {
                Reserved::Dropped => (0, FATE_DROPPED),
                Reserved::At { at, read_tail } => (at, u32::from(read_tail)),
            }
        } else {
            (0, 0)
        };
        // Every lane of `group` takes part in the broadcasts and the barrier, which also
        // orders the leader's read of `tail` before the lanes' stores.
        let low = P::broadcast(group, first as u32, leader);
        let high = P::broadcast(group, (first >> 32) as u32, leader);
        let fate = P::broadcast(group, fate, leader);
        P::sync_warp(group);
        if fate == FATE_DROPPED {
            return Submitted::Dropped;
        }
        let first = u64::from(high) << 32 | u64::from(low);
        self.write_group::<P>(group, first, tag, words, word, fate == 1);
        Submitted::Queued
    }

    /// Reserves `length` words for `records` records: drops them (counted) if the ring
    /// is full and dropping is on, else waits until the host has made room.
    fn reserve<P: Platform>(&self, length: u64, records: u64) -> Reserved {
        let mut read_tail = false;
        if self.drop_when_full {
            let (room, read) = self.room(self.cursor.reserved.load(Relaxed) + length);
            if !room {
                self.cursor.dropped.fetch_add(records, Relaxed);
                return Reserved::Dropped;
            }
            read_tail = read;
        }
        let at = self.cursor.reserved.fetch_add(length, Relaxed);
        let mut pause = 32;
        loop {
            let (room, read) = self.room(at + length);
            read_tail |= read;
            if room {
                return Reserved::At { at, read_tail };
            }
            P::nanosleep(pause);
            pause = (pause * 2).min(4096);
        }
    }

    /// Stores the record of `words` words at position `at`: the message, then its header.
    fn write<P: Platform>(
        &self,
        at: u64,
        tag: u32,
        words: usize,
        word: impl Fn(usize) -> u64,
        read_tail: bool,
    ) {
        if read_tail {
            // Orders these stores after the read of `tail` that showed room: the host had
            // read the words they overwrite. A `tail` read by an earlier submit is
            // ordered by that submit's fences.
            P::fence_system();
        }
        let base = self.index(at);
        for i in 0..words {
            self.words[self.wrap(base + 1 + i)].store(word(i), Relaxed);
        }
        // Every word of the message reaches the host before its header.
        P::fence_system();
        let header = RecordHeader::new(tag, words, at).encode();
        self.words[base].store(header, Relaxed);
    }

    /// The index of position `at` (one division, which a GPU does slowly in software for
    /// 64 bits: done once per record or group, then [`Ring::wrap`]).
    fn index(&self, at: u64) -> usize {
        (at % self.words.len() as u64) as usize
    }

    /// An index past one lap (less than two ring lengths), brought back into the ring.
    fn wrap(&self, i: usize) -> usize {
        if i >= self.words.len() {
            i - self.words.len()
        } else {
            i
        }
    }

    /// Stores the records of the lanes of `group` side by side from position `first`,
    /// each lane's at its rank among them. The message words go first, `n` at a time:
    /// at round `k`, the lane of rank `r` stores word `k n + r` of the block, taken from
    /// the lane whose record holds it, so that each store covers `n` consecutive words
    /// (a lane storing its own record's words would leave its neighbours a record
    /// apart, each store a small write across PCIe). Then a fence, then each lane's
    /// header.
    fn write_group<P: Platform>(
        &self,
        group: u32,
        first: u64,
        tag: u32,
        words: usize,
        word: impl Fn(usize) -> u64,
        read_tail: bool,
    ) {
        let n = u64::from(group.count_ones());
        let length = 1 + words as u64;
        let rank = u64::from((group & ((1u32 << P::lane_id()) - 1)).count_ones());
        // The group's `n * length` words are at most one ring: every index below is
        // `base` plus less than a ring.
        let base = self.index(first);
        if read_tail {
            // As in `write`, after the group's barrier.
            P::fence_system();
        }
        for k in 0..length {
            let w = k * n + rank;
            let (record, j) = (w / length, w % length);
            let holder = nth_lane(group, record as u32);
            let mut value = 0;
            // Every lane of `group` takes part in each shuffle, the same number of times.
            for i in 0..words {
                let mine = word(i);
                let low = P::broadcast(group, mine as u32, holder);
                let high = P::broadcast(group, (mine >> 32) as u32, holder);
                if j == 1 + i as u64 {
                    value = u64::from(high) << 32 | u64::from(low);
                }
            }
            if j != 0 {
                self.words[self.wrap(base + w as usize)].store(value, Relaxed);
            }
        }
        // Every word of the group's messages reaches the host before any header.
        P::fence_system();
        let at = first + rank * length;
        let header = RecordHeader::new(tag, words, at).encode();
        self.words[self.wrap(base + (rank * length) as usize)].store(header, Relaxed);
    }

    /// Whether the ring has room for a record ending at position `end`, by the `tail`
    /// last read, else by `tail` read now from host memory; and whether it read it.
    fn room(&self, end: u64) -> (bool, bool) {
        let ring = self.words.len() as u64;
        // `tail` may have passed a position read before it: nothing is taken then.
        if end.saturating_sub(self.seen_tail.get()) <= ring {
            return (true, false);
        }
        self.seen_tail.set(self.control.tail.load(Relaxed));
        (end.saturating_sub(self.seen_tail.get()) <= ring, true)
    }
}

/// The lane of `mask` with `rank` lanes of `mask` below it.
fn nth_lane(mask: u32, rank: u32) -> u32 {
    let mut m = mask;
    for _ in 0..rank {
        m &= m - 1;
    }
    m.trailing_zeros()
}

/// What a reservation came to.
enum Reserved {
    /// Dropped for want of room (dropping on).
    Dropped,
    /// The first record's position, and whether `tail` was read from host memory to
    /// find room for it.
    At { at: u64, read_tail: bool },
}

/// The leader's broadcast `fate` of a group whose records were dropped (0 and 1 say
/// whether it read `tail`).
const FATE_DROPPED: u32 = 2;

/// A stream as a kernel opens it from its kernel argument (the host's
/// `KernelArg::Stream`): `submit` puts a message into the ring of the calling thread's
/// warp.
pub struct Stream {
    desc: StreamDesc,
    /// The calling thread's ring, found on its first message.
    ring: OnceCell<Ring<'static>>,
}

impl Stream {
    /// Opens the stream whose descriptor the host placed at `raw`.
    ///
    /// # Safety
    /// `raw` must be the value the host passed for a stream argument of this launch:
    /// the address of a [`StreamDesc`] whose memory lives for the launch.
    pub unsafe fn from_raw(raw: u64) -> Stream {
        // SAFETY: the caller's contract; the host wrote the descriptor before the
        // launch and does not change it during it.
        let desc = unsafe { core::ptr::read_volatile(raw as *const StreamDesc) };
        Stream {
            desc,
            ring: OnceCell::new(),
        }
    }

    /// Submits `message` under `tag` from the calling GPU thread, without waiting for the
    /// host (except while its ring is full, if the stream waits rather than drops).
    /// A `Stream` belongs to the thread that opened it: its ring is that thread's.
    pub fn submit<P: Platform, T: Plain>(&self, tag: u32, message: &T) -> Submitted {
        let ring = self.ring.get_or_init(|| {
            let d = &self.desc;
            let (block, thread) = P::caller();
            let r = ring_of(block, thread, P::block_threads(), d.num_rings);
            let len = d.ring_words as usize;
            // SAFETY: the descriptor's addresses hold `num_rings` rings of `ring_words`
            // words, controls and cursors, for the launch (`from_raw`'s contract, which
            // a `Stream` cannot outlive in a kernel); `r < num_rings`.
            unsafe {
                Ring::new(
                    core::slice::from_raw_parts((d.words as *const AtomicU64).add(r * len), len),
                    &*(d.controls as *const RingControl).add(r),
                    &*(d.cursors as *const RingCursor).add(r),
                    d.drop_when_full != 0,
                )
            }
        });
        ring.submit::<P, T>(tag, message)
    }

    /// [`Stream::submit`] from a GPU thread.
    #[cfg(target_arch = "nvptx64")]
    pub fn send<T: Plain>(&self, tag: u32, message: &T) -> Submitted {
        self.submit::<crate::nvptx::Nvptx, T>(tag, message)
    }
}
