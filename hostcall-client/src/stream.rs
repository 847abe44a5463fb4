//! The writer's side of a tagged stream's ring (`hostcall_abi::stream`, which states the
//! protocol): a GPU thread submits a message and goes on, without a round trip. It waits
//! only while its ring is full, or, with dropping on, counts the message as dropped.

use core::cell::{Cell, OnceCell};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use hostcall_abi::stream::{
    BatchHeader, MESSAGE_MAX_WORDS, RING_MAX_WORDS, RecordHeader, RingControl, RingCursor,
    StreamDesc, ring_of,
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
    /// with zeros). It must fit the ring with its two header words.
    pub fn submit<P: Platform, T: Plain>(&self, tag: u32, message: &T) -> Submitted {
        let bytes = size_of::<T>();
        let words = bytes.div_ceil(8);
        assert!(
            words <= MESSAGE_MAX_WORDS && 2 + words <= self.words.len(),
            "a message longer than its ring"
        );
        let start = (message as *const T).cast::<u8>();
        self.submit_words::<P>(tag, words, |i| {
            if align_of::<T>() >= 8 && 8 * i + 8 <= bytes {
                // SAFETY: word `i` lies inside `message`, which is aligned to 8 bytes; a
                // `Plain` value's bytes are all initialized.
                return unsafe { start.cast::<u64>().add(i).read() };
            }
            let mut w = [0u8; 8];
            let n = (bytes - i * 8).min(8);
            // SAFETY: bytes `8 i .. 8 i + n` lie inside `message` (`n` is cut at its
            // end); a `Plain` value's bytes are all initialized.
            unsafe { core::ptr::copy_nonoverlapping(start.add(i * 8), w.as_mut_ptr(), n) };
            u64::from_le_bytes(w)
        })
    }

    /// Submits a message of `words` words, word `i` being `word(i)`, under `tag`. The
    /// lanes of the warp submitting messages of the same length to this ring at the
    /// same time form one batch: one atomic reserves it, their records follow in lane
    /// order, and one commit word ends it ([`Ring::write_batch`]).
    fn submit_words<P: Platform>(
        &self,
        tag: u32,
        words: usize,
        word: impl Fn(usize) -> u64,
    ) -> Submitted {
        let length = 1 + words as u64;
        let mask = P::active_mask();
        let lane = P::lane_id();
        let cursor = core::ptr::from_ref(self.cursor) as u64;
        // Every lane of `mask` takes part in the three matches.
        let group = P::match_any(mask, cursor as u32)
            & P::match_any(mask, (cursor >> 32) as u32)
            & P::match_any(mask, length as u32);
        // Every lane of `group` sees the same count and `length`, so all take one path:
        // a batch the ring cannot hold becomes one batch per lane.
        let batch = 1 + u64::from(group.count_ones()) * length;
        let group = if batch <= self.words.len() as u64 {
            group
        } else {
            1 << lane
        };
        let n = u64::from(group.count_ones());
        let leader = group.trailing_zeros();
        let (first, fate) = if lane == leader {
            match self.reserve::<P>(1 + n * length, n) {
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
        let header = RecordHeader::new(tag, words).encode();
        let record_word = |i: usize| if i == 0 { header } else { word(i - 1) };
        self.write_batch::<P>(group, first, length, record_word, fate == 1);
        Submitted::Queued
    }

    /// Reserves `length` words for a batch of `messages` messages: drops them (counted)
    /// if the ring is full and dropping is on, else waits until the host has made room.
    /// Dropping reserves only where it found room, in one compare-and-swap: checked and
    /// reserved in two steps, another writer could take the room between them, and this
    /// one would wait, as dropping promises never to (`hostcall-model`'s streams model
    /// finds it).
    fn reserve<P: Platform>(&self, length: u64, messages: u64) -> Reserved {
        let mut read_tail = false;
        if self.drop_when_full {
            let mut at = self.cursor.reserved.load(Relaxed);
            loop {
                let (room, read) = self.room::<P>(at + length);
                read_tail |= read;
                if !room {
                    self.cursor.dropped.fetch_add(messages, Relaxed);
                    return Reserved::Dropped;
                }
                match self
                    .cursor
                    .reserved
                    .compare_exchange_weak(at, at + length, Relaxed, Relaxed)
                {
                    Ok(_) => return Reserved::At { at, read_tail },
                    Err(now) => at = now,
                }
            }
        }
        let at = self.cursor.reserved.fetch_add(length, Relaxed);
        let mut pause = 32;
        loop {
            let (room, read) = self.room::<P>(at + length);
            read_tail |= read;
            if room {
                return Reserved::At { at, read_tail };
            }
            P::nanosleep(pause);
            pause = (pause * 2).min(4096);
        }
    }

    /// The index of position `at` (one division, which a GPU does slowly in software for
    /// 64 bits: done once per batch, then [`Ring::wrap`]).
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

    /// Stores the batch of the records of the lanes of `group` (`length` words each,
    /// word `i` of the calling lane's being `record_word(i)`) at position `first`, each
    /// lane's record at its rank among them. The records go first, `n` words at a
    /// time: at round `k`, the lane of rank `r` stores word `k n + r` of the records,
    /// taken from the lane whose record holds it, so that each store covers `n`
    /// consecutive words (a lane storing its own record would leave its neighbours a
    /// record apart, each store a small write across PCIe). Then every lane's fence, a
    /// barrier, and the lowest lane's commit word.
    fn write_batch<P: Platform>(
        &self,
        group: u32,
        first: u64,
        length: u64,
        record_word: impl Fn(usize) -> u64,
        read_tail: bool,
    ) {
        // A batch is shorter than its ring (under 2^16 words): 32-bit arithmetic, which
        // a GPU does in hardware, unlike a 64-bit division.
        let (n, length) = (group.count_ones(), length as u32);
        let rank = (group & ((1u32 << P::lane_id()) - 1)).count_ones();
        // The batch's `1 + n * length` words are at most one ring: every index below is
        // `base` plus less than a ring.
        let base = self.index(first);
        if read_tail {
            // After the group's barrier: these stores come after the leader's read.
            P::fence_system();
        }
        // Word `w = k n + r` of the records is word `j` of record `record`; both are
        // stepped round by round rather than divided out each time.
        let (records_per_round, words_per_round) = (n / length, n % length);
        let (mut record, mut j) = (rank / length, rank % length);
        let mut w = rank as usize;
        for _ in 0..length {
            let holder = if group == u32::MAX {
                record
            } else {
                nth_lane(group, record)
            };
            let mut value = 0;
            // Every lane of `group` takes part in each shuffle, the same number of times.
            for i in 0..length {
                let mine = record_word(i as usize);
                let low = P::broadcast(group, mine as u32, holder);
                let high = P::broadcast(group, (mine >> 32) as u32, holder);
                if j == i {
                    value = u64::from(high) << 32 | u64::from(low);
                }
            }
            self.words[self.wrap(base + 1 + w)].store(value, Relaxed);
            w += n as usize;
            record += records_per_round;
            j += words_per_round;
            if j >= length {
                j -= length;
                record += 1;
            }
        }
        // Every lane's words of the batch reach the host before the commit word: each
        // lane's fence orders its own stores, the barrier orders the fences before the
        // leader's store.
        P::fence_system();
        P::sync_warp(group);
        if rank == 0 {
            let commit = BatchHeader::new((n * length) as usize, first).encode();
            self.words[base].store(commit, Relaxed);
        }
    }

    /// Whether the ring has room for a batch ending at position `end`, by the `tail`
    /// last learned, else by the ring's relayed `tail` in device memory, else by `tail`
    /// read now from host memory (if no other writer of the ring is reading it); and
    /// whether it learned a new `tail`.
    fn room<P: Platform>(&self, end: u64) -> (bool, bool) {
        let ring = self.words.len() as u64;
        // `tail` may have passed a position read before it: nothing is taken then.
        let fits = |tail: u64| end.saturating_sub(tail) <= ring;
        if fits(self.seen_tail.get()) {
            return (true, false);
        }
        let mut learned = false;
        let relayed = self.cursor.tail.load(Relaxed);
        if relayed > self.seen_tail.get() {
            self.seen_tail.set(relayed);
            learned = true;
        }
        if !fits(self.seen_tail.get()) && self.cursor.polling.swap(1, Relaxed) == 0 {
            let tail = self.control.tail.load(Relaxed);
            // Orders the read before the relay: a writer that learns `tail` from the
            // relay and fences has its stores after the host's reads too.
            P::fence_system();
            self.cursor.tail.fetch_max(tail, Relaxed);
            self.cursor.polling.store(0, Relaxed);
            if tail > self.seen_tail.get() {
                self.seen_tail.set(tail);
                learned = true;
            }
        }
        (fits(self.seen_tail.get()), learned)
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
    /// The batch's position, and whether `tail` was read from host memory to
    /// find room for it.
    At { at: u64, read_tail: bool },
}

/// The leader's broadcast `fate` of a group whose messages were dropped (0 and 1 say
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
