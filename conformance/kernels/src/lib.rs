//! The conformance programs as GPU kernels. `conformance_single(i)` runs single or
//! unsupported program `i` on each thread; `conformance_threaded(i)` runs threaded
//! program `i`'s worker on every thread of the launch (index: the thread's place in the
//! grid, count: the launch's size) and its `finish` on the thread that ends last. The
//! indices are the order of `programs/mod.rs`, which the host runner reads too. Spawning
//! programs are `conformance/spawning`'s, not this module's.

#![feature(abi_ptx)]

mod threaded;

/// The spawning programs among them run as `conformance/spawning`'s `main`, not here.
#[path = "../../programs/mod.rs"]
#[allow(dead_code)]
mod programs;

macro_rules! tables {
    (
        single: [$($s:ident),*],
        threaded: [$($t:ident),*],
        unsupported: [$($u:ident),*],
        spawning: [$($p:ident),*],
        limits: [$($l:ident),*] $(,)?
    ) => {
        /// Single programs, then unsupported ones.
        const SINGLE: &[fn()] = &[$(programs::$s::main,)* $(programs::$u::main,)*];
        /// Threaded programs: worker and finish.
        const THREADED: &[(fn(usize, usize), fn(usize))] =
            &[$((programs::$t::worker, programs::$t::finish),)*];
    };
}
programs::with_suite!(tables);

/// Runs single program `index` (out of range: nothing).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn conformance_single(index: u32) {
    if let Some(main) = SINGLE.get(index as usize) {
        main();
    }
}

/// Runs threaded program `index` ([`threaded::run`]).
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn conformance_threaded(index: u32) {
    if let Some((worker, finish)) = THREADED.get(index as usize) {
        threaded::run(*worker, *finish);
    }
}
