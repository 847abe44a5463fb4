//! How the program's end reaches every GPU thread. On Linux `exit` ends every thread of
//! the process wherever it is; on the GPU only a `trap` does that, and a trap costs the
//! driver's fault handling: 0.35 s of an H100 launch that ended 1 ms after `main`
//! returned (`bench-results/h100-issue33.md`). So in a binary (feature `start`) the
//! thread that ends the program announces it (`ENDING`), closes the held-back threads
//! that run nothing (`Slot::close`), and waits a moment for the threads that are waiting
//! (in a futex, a join, a sleep, a yield: rayon's idle workers, a pool's threads blocked
//! on a channel) to see it at their next look and leave; then it exits too, and the
//! kernel ends as any kernel does. A thread still busy after [`LEAVE_WAIT_NS`]
//! (computing, or in a hostcall) is stopped by the trap, as before.
//!
//! A thread that leaves stores `CLOSED` in its own hand-off word (`hostcall_abi::spawn`;
//! thread 0, the main thread, has a word too, otherwise unused), so the ending thread
//! sees who has gone. Nothing it did is undone or waited for: as on Linux, the process
//! ends under it.

use core::sync::atomic::{AtomicU32, Ordering};

use hostcall_abi::spawn::CLOSED;

use crate::Nvptx;
use crate::area::slot_at;

/// Set once a thread has begun to end the program.
static ENDING: AtomicU32 = AtomicU32::new(0);

/// How long the ending thread waits for the others to leave before it traps: well past
/// the longest pause between two looks of a waiting thread (the futex's 32 µs), far
/// below the trap's own cost.
#[cfg(feature = "start")]
const LEAVE_WAIT_NS: u64 = 2_000_000;

/// Where a waiting thread looks: once the program is ending, it leaves (its GPU thread
/// exits) instead of waiting on.
pub(crate) fn check_point() {
    if ENDING.load(Ordering::Relaxed) != 0 {
        leave()
    }
}

/// Ends the calling thread for the program's end: says it has gone, then exits.
fn leave() -> ! {
    slot_at(Nvptx::global_thread())
        .state
        .store(CLOSED, Ordering::Release);
    Nvptx::exit_thread()
}

/// Ends the launch once the host knows how the program ended (`exit`, `abort`): every
/// other thread gone, the caller exits; else a trap stops them all. A kernel launch
/// whose every thread runs the kernel (no feature `start`) always traps.
pub(crate) fn stop() -> ! {
    #[cfg(feature = "start")]
    if others_left() {
        Nvptx::exit_thread()
    }
    Nvptx::trap()
}

/// Announces the end and waits up to [`LEAVE_WAIT_NS`] for every other thread to be
/// gone: each held-back thread closed, retired or left, and the main thread left (when
/// the caller is not it). A second thread ending the program meanwhile leaves, as a
/// waiting one does.
#[cfg(feature = "start")]
fn others_left() -> bool {
    use hostcall_client::Platform;

    if ENDING.swap(1, Ordering::AcqRel) != 0 {
        leave()
    }
    let me = Nvptx::global_thread();
    let workers = u64::from(crate::launch_state().workers.load(Ordering::Acquire));
    let gone = || {
        let main = me == 0 || slot_at(0).state.load(Ordering::Acquire) == CLOSED;
        main && (1..=workers)
            .map(crate::area::worker)
            .filter(|&id| id != me)
            .all(|id| slot_at(id).close())
    };
    let deadline = Nvptx::globaltimer_ns() + LEAVE_WAIT_NS;
    let mut pause = 200;
    while !gone() {
        if Nvptx::globaltimer_ns() > deadline {
            return false;
        }
        Nvptx::nanosleep(pause);
        pause = (pause * 2).min(20_000);
    }
    true
}
