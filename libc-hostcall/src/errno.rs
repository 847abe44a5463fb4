//! errno: each GPU thread's own, in its area, as C code and std reach it
//! (`__errno_location`), and the conversions of a service's answer into it: a declared
//! service's `Result` ([`ret`]), `hostcall_client::fd_io`'s `-errno` ([`check`]).

use core::ffi::c_int;

use hostcall_abi::typed::Errno;

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

/// A declared service's value as a C function returns it (`()` is 0).
pub(crate) trait CReturn {
    /// The value as a C function's result.
    fn to_i64(self) -> i64;
}

impl CReturn for () {
    fn to_i64(self) -> i64 {
        0
    }
}

impl CReturn for i32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl CReturn for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}

impl CReturn for usize {
    fn to_i64(self) -> i64 {
        self as i64
    }
}

/// A declared service's answer as C returns it: its value, or -1 with errno set.
pub(crate) fn ret<T: CReturn>(r: Result<T, Errno>) -> i64 {
    match r {
        Ok(v) => v.to_i64(),
        Err(e) => {
            set_errno(e.0);
            -1
        }
    }
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
