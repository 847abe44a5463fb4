//! The libc of the GPU: every C function std's Linux code reaches, defined for nvptx64.
//!
//! Local on the GPU where the GPU can do it (heap, `errno`, pthread keys, futex, clocks,
//! thread ids); by hostcall where only the OS can (files, stdio, cwd, environment,
//! sockets, randomness, exit). Functions that make no sense on a GPU fail cleanly with `ENOSYS`.
//! Types follow x86_64 Linux (LP64), the layout libc is compiled with for this target.
//!
//! A kernel crate links this in with `use libc_hostcall as _;`. With the `start` feature
//! it also holds the kernel that runs a binary crate's `fn main` (`ptx_builder` adds it).

#![no_std]
#![cfg(target_arch = "nvptx64")]
#![feature(abi_ptx)]

mod area;
mod dir;
mod ending;
mod env;
mod errno;
#[cfg(feature = "start")]
mod frames;
mod fs;
mod heap;
mod io;
mod misc;
mod net;
mod process;
#[cfg(feature = "start")]
mod start;
mod thread;
mod time;
mod unsupported;
mod unwind;

use hostcall_abi::{ABI_VERSION, DeviceConfig, LaunchState};
pub use hostcall_client::nvptx::Nvptx;

use hostcall_client::nvptx::channel;
use hostcall_client::typed::Client;

/// The ABI this module speaks; the host refuses to launch on a mismatch.
#[unsafe(no_mangle)]
#[used]
pub static __hostcall_abi_version: u32 = ABI_VERSION;

/// The host's configuration for this launch (`hostcall_client::nvptx::config`).
fn config() -> DeviceConfig {
    hostcall_client::nvptx::config()
}

/// The host's declared services `S` (`dyn Fs`, `dyn Net`, ...) as this thread calls them.
fn host<S: ?Sized>() -> Client<Nvptx, S> {
    Client::gpu()
}

/// The bytes of a C string, without its NUL: how every call that takes a C string reads it.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
unsafe fn cstr<'a>(p: *const core::ffi::c_char) -> Option<&'a [u8]> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
}

/// This launch's device-wide libc state.
fn launch_state() -> &'static LaunchState {
    let c = config();
    if c.launch_state == 0 {
        Nvptx::trap();
    }
    // SAFETY: the host allocated and zeroed a LaunchState (atomics only) for this launch.
    unsafe { &*(c.launch_state as *const LaunchState) }
}

/// Where the calling thread sits in the launch, for kernels that need their coordinates.
pub mod gpu {
    use hostcall_client::Platform;

    use crate::Nvptx;

    /// Linear index of the calling thread's block in the grid.
    pub fn block() -> u32 {
        Nvptx::caller().0
    }

    /// Linear index of the calling thread within its block.
    pub fn thread() -> u32 {
        Nvptx::caller().1
    }

    /// Linear index of the calling thread in the whole grid.
    pub fn global_thread() -> u64 {
        Nvptx::global_thread()
    }

    /// Threads in the launch (the host sizes the per-thread area to exactly this).
    pub fn launch_threads() -> u64 {
        crate::config().thread_capacity
    }

    /// One bare transport round trip: the host echoes `value` (for tests and benchmarks).
    pub fn ping(value: u64) -> u64 {
        crate::channel().ping::<Nvptx>(value)
    }

    /// [`ping`], with the nanoseconds spent reaching each stage of the round trip
    /// (`hostcall_client::stages::STAGES`).
    pub fn ping_timed(value: u64) -> (u64, [u64; 6]) {
        let args = [value, 0, 0, 0, 0, 0];
        let (reply, clock) =
            crate::channel().call_timed::<Nvptx>(hostcall_abi::Service::Ping as u32, args);
        (reply.result as u64, clock.spans())
    }

    /// One hostcall whose kind is chosen per lane at this one call site: `Some(line)`
    /// posts the line to stdout (it must fit a lane's bulk buffer, 4 KiB), `None` echoes
    /// `token` and returns the echo. For stress tests of packets that would mix both.
    pub fn ping_or_post(token: u64, line: Option<&[u8]>) -> u64 {
        use hostcall_client::fd_io;
        let tickets = &crate::launch_state().stdio_tickets[1];
        let request = match line {
            Some(l) => fd_io::posted_write_request(1, l, tickets, 1),
            None => hostcall_client::Request::ping(token),
        };
        let reply = crate::channel().exchange::<Nvptx>(request);
        if let Some(l) = line {
            fd_io::post_or_wait::<Nvptx>(&crate::channel(), reply, 1, l, tickets);
        }
        reply.result as u64
    }

    /// Nanoseconds from the GPU's global timer.
    pub fn now_ns() -> u64 {
        Nvptx::globaltimer_ns()
    }
}
