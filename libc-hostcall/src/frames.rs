//! Frame stacks in global memory for a binary's threads (feature `start`): ptx-builder
//! makes every function whose locals live in memory take its frame here
//! (`hostcall_abi::FRAME_PUSH`, `FRAME_POP`), because a GPU thread's own stack is
//! private to it and Rust threads share their locals (`thread::scope`, rayon's `join`).
//!
//! One stack per GPU thread that runs the program's threads, cut from the heap for good
//! ([`give_stack`]) as the main thread starts and when a held-back thread is first given
//! a thread, so a launch of 16,927 held-back threads costs no memory for those never
//! used; its address, its top and whether it overflowed are in the thread's own area,
//! zeroed before the launch. The kernel entries, whose other lanes also run, are not
//! rewritten. These functions keep their own state in registers: they must take no
//! frame themselves.

use core::ffi::c_void;

use hostcall_abi::spawn::frame_start;
use hostcall_abi::{FRAME_STACK_BYTES, ThreadArea};

use crate::Nvptx;
use crate::area::area;

/// The end of a stack's room while it has not overflowed: what lies past it is kept for
/// writing the overflow's report.
const REPORT_ROOM: usize = 8 << 10;

/// The base of the calling thread's stack, or a trap for a thread that has none (a lane
/// that runs no thread, or a kernel launch: neither calls a rewritten function).
#[inline(always)]
fn base() -> *mut u8 {
    // SAFETY: the calling thread's own area.
    match unsafe { (*area()).frame_stack } {
        0 => Nvptx::trap(),
        s => s as *mut u8,
    }
}

/// Gives the GPU thread of `area` a frame stack if it has none yet, cut from the heap
/// for good (it keeps it for every thread it runs); false if the heap has no room. A
/// caller with a stack of its own may `grow` the heap; the main thread, which takes the
/// first stack before it has one, finds it backed (the host backs it before the launch).
///
/// # Safety
/// `area` must be a thread area of this launch that no other thread writes meanwhile
/// (the caller's own, or a claimed worker's before its thread is published).
#[inline(always)] // the start kernel calls it before the main thread has a stack
pub(crate) unsafe fn give_stack(area: *mut ThreadArea, grow: bool) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        if (*area).frame_stack == 0 {
            match crate::heap::take_for_good(FRAME_STACK_BYTES as u64, grow) {
                Some(s) => (*area).frame_stack = s,
                None => return false,
            }
        }
    }
    true
}

/// Takes a frame of `size` bytes aligned to `align` (a power of two) on the calling
/// thread's stack; the 8 bytes before it keep the previous top, for [`__hostcall_frame_pop`].
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_frame_push(size: u64, align: u64) -> *mut c_void {
    let base = base();
    let me = area();
    let align = align.max(8) as usize;
    // SAFETY: the stack at `base` (FRAME_STACK_BYTES of heap) and the area are the
    // calling thread's alone.
    unsafe {
        let top = (*me).frame_top as usize;
        let start = frame_start(base as usize, top, align);
        let end = start + size as usize;
        let overflowed = (*me).frame_overflowed != 0;
        let room = if overflowed {
            FRAME_STACK_BYTES
        } else {
            FRAME_STACK_BYTES - REPORT_ROOM
        };
        if end > room {
            if overflowed {
                Nvptx::trap();
            }
            (*me).frame_overflowed = 1;
            overflow();
        }
        base.add(start - 8).cast::<u64>().write(top as u64);
        (*me).frame_top = end as u32;
        base.add(start).cast()
    }
}

/// Gives back the frame [`__hostcall_frame_push`] returned, and every frame above it.
///
/// # Safety
/// `frame` must be the calling thread's newest frame.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __hostcall_frame_pop(frame: *mut c_void) {
    // SAFETY: the caller's contract: the 8 bytes before `frame` hold the previous top;
    // the area is the calling thread's alone.
    unsafe {
        let top = frame.cast::<u64>().sub(1).read();
        (*area()).frame_top = top as u32;
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
