//! How a threaded program runs as a kernel: its worker on every thread of the launch
//! (index: the thread's place in the grid, count: the launch's size), then its finish on
//! the thread whose worker returned last (every other worker happened before it). Shared
//! by the kernel module and the registry module (`conformance/registry`, by `#[path]`).

use std::sync::atomic::{AtomicU64, Ordering};

use libc_hostcall::gpu;

/// Workers that have returned in this launch.
static DONE: AtomicU64 = AtomicU64::new(0);

/// Runs `worker` on the calling thread, and `finish` if it is the last to return.
pub fn run(worker: fn(usize, usize), finish: fn(usize)) {
    let count = gpu::launch_threads();
    worker(gpu::global_thread() as usize, count as usize);
    if DONE.fetch_add(1, Ordering::AcqRel) + 1 == count {
        finish(count as usize);
    }
}
