//! What std references for backtraces, error strings and randomness.

use core::ffi::{c_char, c_int, c_uint, c_void};

use hostcall_abi::errno;
use hostcall_client::calls;

use crate::{Nvptx, channel, check};

/// Messages for the errors a GPU program is likely to meet; others print their number.
fn message(e: c_int) -> &'static str {
    match e {
        errno::EPERM => "Operation not permitted",
        errno::ENOENT => "No such file or directory",
        errno::EIO => "Input/output error",
        errno::EBADF => "Bad file descriptor",
        errno::EAGAIN => "Resource temporarily unavailable",
        errno::ENOMEM => "Cannot allocate memory",
        errno::EACCES => "Permission denied",
        errno::EFAULT => "Bad address",
        errno::EEXIST => "File exists",
        errno::ENOTDIR => "Not a directory",
        errno::EISDIR => "Is a directory",
        errno::EINVAL => "Invalid argument",
        errno::EMFILE => "Too many open files",
        errno::ENOSPC => "No space left on device",
        errno::ESPIPE => "Illegal seek",
        errno::ERANGE => "Numerical result out of range",
        errno::ENAMETOOLONG => "File name too long",
        errno::ENOSYS => "Function not implemented on the GPU",
        errno::ETIMEDOUT => "Connection timed out",
        _ => "Unknown error",
    }
}

/// # Safety
/// `buf` must be valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xpg_strerror_r(e: c_int, buf: *mut c_char, len: usize) -> c_int {
    if buf.is_null() || len == 0 {
        return errno::ERANGE;
    }
    let msg = message(e).as_bytes();
    let n = msg.len().min(len - 1);
    // SAFETY: `n + 1 <= len` bytes of `buf` are written.
    unsafe {
        core::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    if n < msg.len() { errno::ERANGE } else { 0 }
}

/// Random bytes from the host's OS (std seeds `HashMap` with them).
///
/// # Safety
/// `buf` must be valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: usize, _flags: c_uint) -> isize {
    // SAFETY: the caller's contract.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    check(calls::getrandom::<Nvptx>(&channel(), out)) as isize
}

/// `_URC_END_OF_STACK`: GPU code has no unwind tables, so backtraces are empty.
const URC_END_OF_STACK: c_int = 5;

#[unsafe(no_mangle)]
pub extern "C" fn _Unwind_Backtrace(_trace: *const c_void, _arg: *mut c_void) -> c_int {
    URC_END_OF_STACK
}

#[unsafe(no_mangle)]
pub extern "C" fn _Unwind_GetIP(_ctx: *const c_void) -> usize {
    0
}

/// There are no loaded objects to list.
#[unsafe(no_mangle)]
pub extern "C" fn dl_iterate_phdr(_cb: *const c_void, _data: *mut c_void) -> c_int {
    0
}
