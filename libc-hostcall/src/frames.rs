//! Frame stacks in global memory for a binary's threads (feature `start`): ptx-builder
//! makes every function whose locals live in memory take its frame here
//! (`hostcall_abi::FRAME_PUSH`, `FRAME_POP`), because a GPU thread's own stack is
//! private to it and Rust threads share their locals (`thread::scope`, rayon's `join`).
//!
//! One stack per warp of the launch: only lane 0 of a warp runs a thread in a
//! `START_KERNEL` launch (the kernel entries, whose other lanes also run, are not
//! rewritten). These functions keep their own state in registers: they must take no
//! frame themselves.

use core::ffi::c_void;

use hostcall_abi::{FRAME_STACK_BYTES, FRAME_STACKS, WARP_SIZE};

use crate::Nvptx;

/// The frame stacks, side by side (module memory, zeroed at load).
#[repr(C, align(64))]
struct Stacks([[u8; FRAME_STACK_BYTES]; FRAME_STACKS]);

static mut STACKS: Stacks = Stacks([[0; FRAME_STACK_BYTES]; FRAME_STACKS]);
/// Per stack, the offset of its top.
static mut TOPS: [u32; FRAME_STACKS] = [0; FRAME_STACKS];
/// Per stack, 1 once it overflowed: the rest of the way to the end is then open, for
/// the report and the abort that follow.
static mut OVERFLOWED: [u8; FRAME_STACKS] = [0; FRAME_STACKS];

/// The end of a stack's room while it has not overflowed: what lies past it is kept for
/// writing the overflow's report.
const REPORT_ROOM: usize = 8 << 10;

/// The calling warp's stack, or a trap if the launch has more warps than stacks (the
/// runner never launches so many).
fn stack() -> usize {
    let s = (Nvptx::global_thread() / WARP_SIZE as u64) as usize;
    if s >= FRAME_STACKS {
        Nvptx::trap();
    }
    s
}

/// Takes a frame of `size` bytes aligned to `align` (a power of two) on the calling
/// thread's stack; the 8 bytes before it keep the previous top, for [`pop`].
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_frame_push(size: u64, align: u64) -> *mut c_void {
    let s = stack();
    let align = align.max(8) as usize;
    // SAFETY: stack `s` is the calling thread's alone (one thread per warp runs frames).
    unsafe {
        let top = (&raw const TOPS[s]).read() as usize;
        let start = (top + 8).div_ceil(align) * align;
        let end = start + size as usize;
        let overflowed = (&raw const OVERFLOWED[s]).read() != 0;
        let room = if overflowed {
            FRAME_STACK_BYTES
        } else {
            FRAME_STACK_BYTES - REPORT_ROOM
        };
        if end > room {
            if overflowed {
                Nvptx::trap();
            }
            (&raw mut OVERFLOWED[s]).write(1);
            overflow();
        }
        let base = (&raw mut STACKS.0[s]).cast::<u8>();
        base.add(start - 8).cast::<u64>().write(top as u64);
        (&raw mut TOPS[s]).write(end as u32);
        base.add(start).cast()
    }
}

/// Gives back the frame [`__hostcall_frame_push`] returned, and every frame above it. The
/// frame's address says whose stack it is on: no need to find the thread again.
///
/// # Safety
/// `frame` must be the calling thread's newest frame.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __hostcall_frame_pop(frame: *mut c_void) {
    let s = (frame as usize - (&raw const STACKS) as usize) / FRAME_STACK_BYTES;
    // SAFETY: the caller's contract: `frame` lies in stack `s`, and the 8 bytes before
    // it hold the previous top.
    unsafe {
        let top = frame.cast::<u64>().sub(1).read();
        (&raw mut TOPS[s]).write(top as u32);
    }
}

/// Says which limit a thread passed, then aborts the program (a Linux thread would get
/// SIGSEGV).
fn overflow() -> ! {
    let msg = b"\nthread overflowed its frame stack: its locals that live in memory, with \
those of the calls it is in, passed hostcall_abi::FRAME_STACK_BYTES bytes\n";
    // SAFETY: a buffer of `msg.len()` bytes.
    unsafe { crate::io::write(2, msg.as_ptr().cast(), msg.len()) };
    crate::process::abort()
}
