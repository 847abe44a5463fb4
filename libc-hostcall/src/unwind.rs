//! Unwinding: the thread's exception word that ptx-builder's lowering of `panic =
//! "unwind"` reads and writes (`hostcall_abi::unwind`), and the backtrace calls std makes.
//! GPU code has no unwind tables: nothing walks frames, each frame returns in turn.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::area::area;

/// How many threads are unwinding now (`hostcall_abi::UNWINDERS`): the hint every look
/// reads first. Relaxed: a thread needs only its own changes, which it sees in order.
#[unsafe(no_mangle)]
pub static __hostcall_unwinders: AtomicU32 = AtomicU32::new(0);

/// Whether the calling thread is unwinding (`hostcall_abi::UNWINDING`).
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_unwinding() -> bool {
    // SAFETY: a thread's area is touched only by that thread.
    unsafe { (*area()).unwinding != 0 }
}

/// Takes the calling thread's exception, which a landing pad now handles
/// (`hostcall_abi::UNWIND_TAKE`).
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_unwind_take() -> *mut c_void {
    // SAFETY: as in `__hostcall_unwinding`.
    let exception = unsafe { core::mem::take(&mut (*area()).unwinding) };
    if exception != 0 {
        __hostcall_unwinders.fetch_sub(1, Ordering::Relaxed);
    }
    exception as *mut c_void
}

/// Starts or resumes unwinding with `exception` (`hostcall_abi::UNWIND_RESUME`); what it
/// returns is never read, since the caller leaves.
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_unwind_resume(exception: *mut c_void) -> c_int {
    // SAFETY: as in `__hostcall_unwinding`.
    let before = unsafe { core::mem::replace(&mut (*area()).unwinding, exception as u64) };
    if before == 0 {
        __hostcall_unwinders.fetch_add(1, Ordering::Relaxed);
    }
    0
}

/// `_URC_END_OF_STACK`: no unwind tables, so backtraces are empty.
const URC_END_OF_STACK: c_int = 5;

#[unsafe(no_mangle)]
pub extern "C" fn _Unwind_Backtrace(_trace: *const c_void, _arg: *mut c_void) -> c_int {
    URC_END_OF_STACK
}

#[unsafe(no_mangle)]
pub extern "C" fn _Unwind_GetIP(_ctx: *const c_void) -> usize {
    0
}

/// The head of an `_Unwind_Exception`, as the Itanium ABI lays it out.
#[repr(C)]
struct ExceptionHead {
    class: u64,
    cleanup: Option<unsafe extern "C" fn(c_int, *mut ExceptionHead)>,
}

/// `_URC_FOREIGN_EXCEPTION_CAUGHT`: the reason a caught exception is deleted.
const URC_FOREIGN_EXCEPTION_CAUGHT: c_int = 1;

/// Deletes an exception its catcher does not own (panic_unwind, for a foreign one) with
/// the cleanup it carries.
///
/// # Safety
/// `exception` must point to a live `_Unwind_Exception`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Unwind_DeleteException(exception: *mut c_void) {
    let e = exception.cast::<ExceptionHead>();
    // SAFETY: the caller's contract; the cleanup is the thrower's, for this exception.
    unsafe {
        if let Some(cleanup) = (*e).cleanup {
            cleanup(URC_FOREIGN_EXCEPTION_CAUGHT, e);
        }
    }
}
