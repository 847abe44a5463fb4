//! The GPU half of the hostcall transport, written as plain Rust over the few hardware
//! primitives of [`Platform`]. On nvptx64 those are PTX instructions (`nvptx::Nvptx`);
//! on the host the emulator (`hostcall-emulator`) implements them with OS threads, so the
//! exact code that runs on the GPU is what the CPU tests drive.
//!
//! [`Channel::call`] is one round trip for the calling lane, travelling in one packet with
//! every lane of its warp that calls at the same time. Declared services
//! ([`service!`](macro@service), std's in [`std_services`], both `hostcall_abi`'s) are called through
//! their [`typed::Client`], whose [`Caller`](hostcall_abi::typed::Caller) here is
//! [`typed::OnChannel`]; [`fd_io`] reads and writes an fd with std's `Fs.read` and
//! `Fs.write` (in as many calls as a buffer needs, or by DMA) and posts stdout's and
//! stderr's output in ticket order. libc-hostcall's C functions call one or the other.

#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(asm_experimental_arch, link_llvm_intrinsics)
)]
// The NVVM intrinsics are the only way to reach the convergent warp primitives from Rust
// (`core::arch::nvptx` has none of them); see `nvptx`.
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

mod channel;
mod copy;
pub mod fd_io;
#[cfg(target_arch = "nvptx64")]
pub mod nvptx;
pub mod spawn;
pub mod stages;
pub mod stream;
pub mod typed;

pub use channel::{Channel, Numbering, Reply, Request};
pub use hostcall_abi::typed::{DeviceSlice, Errno, Filled, Plain};
pub use hostcall_abi::{service, std_services};

use core::sync::atomic::AtomicU32;

/// The hardware primitives the transport needs. All functions act for the calling thread.
///
/// The warp-synchronous ones (`broadcast`, `match_any`, `sync_warp`) follow the GPU's
/// rules, which the transport is written for: they are matched by kind and mask value,
/// not by program location, and a lane that has exited counts as arrived. Implementations
/// must make `sync_warp` a memory barrier among the lanes of `mask` (writes before it by
/// one lane are visible after it to the others), as PTX's `bar.warp.sync` is.
pub trait Platform {
    /// This thread's lane within its warp, `0..32`.
    fn lane_id() -> u32;
    /// Lanes of this warp executing this call together now (bit i = lane i): some subset
    /// of the lanes that reach it, always including the caller.
    fn active_mask() -> u32;
    /// `value` as held by lane `src` of `mask`; every lane of `mask` must call it.
    fn broadcast(mask: u32, value: u32, src: u32) -> u32;
    /// The lanes of `mask` whose `value` equals the caller's; every lane of `mask` must
    /// call it.
    fn match_any(mask: u32, value: u32) -> u32;
    /// Waits until every lane of `mask` has reached a `sync_warp(mask)`.
    fn sync_warp(mask: u32);
    /// A system-scope release/acquire fence: orders this thread's (and, through
    /// `sync_warp`, its warp's) memory accesses with respect to the host.
    ///
    /// This and the two below are the transport's only hand-offs with the host, and
    /// they name the system scope themselves: a binary's other atomics are built at GPU
    /// scope (ptx-builder's `scope`), which does not order anything with the host.
    fn fence_system();
    /// Reads a word the host writes, with acquire semantics at system scope.
    fn load_acquire_system(word: &AtomicU32) -> u32;
    /// Stores into a word the host reads, with release semantics at system scope.
    fn store_release_system(word: &AtomicU32, value: u32);
    /// Atomic OR of `bits` into a lock word in device memory that only GPU threads use,
    /// with acquire semantics at GPU scope (no system-wide ordering, which costs far
    /// more); returns the word's previous value.
    fn lock_or(word: &AtomicU32, bits: u32) -> u32;
    /// Stores `value` into such a lock word with release semantics at GPU scope.
    fn lock_store(word: &AtomicU32, value: u32);
    /// Sleeps roughly `ns` nanoseconds (a hint; may return early, and on a GPU often
    /// sleeps far longer than a short `ns`).
    fn nanosleep(ns: u32);
    /// Busy-waits about `cycles` clock cycles (a sleep is too coarse for sub-microsecond
    /// delays).
    fn spin_cycles(cycles: u32);
    /// The caller's linear block index and thread index within the block, for reports.
    fn caller() -> (u32, u32);
    /// Threads in each block of the launch.
    fn block_threads() -> u32;
    /// Whether `ptr` addresses global memory, which the host can copy by DMA while the
    /// kernel runs (a thread's stack, in local memory, it cannot).
    fn is_global(ptr: *const u8) -> bool;
    /// Nanoseconds from a clock shared by every thread of the launch.
    fn now_ns() -> u64;
    /// Ends the kernel (every thread of the launch) as a fault the host sees.
    fn trap() -> !;
    /// The id to call the declared service `name` by, whose module slot holds `slot`:
    /// on the GPU the slot itself, which the host filled when it loaded the module; an
    /// emulator keeps each launch's ids apart.
    fn service_id(slot: &AtomicU32, name: &str) -> u32 {
        let _ = name;
        slot.load(core::sync::atomic::Ordering::Relaxed)
    }
}
