//! errno: each GPU thread's own, in its area, as C code and std reach it
//! (`__errno_location`), and the one conversion of a `-errno` result into it.

use core::ffi::c_int;

use crate::area::area;

/// Sets this thread's errno (the C functions that fail report so).
pub(crate) fn set_errno(e: i32) {
    // SAFETY: a thread's area is touched only by that thread.
    unsafe { (*area()).errno = e };
}

/// Where this thread's errno lives, as C's `errno` macro and std's `io::Error::last_os_error` read it.
#[unsafe(no_mangle)]
pub extern "C" fn __errno_location() -> *mut c_int {
    // SAFETY: in bounds of this thread's own area.
    unsafe { &raw mut (*area()).errno }
}

/// Sets this thread's errno from a `-errno` result and returns -1; passes values through.
pub(crate) fn check(r: i64) -> i64 {
    if r < 0 {
        set_errno(-r as i32);
        -1
    } else {
        r
    }
}
