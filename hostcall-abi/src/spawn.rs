//! Threads on the GPU: `pthread_create` hands a thread to a GPU thread held back at
//! launch. The first [`DeviceConfig::thread_lanes`](crate::DeviceConfig::thread_lanes)
//! lanes of each warp run threads (global thread 0 the main thread, the others held
//! back; the warp's other lanes end at once), numbered across the warps first
//! ([`thread_at`]): the first threads each have a warp's issue slots to themselves, later
//! ones share. Each held-back thread owns a hand-off word, `ThreadArea::spawn_state`,
//! that moves through these states; `hostcall_client::spawn` implements the moves. All
//! memory is device memory: nothing crosses PCIe.
//!
//! ```text
//!            park            claim (creator)        start, arg; Release
//!   NOT_A_WORKER ──▶ IDLE ──────────────────▶ CLAIMED ─────────────────▶ RUNNING
//!                     ▲ ▲                                                  │   │ detach
//!                     │ └── join: Acquire DONE, then Release IDLE ── DONE ◀┘   ▼
//!                     └────────────── the thread ends, detached ──── RUNNING_DETACHED
//!
//!   a thread that ends in a panic retires its worker (no unwinding: its frames stay):
//!   RUNNING ──▶ DONE_LAST ── join ──▶ RETIRED        RUNNING_DETACHED ──▶ RETIRED
//!
//!   the program ends (`exit`): every thread that waits leaves at its next look and
//!   counts itself gone (a parked worker, a thread in a futex, a join, a sleep):
//!   IDLE, DONE, RUNNING, RUNNING_DETACHED ── leave ──▶ CLOSED
//! ```
//!
//! Ordering: the creator writes the start routine and argument, then stores `RUNNING`
//! with Release; the worker loads it with Acquire before reading them. The worker runs
//! the thread and its thread-local destructors, then stores `DONE` with Release (a
//! compare-exchange from `RUNNING`, which fails only if the thread was detached); the
//! joiner loads `DONE` with Acquire, so all the thread did happens before `join`
//! returns. A slot becomes `IDLE` again only after its last use (join, or the end of
//! a detached thread), so a `pthread_t` is never reused while it can still be joined.
//! `DONE_LAST` is stored and loaded as `DONE` is; a `RETIRED` slot is never claimed.
//! Between its claim and `RUNNING` the creator readies the worker (gives it a frame
//! stack, which the Release carries to it); if it cannot, it stores `IDLE` back with a
//! compare-exchange from `CLAIMED` and the spawn fails.
//!
//! The end (libc-hostcall's `ending`, `hostcall_client::spawn::End`): the thread that
//! ends the program announces it (a swap with AcqRel: a second thread ending it at once
//! leaves instead). A parked worker looks at the announcement before each look at its
//! word, so one parked before the announcement, or after it (a worker that starts late),
//! leaves at its next look; a thread that waits (a futex, a join, a sleep) looks there
//! too. A thread that leaves stores `CLOSED` in its own word with Release (a joiner that
//! finds it leaves as well, and a creator that finds no idle worker but closed ones,
//! acquiring, sees the announcement and leaves rather than fail), then adds one to the
//! count of threads gone with Release and exits; a worker that retires after a panic
//! counts itself as it exits. The ending thread waits until the count, loaded with
//! Acquire, reaches every other thread (the held-back ones and the main thread, less
//! itself), then exits, and the launch ends; if a thread still runs after a short wait,
//! it traps, which stops every thread. `hostcall-model`'s `check_spawn` explores these
//! moves.

use crate::WARP_SIZE;

/// Not a held-back thread (the zeroed value).
pub const NOT_A_WORKER: u32 = 0;
/// Parked, waiting for a thread to run.
pub const IDLE: u32 = 1;
/// Taken by a creator that is writing the thread's start routine.
pub const CLAIMED: u32 = 2;
/// Running a thread that someone may join.
pub const RUNNING: u32 = 3;
/// Running a detached thread: nobody joins it, and it parks again when it ends.
pub const RUNNING_DETACHED: u32 = 4;
/// The thread ended; its joiner has not yet returned.
pub const DONE: u32 = 5;
/// The thread ended in a panic that std stored for its joiner, and its worker has
/// exited: the joiner leaves the slot `RETIRED` instead of `IDLE`.
pub const DONE_LAST: u32 = 6;
/// No worker: its GPU thread exited after a panic, so it is never given a thread again.
pub const RETIRED: u32 = 7;
/// The thread here left for the program's end (a parked worker, or a thread where it
/// waited): its GPU thread has exited or is about to, counted gone.
pub const CLOSED: u32 = 8;

/// libc-hostcall's function that takes a stack frame in global memory for the calling
/// thread: `ptr (i64 size, i64 align)`. In a binary, every function whose locals live in
/// memory calls it on entry (ptx-builder rewrites them so): a GPU thread's own stack is
/// private to it, but Rust threads hand pointers to their locals to one another.
pub const FRAME_PUSH: &str = "__hostcall_frame_push";
/// Gives back the frame [`FRAME_PUSH`] returned: `void (ptr frame)`, before each return.
pub const FRAME_POP: &str = "__hostcall_frame_pop";

/// Where [`FRAME_PUSH`]'s frame starts, as an offset in the frame stack at address
/// `base` whose top is at offset `top`: past the 8 bytes that keep the previous top, at
/// an address (not merely an offset) that is a multiple of `align` (a power of two), so
/// that a local of 64-byte alignment (rayon's jobs) is where Rust's checks look for it.
pub const fn frame_start(base: usize, top: usize, align: usize) -> usize {
    (base + top + 8).next_multiple_of(align) - base
}
/// Bytes of each thread's frame stack: its locals that live in memory, nested calls
/// included (what is left in registers or spilled stays on the GPU stack). rayon's
/// `par_sort` of 10^6 items overflowed 64 KiB: a worker waiting in `join` runs stolen
/// jobs on top of its own frames. libc-hostcall cuts one from the heap for each GPU
/// thread that runs threads, when it first needs one
/// ([`ThreadArea::frame_stack`](crate::ThreadArea::frame_stack)).
pub const FRAME_STACK_BYTES: usize = 1 << 20;

/// The lanes of each warp that run threads, from the configuration's word (0 reads as 1,
/// more than a warp as a warp).
pub const fn thread_lanes(word: u32) -> u64 {
    match word {
        0 => 1,
        n if n as usize > WARP_SIZE => WARP_SIZE as u64,
        n => n as u64,
    }
}

/// The global index of the program's thread `k` (0 the main thread, then the held-back
/// ones) in a launch of `warps` warps: across the warps first, then the next lane of
/// each, so that the first threads (a pool sized by `available_parallelism`, say) each
/// have a warp to themselves, and later ones share.
pub const fn thread_at(k: u64, warps: u64) -> u64 {
    k % warps * WARP_SIZE as u64 + k / warps
}

/// The inverse of [`thread_at`]: which of the program's threads the GPU thread at global
/// index `id` can run when the first `lanes` lanes of each of `warps` warps run threads,
/// or `None` for a lane that runs none. It is also the index of its frame stack.
pub const fn thread_of(id: u64, warps: u64, lanes: u64) -> Option<u64> {
    let lane = id % WARP_SIZE as u64;
    if lane < lanes {
        Some(lane * warps + id / WARP_SIZE as u64)
    } else {
        None
    }
}

/// The processors a program of `held_back` threads in a launch of `warps` warps on a
/// device of `multiprocessors` SMs (0: unknown) reports (`available_parallelism`, which
/// sizes a pool such as rayon's): one thread per multiprocessor, and no more than have a
/// warp to themselves (all of them in a launch of one warp), but never more than half
/// the held-back threads, at least 1.
///
/// One per multiprocessor because rayon's pool was measured fastest there (H100,
/// `h100-issue33.md`): a pool of 132 summed 10^8 `u64`s in 167–190 ms, one of 528 (a
/// thread per warp scheduler) in 256–301 ms and one of 2,112 in 1.4 s, since every
/// thread more steals more: rayon splits a job again each time one is stolen, and at
/// 528 threads it ran 3.5 million leaf jobs, most of one element, its workers busy 12 %
/// of the time (47 % at 132). The half: a pool sized by it leaves the program threads
/// of its own to spawn beside it, as on a CPU, where the thread limit is far past the
/// processor count; without it a launch of one thread per warp gave rayon's pool every
/// thread, and the program's next `thread::spawn` failed with `EAGAIN`.
pub const fn processors(held_back: u32, warps: u32, multiprocessors: u32) -> u32 {
    let mut n = held_back / 2;
    let own_warp = warps.saturating_sub(1);
    if own_warp != 0 && own_warp < n {
        n = own_warp;
    }
    if multiprocessors != 0 && multiprocessors < n {
        n = multiprocessors;
    }
    if n == 0 { 1 } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_starts_at_an_aligned_address_past_the_saved_top() {
        // The frame stack of the H200 run whose rayon job was misaligned: 32-aligned.
        let base = 0x3_02cd_a240;
        for align in [8, 16, 64, 128] {
            for top in [0, 8, 24, 100, 4096] {
                let start = frame_start(base, top, align);
                assert_eq!((base + start) % align, 0, "{align} {top}");
                assert!(start >= top + 8 && start < top + 8 + align, "{align} {top}");
            }
        }
    }

    #[test]
    fn threads_spread_over_the_warps_before_they_share_one() {
        for (warps, lanes) in [(1, 32), (17, 1), (17, 7), (529, 32)] {
            for k in 0..warps * lanes {
                let id = thread_at(k, warps);
                assert!(
                    id < warps * WARP_SIZE as u64,
                    "{k} of {warps}x{lanes}: {id}"
                );
                assert_eq!(thread_of(id, warps, lanes), Some(k));
            }
        }
        assert_eq!(thread_at(1, 529), 32);
        assert_eq!(thread_at(529, 529), 1);
        assert_eq!(thread_of(33, 529, 1), None);
        assert_eq!(thread_lanes(0), 1);
        assert_eq!(thread_lanes(33), 32);
    }

    /// A program that starts a pool of `available_parallelism` threads (rayon's) can
    /// still spawn threads of its own beside it, whatever the launch's shape.
    #[test]
    fn a_pool_sized_by_the_processors_leaves_threads_to_spawn() {
        for (held_back, warps) in [
            (16, 17),
            (16, 1),
            (16, 5),
            (528, 529),
            (16_926, 529),
            (2, 3),
        ] {
            for sms in [0, 1, 132] {
                let p = processors(held_back, warps, sms);
                assert!(
                    p >= 1 && p <= held_back / 2,
                    "{held_back} in {warps} warps on {sms} SMs: {p}"
                );
            }
        }
        assert_eq!(processors(1, 2, 132), 1, "at least one");
        assert_eq!(processors(0, 1, 0), 1, "at least one");
    }

    /// rayon's pool is fastest at one thread per multiprocessor (see [`processors`]).
    #[test]
    fn the_processors_are_one_per_multiprocessor_where_known() {
        assert_eq!(
            processors(16_926, 529, 132),
            132,
            "an H100's default launch"
        );
        assert_eq!(processors(16_926, 529, 0), 528, "unknown: one a warp");
        assert_eq!(
            processors(64, 17, 132),
            16,
            "fewer warps than SMs: one a warp"
        );
    }
}
