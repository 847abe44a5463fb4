//! A binary crate's `fn main` as the kernel `START_KERNEL` (feature `start`): what a C
//! runtime's `_start` does on Linux. rustc's `main(argc, argv)` runs std's start-up and
//! the program's `main`, and returns the exit code a process would end with.
//!
//! The launch is whole warps: global thread 0 runs `main`; the next
//! `DeviceConfig::held_back` of the lanes that run threads (the first
//! `DeviceConfig::thread_lanes` of each warp) are held back for `pthread_create`; the
//! other lanes end at once.

use core::ffi::{c_char, c_int};
use core::sync::atomic::Ordering;

use crate::Nvptx;

unsafe extern "C" {
    /// rustc's entry shim of the binary crate (`std::rt::lang_start` around the
    /// program's `main`).
    fn main(argc: c_int, argv: *const *const c_char) -> c_int;
}

/// Runs the program's `main` with the host's `argv` on thread 0 and holds the other
/// warps back for its threads, then ends the run with `main`'s exit code.
/// `hostcall_abi::START_KERNEL` names this kernel.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn __hostcall_start() {
    let me = Nvptx::global_thread();
    let held_back = crate::area::held_back();
    match crate::area::thread_of(me) {
        // SAFETY: the calling thread's own area. The host sized the heap for this stack
        // and backed it.
        Some(0) if unsafe { crate::frames::give_stack(crate::area::area(), false) } => {}
        Some(0) => Nvptx::trap(),
        Some(k) if k <= held_back => crate::thread::serve_spawned_threads(),
        _ => return,
    }
    crate::launch_state()
        .workers
        .store(held_back as u32, Ordering::Release);
    let mut argc = 0;
    // SAFETY: `argc` is a local to write.
    let argv = unsafe { crate::env::__hostcall_argv(&mut argc) };
    // SAFETY: rustc's shim takes the process's argc and its NULL-ended argv.
    let code = unsafe { main(argc as c_int, argv) };
    crate::process::exit(code)
}
