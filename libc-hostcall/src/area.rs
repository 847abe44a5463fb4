//! Each GPU thread's `ThreadArea` (its errno, pthread keys and heap caches), at its
//! global linear index, zeroed by the host before the launch.

use hostcall_abi::ThreadArea;

use crate::{Nvptx, config};

/// This thread's area. Traps if the host sized the area for fewer threads (a runtime bug).
pub(crate) fn area() -> *mut ThreadArea {
    area_of(Nvptx::global_thread())
}

/// The area of the thread at global index `id`; traps past the launch's threads.
pub(crate) fn area_of(id: u64) -> *mut ThreadArea {
    let c = config();
    if id >= c.thread_capacity {
        Nvptx::trap();
    }
    // SAFETY: `id < thread_capacity`, the number of areas the host allocated.
    unsafe { (c.thread_area as *mut ThreadArea).add(id as usize) }
}
