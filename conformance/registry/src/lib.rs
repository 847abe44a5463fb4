//! The registry programs as GPU kernels: `conformance_registry(i)` runs registry program
//! `i`'s worker on every thread of the launch (index: the thread's place in the grid,
//! count: the launch's size) and its `finish` on the thread that ends last, as the
//! kernel module's `conformance_threaded` runs the other threaded programs. The indices
//! are the order of `programs/registry/mod.rs`, which the host runner reads too.

#![feature(abi_ptx)]

use std::sync::atomic::{AtomicU64, Ordering};

use libc_hostcall::gpu;

#[path = "../../programs/registry/mod.rs"]
mod programs;

macro_rules! table {
    ($($r:ident),*) => {
        /// Every registry program: worker and finish.
        const REGISTRY: &[(fn(usize, usize), fn(usize))] =
            &[$((programs::$r::worker, programs::$r::finish),)*];
    };
}
programs::with_registry!(table);

/// Workers that have returned in this launch.
static DONE: AtomicU64 = AtomicU64::new(0);

/// Runs registry program `index`: its worker on every thread, then its finish on the
/// thread whose worker returned last (every other worker happened before it).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn conformance_registry(index: u32) {
    let Some((worker, finish)) = REGISTRY.get(index as usize) else {
        return;
    };
    let count = gpu::launch_threads();
    worker(gpu::global_thread() as usize, count as usize);
    if DONE.fetch_add(1, Ordering::AcqRel) + 1 == count {
        finish(count as usize);
    }
}
