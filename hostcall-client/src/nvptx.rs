//! [`Platform`] on NVIDIA GPUs: each primitive is one or two PTX instructions.
//!
//! The warp-synchronous primitives are LLVM's NVVM intrinsics, not inline assembly:
//! LLVM declares those intrinsics `convergent`, so no pass may move them across control
//! flow that changes which lanes execute them, or merge two of them (inline assembly
//! carries no such attribute).

use core::arch::asm;

use core::sync::atomic::AtomicU32;

use hostcall_abi::DeviceConfig;

use crate::{Channel, Platform};

/// Filled by the host before every launch (see `hostcall_abi::CONFIG_SYMBOL`). Defined
/// here, with the transport, so that typed service stubs reach the channel in any
/// kernel; libc-hostcall reads it too.
#[unsafe(no_mangle)]
#[used]
pub static mut __hostcall_config: DeviceConfig = DeviceConfig::UNSET;

/// The host's configuration for this launch. A plain (not volatile) read, so each caller
/// loads only the fields it uses: this runs on every `malloc`, `errno` and hostcall. The
/// global stays externally visible (ptx-builder keeps it out of internalization), so the
/// compiler cannot fold it to its zero initializer.
pub fn config() -> DeviceConfig {
    // SAFETY: the host writes the config before the launch and nothing writes it during
    // one, so this read races with no write.
    unsafe { (&raw const __hostcall_config).read() }
}

/// The channel to the host.
pub fn channel() -> Channel {
    let c = config();
    if c.num_ports == 0 {
        // No host runtime set this launch up: there is nobody to report to.
        Nvptx::trap();
    }
    // SAFETY: the host runtime filled the config with a channel it serves for the whole
    // launch (checked above that it did fill it).
    unsafe { Channel::new(&c) }
}

// SAFETY (for every item): these are LLVM's own declarations of the intrinsics, with
// their exact LLVM types; LLVM supplies their attributes (`convergent` among them).
unsafe extern "C" {
    #[link_name = "llvm.nvvm.activemask"]
    fn nvvm_activemask() -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn nvvm_shfl_sync_idx(mask: u32, value: u32, src: u32, clamp: u32) -> u32;
    #[link_name = "llvm.nvvm.match.any.sync.i32"]
    fn nvvm_match_any_sync(mask: u32, value: u32) -> u32;
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    fn nvvm_bar_warp_sync(mask: u32);
}

/// The calling GPU thread.
pub struct Nvptx;

/// Reads a 32-bit special register.
macro_rules! sreg {
    ($name:literal) => {{
        let v: u32;
        // SAFETY: reading a special register has no side effects.
        unsafe { asm!(concat!("mov.u32 {}, ", $name, ";"), out(reg32) v, options(nomem, nostack, pure)) };
        v
    }};
}

impl Nvptx {
    /// This thread's linear index in the whole grid.
    pub fn global_thread() -> u64 {
        let (block, thread) = Self::caller();
        block as u64 * Self::block_threads() as u64 + thread as u64
    }

    /// Nanoseconds from the GPU's global timer (`%globaltimer`).
    pub fn globaltimer_ns() -> u64 {
        let v: u64;
        // SAFETY: reading a special register has no side effects.
        unsafe { asm!("mov.u64 {}, %globaltimer;", out(reg64) v, options(nomem, nostack)) };
        v
    }

    /// The SM's cycle counter (`%clock64`).
    pub fn clock() -> u64 {
        let v: u64;
        // SAFETY: reading a special register has no side effects.
        unsafe { asm!("mov.u64 {}, %clock64;", out(reg64) v, options(nomem, nostack)) };
        v
    }

    /// Ends the whole kernel with an error the host sees as a launch failure.
    pub fn trap() -> ! {
        // SAFETY: `trap` stops the kernel; nothing after it runs.
        unsafe { asm!("trap;", options(noreturn, nostack)) }
    }

    /// Ends the calling GPU thread alone; the rest of the launch runs on (an exited
    /// thread counts as arrived at every barrier).
    pub fn exit_thread() -> ! {
        // SAFETY: `exit` ends this thread; nothing after it runs.
        unsafe { asm!("exit;", options(noreturn, nostack)) }
    }
}

impl Platform for Nvptx {
    fn lane_id() -> u32 {
        sreg!("%laneid")
    }

    fn active_mask() -> u32 {
        // SAFETY: `activemask` only reads the warp's state.
        unsafe { nvvm_activemask() }
    }

    fn broadcast(mask: u32, value: u32, src: u32) -> u32 {
        // SAFETY: every lane of `mask` executes this (the trait's contract), as
        // `shfl.sync` requires; clamp 31 addresses the whole warp.
        unsafe { nvvm_shfl_sync_idx(mask, value, src, 31) }
    }

    fn match_any(mask: u32, value: u32) -> u32 {
        // SAFETY: every lane of `mask` executes this (the trait's contract).
        unsafe { nvvm_match_any_sync(mask, value) }
    }

    fn sync_warp(mask: u32) {
        // SAFETY: every lane of `mask` executes this (the trait's contract). The intrinsic
        // may read and write memory, so no access moves across it.
        unsafe { nvvm_bar_warp_sync(mask) };
    }

    fn lock_or(word: &AtomicU32, bits: u32) -> u32 {
        let old: u32;
        // SAFETY: `word` is a valid, aligned 32-bit atomic (a reference); the OR is atomic.
        unsafe {
            asm!("atom.acquire.gpu.or.b32 {o}, [{a}], {b};",
                o = out(reg32) old, a = in(reg64) word.as_ptr(), b = in(reg32) bits,
                options(nostack))
        };
        old
    }

    fn lock_store(word: &AtomicU32, value: u32) {
        // SAFETY: as above; a release store to an atomic word.
        unsafe {
            asm!("st.release.gpu.u32 [{a}], {v};",
                a = in(reg64) word.as_ptr(), v = in(reg32) value, options(nostack))
        };
    }

    fn fence_system() {
        // SAFETY: a fence has no effect but ordering.
        unsafe { asm!("fence.acq_rel.sys;", options(nostack)) };
    }

    fn load_acquire_system(word: &AtomicU32) -> u32 {
        let v: u32;
        // SAFETY: `word` is a valid, aligned 32-bit atomic (a reference); an acquire load.
        unsafe {
            asm!("ld.acquire.sys.u32 {v}, [{a}];",
                v = out(reg32) v, a = in(reg64) word.as_ptr(), options(nostack))
        };
        v
    }

    fn store_release_system(word: &AtomicU32, value: u32) {
        // SAFETY: as above; a release store to an atomic word.
        unsafe {
            asm!("st.release.sys.u32 [{a}], {v};",
                a = in(reg64) word.as_ptr(), v = in(reg32) value, options(nostack))
        };
    }

    fn nanosleep(ns: u32) {
        // SAFETY: sleeping has no effect on memory.
        unsafe { asm!("nanosleep.u32 {};", in(reg32) ns, options(nomem, nostack)) };
    }

    fn spin_cycles(cycles: u32) {
        let start = Self::clock();
        while Self::clock().wrapping_sub(start) < cycles as u64 {}
    }

    fn is_global(ptr: *const u8) -> bool {
        let g: u32;
        // SAFETY: `isspacep` only inspects the address.
        unsafe {
            asm!("{{ .reg .pred p; isspacep.global p, {a}; selp.u32 {g}, 1, 0, p; }}",
                a = in(reg64) ptr, g = out(reg32) g, options(nomem, nostack, pure))
        };
        g != 0
    }

    fn now_ns() -> u64 {
        Self::globaltimer_ns()
    }

    fn trap() -> ! {
        Self::trap()
    }

    fn block_threads() -> u32 {
        sreg!("%ntid.x") * sreg!("%ntid.y") * sreg!("%ntid.z")
    }

    fn caller() -> (u32, u32) {
        let block = sreg!("%ctaid.x")
            + sreg!("%nctaid.x") * (sreg!("%ctaid.y") + sreg!("%nctaid.y") * sreg!("%ctaid.z"));
        let thread = sreg!("%tid.x")
            + sreg!("%ntid.x") * (sreg!("%tid.y") + sreg!("%ntid.y") * sreg!("%tid.z"));
        (block, thread)
    }
}
