//! Each GPU thread's `ThreadArea` (its errno, pthread keys and heap caches), at its
//! global linear index, zeroed by the host before the launch, and the hand-off word of
//! `std::thread` it holds.

use core::sync::atomic::{AtomicU32, AtomicU64};

use hostcall_abi::spawn::{self, thread_at, thread_lanes};
use hostcall_abi::{ThreadArea, WARP_SIZE};
use hostcall_client::spawn::Slot;

use crate::{Nvptx, config};

/// This thread's area. Traps if the host sized the area for fewer threads (a runtime bug).
#[inline(always)] // frames.rs calls it and must take no frame
pub(crate) fn area() -> *mut ThreadArea {
    area_of(Nvptx::global_thread())
}

/// The area of the thread at global index `id`; traps past the launch's threads.
#[inline(always)] // frames.rs calls it and must take no frame
pub(crate) fn area_of(id: u64) -> *mut ThreadArea {
    let c = config();
    if id >= c.thread_capacity {
        Nvptx::trap();
    }
    // SAFETY: `id < thread_capacity`, the number of areas the host allocated.
    unsafe { (c.thread_area as *mut ThreadArea).add(id as usize) }
}

/// The hand-off word of the thread whose area is at `id` (`hostcall_abi::spawn`).
pub(crate) fn slot_at(id: u64) -> Slot<'static> {
    let a = area_of(id);
    // SAFETY: `a` is an area of this launch; the fields are plain integers of the
    // host-zeroed area, only ever accessed through these atomics.
    unsafe {
        Slot {
            state: AtomicU32::from_ptr(&raw mut (*a).spawn_state),
            start: AtomicU64::from_ptr(&raw mut (*a).spawn_start),
            arg: AtomicU64::from_ptr(&raw mut (*a).spawn_arg),
        }
    }
}

/// The lanes of each warp that run the program's threads (`DeviceConfig::thread_lanes`).
pub(crate) fn lanes() -> u64 {
    thread_lanes(config().thread_lanes)
}

/// The warps of the launch.
pub(crate) fn warps() -> u64 {
    config().thread_capacity / WARP_SIZE as u64
}

/// The global index of the program's thread `k`, 0 the main one
/// (`hostcall_abi::spawn::thread_at`).
pub(crate) fn worker(k: u64) -> u64 {
    thread_at(k, warps())
}

/// Which of the program's threads the GPU thread at global index `id` can run, if any
/// (`hostcall_abi::spawn::thread_of`).
pub(crate) fn thread_of(id: u64) -> Option<u64> {
    spawn::thread_of(id, warps(), lanes())
}

/// The threads held back for `pthread_create` (`DeviceConfig::held_back`; 0 asks for
/// every lane that runs threads, past the main thread's).
pub(crate) fn held_back() -> u64 {
    match config().held_back {
        0 => (warps() * lanes()).saturating_sub(1),
        n => u64::from(n),
    }
}
