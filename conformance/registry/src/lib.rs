//! The registry programs as GPU kernels: `conformance_registry(i)` runs registry program
//! `i`'s worker on every thread of the launch (index: the thread's place in the grid,
//! count: the launch's size) and its `finish` on the thread that ends last, as the
//! kernel module's `conformance_threaded` runs the other threaded programs. The indices
//! are the order of `programs/registry/mod.rs`, which the host runner reads too.

#![feature(abi_ptx)]

#[path = "../../programs/registry/mod.rs"]
mod programs;
#[path = "../../kernels/src/threaded.rs"]
mod threaded;

macro_rules! table {
    ($($r:ident),*) => {
        /// Every registry program: worker and finish.
        const REGISTRY: &[(fn(usize, usize), fn(usize))] =
            &[$((programs::$r::worker, programs::$r::finish),)*];
    };
}
programs::with_registry!(table);

/// Runs registry program `index` as the kernel module runs a threaded one
/// ([`threaded::run`]).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn conformance_registry(index: u32) {
    if let Some((worker, finish)) = REGISTRY.get(index as usize) {
        threaded::run(*worker, *finish);
    }
}
