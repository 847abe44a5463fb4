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
//!   the program ends (`exit`): the ending thread closes every worker that runs no
//!   thread, and a running thread that waits leaves at its next look:
//!   NOT_A_WORKER, IDLE, DONE ── close ──▶ CLOSED ◀── leave ── RUNNING, RUNNING_DETACHED
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
//!
//! The end (libc-hostcall's `ending`): the thread that ends the program announces it,
//! then closes each slot with a compare-exchange from `NOT_A_WORKER`, `IDLE` or `DONE`
//! (with Release: a claim that comes later fails, and its creator, acquiring, sees the
//! announcement and leaves rather than fail), never a slot whose thread runs; a worker
//! parks for the first time with a compare-exchange from `NOT_A_WORKER`, so a close
//! that comes before the park is not overwritten, and a worker that finds its slot
//! `CLOSED` exits. A thread that sees the announcement where it waits (a futex, a join,
//! a sleep) stores `CLOSED` in its own word and exits (thread 0 has a word too); a
//! joiner that finds `CLOSED` leaves as well. Once every other word is `CLOSED` (or
//! `RETIRED`, `DONE_LAST`), the ending thread exits and the launch ends; if a thread
//! still runs after a short wait, it traps, which stops every thread.

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
/// The program ended while the worker ran no thread: its GPU thread exits (or, not
/// started yet, exits as it starts), so the launch ends as every kernel does.
pub const CLOSED: u32 = 8;

/// libc-hostcall's function that takes a stack frame in global memory for the calling
/// thread: `ptr (i64 size, i64 align)`. In a binary, every function whose locals live in
/// memory calls it on entry (ptx-builder rewrites them so): a GPU thread's own stack is
/// private to it, but Rust threads hand pointers to their locals to one another.
pub const FRAME_PUSH: &str = "__hostcall_frame_push";
/// Gives back the frame [`FRAME_PUSH`] returned: `void (ptr frame)`, before each return.
pub const FRAME_POP: &str = "__hostcall_frame_pop";
/// Bytes of each thread's frame stack: its locals that live in memory, nested calls
/// included (what is left in registers or spilled stays on the GPU stack). rayon's
/// `par_sort` of 10^6 items overflowed 64 KiB: a worker waiting in `join` runs stolen
/// jobs on top of its own frames. The host allocates them with the launch
/// ([`DeviceConfig::frame_stacks`](crate::DeviceConfig::frame_stacks)), one for each
/// thread that runs threads.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
