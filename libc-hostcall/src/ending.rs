//! How the program's end reaches every GPU thread. On Linux `exit` ends every thread of
//! the process wherever it is; on the GPU only a `trap` does that, and a trap costs the
//! driver's fault handling: 0.35 s of an H100 launch that ended 1 ms after `main`
//! returned (`bench-results/h100-issue33.md`). So in a binary (feature `start`) the
//! thread that ends the program announces it ([`END`]), and every other thread that
//! waits (a parked held-back thread; a thread in a futex, a join, a sleep, a yield:
//! rayon's idle workers, a pool's threads blocked on a channel) leaves at its next look:
//! it stores `CLOSED` in its hand-off word (`hostcall_abi::spawn`; thread 0, the main
//! thread, has a word too, otherwise unused), counts itself gone and exits. Once the
//! count reaches every other thread, the ending thread exits too, and the kernel ends as
//! any kernel does. A thread still busy after [`LEAVE_WAIT_NS`] (computing, or in a
//! hostcall) is stopped by the trap, as before. The ending thread reads one count, not
//! each thread's word: closing 16,927 held-back threads one word at a time took 25 ms.
//!
//! Nothing a thread did is undone or waited for: as on Linux, the process ends under it.

use hostcall_client::spawn::End;

use crate::Nvptx;
use crate::area::slot_at;

/// The program's end: announced once a thread has begun to end it, and the count of
/// threads gone.
pub(crate) static END: End = End::new();

/// How long the ending thread waits for the others to leave before it traps: well past
/// the longest pause between two looks of a waiting thread (the futex's 32 µs), far
/// below the trap's own cost.
#[cfg(feature = "start")]
const LEAVE_WAIT_NS: u64 = 2_000_000;

/// Where a waiting thread looks: once the program is ending, it leaves (its GPU thread
/// exits) instead of waiting on.
pub(crate) fn check_point() {
    if END.announced() {
        leave()
    }
}

/// Ends the calling thread for the program's end: says it has gone, then exits.
fn leave() -> ! {
    slot_at(Nvptx::global_thread()).leave(&END);
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
/// gone: the held-back threads and the main thread (or, when the caller is the main
/// thread, the held-back ones), each counted as it leaves or retires. A second thread
/// ending the program meanwhile leaves, as a waiting one does.
#[cfg(feature = "start")]
fn others_left() -> bool {
    use core::sync::atomic::Ordering;

    if !END.announce() {
        leave()
    }
    // Every thread but the caller: the held-back ones and the main thread, less itself.
    let others = crate::launch_state().workers.load(Ordering::Acquire);
    let deadline = Nvptx::globaltimer_ns() + LEAVE_WAIT_NS;
    END.wait_gone::<Nvptx>(others, || Nvptx::globaltimer_ns() > deadline)
}
