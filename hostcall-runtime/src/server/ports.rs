//! The host's view of the channel's memory, and every access the server makes to it: the
//! doorbells, each port's header, its lanes' slots, answer words and bulk buffers. The
//! GPU may write any of it at any moment (a buggy or hostile kernel ignores the
//! protocol), so the host never holds a reference into it: words cross with atomic
//! accesses, which compile to plain loads and stores and make a concurrent GPU write a
//! defined race, and bytes with the word copies of [`super::shared`].

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use hostcall_abi::answer::Answer;
use hostcall_abi::park::{PARKED, Ticket};
use hostcall_abi::{
    BULK_PER_LANE, Doorbell, LaneSlot, PORT_BULK, PORT_HELD_BACK, Port, Status, WARP_SIZE,
};

use super::shared;
use crate::services::Reply;

/// The channel: `len` ports from `base`, their doorbells from `doorbells`, and
/// `wake_words` wake words of parked calls from `wake`.
#[derive(Clone, Copy)]
pub(crate) struct Ports {
    pub base: *mut Port,
    pub doorbells: *const Doorbell,
    pub len: usize,
    pub wake: *const AtomicU64,
    pub wake_words: usize,
}

// SAFETY: the ports live in memory owned by the GPU module for the whole run; host
// threads access them only through atomics and copies, and the protocol gives each
// lane's slot, answer word and bulk buffer to one host thread at a time.
unsafe impl Send for Ports {}
// SAFETY: as for Send.
unsafe impl Sync for Ports {}

/// Words of a [`LaneSlot`].
const SLOT_WORDS: usize = size_of::<LaneSlot>() / 8;
const _: () = assert!(size_of::<LaneSlot>() == 8 * SLOT_WORDS);

impl Ports {
    fn port(&self, p: usize) -> *mut Port {
        debug_assert!(p < self.len);
        self.base.wrapping_add(p)
    }

    /// The sequence last published on port `p` (acquire: the packet is visible).
    pub fn doorbell(&self, p: usize) -> u32 {
        debug_assert!(p < self.len);
        // SAFETY: `p < len`, the length of the doorbell array; doorbells are atomics.
        unsafe { &*self.doorbells.add(p) }.load(Acquire)
    }

    /// The sequence last answered on port `p`.
    pub fn response(&self, p: usize) -> u32 {
        // SAFETY: `p < len`; the header is accessed only through atomics.
        unsafe { &(*self.port(p)).header }.response.load(Relaxed)
    }

    /// Says the host has finished with port `p`'s packet `seq` (protocol step 5): with
    /// release, after every answer and every read of its slots, so that a posted next
    /// owner that sees it finds the slots free.
    pub fn store_response(&self, p: usize, seq: u32) {
        // SAFETY: `p < len`; the header is accessed only through atomics.
        unsafe { &(*self.port(p)).header }
            .response
            .store(seq, Release);
    }

    /// Marks port `p`'s packet `seq` as left on its port for now (`PortHeader::held`):
    /// a GPU thread that would wait for it takes another port.
    pub fn mark_held_back(&self, p: usize, seq: u32) {
        // SAFETY: `p < len`; the header is accessed only through atomics.
        unsafe { &(*self.port(p)).header }
            .held
            .store(PORT_HELD_BACK | seq, Release);
    }

    /// The lanes of port `p`'s packet (written before the doorbell, which was read with
    /// acquire).
    pub fn lane_mask(&self, p: usize) -> u32 {
        // SAFETY: `p < len`; the header is accessed only through atomics.
        unsafe { &(*self.port(p)).header }.lane_mask.load(Relaxed)
    }

    /// Where lane `lane`'s bulk bytes start, and how many it may use: a lone lane has
    /// the port's whole bulk area, a lane of a shared packet its own part.
    pub fn bulk(&self, p: usize, lane: usize, alone: bool) -> (*mut u8, usize) {
        debug_assert!(lane < WARP_SIZE);
        // SAFETY: `p < len` and `lane < WARP_SIZE`: the address is inside the port.
        let area = unsafe { (&raw mut (*self.port(p)).bulk).cast::<u8>() };
        if alone {
            (area, PORT_BULK)
        } else {
            (area.wrapping_add(lane * BULK_PER_LANE), BULK_PER_LANE)
        }
    }

    /// The words of lane `lane`'s slot on port `p`.
    fn slot_words(&self, p: usize, lane: usize) -> *const AtomicU64 {
        debug_assert!(lane < WARP_SIZE);
        // SAFETY: `p < len`, `lane < WARP_SIZE`: a field address inside the port.
        unsafe { (&raw const (*self.port(p)).lanes[lane]).cast::<AtomicU64>() }
    }

    /// A copy of lane `lane`'s slot on port `p`, read a word at a time with relaxed
    /// loads: the copy is taken once and everything after reads the copy.
    pub fn slot(&self, p: usize, lane: usize) -> LaneSlot {
        let at = self.slot_words(p, lane);
        // SAFETY: the slot is 64-byte aligned and `SLOT_WORDS` words long, inside the
        // port; its words are only ever accessed as atomics by the host.
        let words: [u64; SLOT_WORDS] =
            std::array::from_fn(|i| unsafe { &*at.add(i) }.load(Relaxed));
        // SAFETY: `LaneSlot` is `repr(C)`, four `u32`s and six `u64`s with no padding
        // (its size is asserted above): every bit pattern is a valid value.
        unsafe { std::mem::transmute::<[u64; SLOT_WORDS], LaneSlot>(words) }
    }

    /// Lane `lane`'s answer word on port `p`.
    pub fn answer_word(&self, p: usize, lane: usize) -> u64 {
        // SAFETY: `p < len`, `lane < WARP_SIZE`; answer words are atomics.
        unsafe { &(*self.port(p)).answers[lane] }.load(Acquire)
    }

    /// Writes lane `lane`'s answer to packet `seq`: the output bytes `out` (cut to the
    /// lane's bulk buffer and the reply's count), then the result where it does not fit
    /// the word, with a typed value's `words`, then the answer word itself, last, with
    /// release: a lane that reads the word and then fences (acquire) reads this
    /// answer's slot and bulk bytes, never older ones.
    ///
    /// The caller holds the lane's answer (the protocol gives the slot and bulk buffer
    /// to the host until the word is written) and the launch's memory alive.
    #[allow(clippy::too_many_arguments)] // one answer's parts, each from a different place
    #[inline]
    pub fn write_answer(
        &self,
        (p, lane, seq): (usize, usize, u32),
        alone: bool,
        status: Status,
        reply: Reply,
        out: &[u8],
        words: Option<&[u64; 4]>,
    ) {
        let (at, cap) = self.bulk(p, lane, alone);
        let bulk_out = reply.bulk_out.min(cap).min(out.len());
        // SAFETY: the lane's bulk buffer holds `cap >= bulk_out` bytes; until this lane's
        // answer word is written the protocol gives it to the host.
        unsafe { shared::copy_out(&out[..bulk_out], at) };
        let inline = (bulk_out == 0 && words.is_none() && Answer::fits(reply.result))
            .then_some(reply.result);
        if inline.is_none() {
            let args = self.slot_words(p, lane).wrapping_add(2);
            // SAFETY: `args[0..6]` of the slot, words 2 to 7 of it (the offset is
            // asserted in hostcall-abi); the slot is the host's until the word below.
            let arg = |i: usize| unsafe { &*args.add(i) };
            arg(0).store(reply.result as u64, Relaxed);
            arg(5).store(bulk_out as u64, Relaxed);
            for (i, w) in words.into_iter().flatten().enumerate() {
                arg(1 + i).store(*w, Relaxed);
            }
        }
        let word = Answer {
            seq,
            status,
            inline,
        }
        .encode();
        // SAFETY: `p < len`, `lane < WARP_SIZE`; answer words are atomics.
        unsafe { &(*self.port(p)).answers[lane] }.store(word, Release);
    }

    /// Answers lane `lane` of packet `seq` on port `p` with the ticket of its parked
    /// call (`hostcall_abi::park`): the ticket and [`PARKED`] in the slot, then the
    /// answer word, not inline, with release.
    ///
    /// The caller holds the lane's answer and the launch's memory alive.
    pub fn write_parked(&self, (p, lane, seq): (usize, usize, u32), t: Ticket) {
        let args = self.slot_words(p, lane).wrapping_add(2);
        // SAFETY: `args[0]` and `args[5]` of the slot, words 2 and 7 of it; the slot is
        // the host's until the word below.
        unsafe {
            (*args).store(t.encode(), Relaxed);
            (*args.add(5)).store(PARKED, Relaxed);
        }
        let word = Answer {
            seq,
            status: Status::Ok,
            inline: None,
        }
        .encode();
        // SAFETY: `p < len`, `lane < WARP_SIZE`; answer words are atomics.
        unsafe { &(*self.port(p)).answers[lane] }.store(word, Release);
    }

    /// Asks the CPU to fetch the slots and answer words of `mask`'s lanes on port `p`
    /// now: the GPU wrote every one of those cache lines, so each is a miss, and fetched
    /// one lane at a time they would be taken one after another instead of all at once.
    /// (Bulk bytes are not prefetched: most calls send none, and the extra misses would
    /// queue behind these.)
    pub fn prefetch(&self, p: usize, mask: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let port = self.port(p);
            for lane in (0..WARP_SIZE).filter(|l| mask & (1 << l) != 0) {
                // SAFETY: prefetching is a hint and never faults; the addresses are
                // inside the port (`lane < WARP_SIZE`).
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>((&raw const (*port).lanes[lane]).cast());
                    _mm_prefetch::<_MM_HINT_T0>((&raw const (*port).answers[lane]).cast());
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (p, mask);
    }
}

const _: () = assert!(std::mem::offset_of!(LaneSlot, args) == 16);
