//! Files, stdio, the working directory and the environment: all by hostcall. The fds
//! are the host runtime's own table (0/1/2 are the host's stdio).

use core::ffi::{CStr, c_char, c_int, c_uint, c_void};

use hostcall_abi::PATH_MAX;
use hostcall_abi::errno::{EFAULT, ENOSYS};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::fcntl::{O_CREAT, O_TMPFILE};
use hostcall_abi::stat::STAT_SIZE;
use hostcall_abi::typed::Errno;
use hostcall_client::calls;
use hostcall_client::std_services::Fs;

use crate::errno::{check, ret, set_errno};
use crate::fs::{path_ret, with_path};
use crate::heap::malloc;
use crate::{Nvptx, channel, host};

/// The bytes of a C string, without its NUL.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// # Safety
/// `buf` must be valid for reading `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), n) };
    if fd == 1 || fd == 2 {
        let tickets = &crate::launch_state().stdio_tickets[fd as usize];
        return calls::write_posted::<Nvptx>(&channel(), fd, data, tickets) as isize;
    }
    check(calls::write::<Nvptx>(&channel(), fd, data)) as isize
}

/// # Safety
/// `buf` must be valid for writing `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
    check(calls::read::<Nvptx>(&channel(), fd, data)) as isize
}

/// # Safety
/// `path` must be a C string; a mode argument must follow when `flags` has `O_CREAT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mut args: ...) -> c_int {
    let mode = if flags & O_CREAT != 0 || flags & O_TMPFILE == O_TMPFILE {
        // SAFETY: with these flags, the caller passes a mode (the caller's contract).
        unsafe { args.next_arg::<c_uint>() }
    } else {
        0
    };
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().openat(AT_FDCWD, p, flags, mode)) as c_int }
}

#[unsafe(no_mangle)]
pub extern "C" fn close(fd: c_int) -> c_int {
    ret(host::<dyn Fs>().close(fd)) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn lseek64(fd: c_int, offset: i64, whence: c_int) -> i64 {
    ret(host::<dyn Fs>().lseek(fd, offset, whence))
}

/// # Safety
/// `out` must be valid for writing an x86_64 `struct stat`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat64(fd: c_int, out: *mut c_void) -> c_int {
    // SAFETY: the caller's contract (a struct stat is STAT_SIZE bytes).
    let out = unsafe { &mut *out.cast::<[u8; STAT_SIZE]>() };
    ret(host::<dyn Fs>().fstat(fd, out)) as c_int
}

/// # Safety
/// `path` must be a C string and `out` valid for writing an x86_64 `struct stat`.
unsafe fn stat_common(path: *const c_char, out: *mut c_void, follow: bool) -> c_int {
    // SAFETY: the caller's contract.
    let out = unsafe { &mut *out.cast::<[u8; STAT_SIZE]>() };
    // SAFETY: the caller's contract.
    unsafe {
        with_path(path, |p| {
            host::<dyn Fs>().statat(AT_FDCWD, p, follow as u32, out)
        }) as c_int
    }
}

/// # Safety
/// As `stat_common`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, out: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { stat_common(path, out, true) }
}

/// # Safety
/// As `stat_common`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, out: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { stat_common(path, out, false) }
}

/// Not served: std falls back to `stat64`/`fstat64` on `ENOSYS`.
#[unsafe(no_mangle)]
pub extern "C" fn statx(
    _dirfd: c_int,
    _path: *const c_char,
    _flags: c_int,
    _mask: c_uint,
    _out: *mut c_void,
) -> c_int {
    set_errno(ENOSYS);
    -1
}

/// A string-returning service's answer into `buf` (capacity `size`, NUL added), as C
/// answers it.
fn string_into(
    buf: *mut c_char,
    size: usize,
    f: impl FnOnce(&mut [u8]) -> Result<usize, Errno>,
) -> i64 {
    if buf.is_null() || size == 0 {
        set_errno(hostcall_abi::errno::EINVAL);
        return -1;
    }
    // SAFETY: `buf` has `size` bytes (the C caller's contract); one is kept for the NUL.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    let r = path_ret(f(&mut out[..size - 1]));
    if r >= 0 {
        out[r as usize] = 0;
    }
    r
}

/// A NUL-terminated heap copy of a string-returning service's answer.
fn string_alloc(f: impl FnOnce(&mut [u8]) -> Result<usize, Errno>) -> *mut c_char {
    let p = malloc(PATH_MAX).cast::<c_char>();
    if p.is_null() || string_into(p, PATH_MAX, f) < 0 {
        // SAFETY: `p` is null or came from malloc just above.
        unsafe { crate::heap::free(p.cast()) };
        return core::ptr::null_mut();
    }
    p
}

/// # Safety
/// `buf` must be valid for writing `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: usize) -> *mut c_char {
    if string_into(buf, size, |out| host::<dyn Fs>().getcwd(out)) < 0 {
        return core::ptr::null_mut();
    }
    buf
}

/// # Safety
/// `path` must be a C string; `resolved` null or valid for `PATH_MAX` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    // SAFETY: the caller's contract.
    let Some(path) = (unsafe { cstr(path) }) else {
        set_errno(EFAULT);
        return core::ptr::null_mut();
    };
    let call = |out: &mut [u8]| host::<dyn Fs>().realpath(path, out);
    if resolved.is_null() {
        return string_alloc(call);
    }
    if string_into(resolved, PATH_MAX, call) < 0 {
        return core::ptr::null_mut();
    }
    resolved
}

/// # Safety
/// `path` must be a C string and `buf` valid for writing `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: usize) -> isize {
    // SAFETY: the caller's contract.
    if buf.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    // SAFETY: the caller's contract.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().readlink(p, out)) as isize }
}
