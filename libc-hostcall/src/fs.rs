//! Files and directories: each C function one call of std's declared `Fs` service
//! (`hostcall_abi::std_services::Fs`) through its client, its answer turned into C's
//! form here (`errno::ret`). Opening, closing and seeking, `stat`, the `*at` family,
//! links, renames, permissions, lengths, syncs, the working directory; reading and
//! writing are `io`'s. Paths resolve through the host's capability handles; `AT_FDCWD`
//! means the working directory the host gave the program.

use core::ffi::{c_char, c_int, c_uint, c_void};

use hostcall_abi::PATH_MAX;
use hostcall_abi::errno::{E2BIG, EFAULT, EINVAL, ENAMETOOLONG, ENOSYS};
use hostcall_abi::fcntl::{
    AT_EMPTY_PATH, AT_FDCWD, AT_REMOVEDIR, AT_SYMLINK_FOLLOW, AT_SYMLINK_NOFOLLOW, O_CREAT,
    O_TMPFILE,
};
use hostcall_abi::stat::STAT_SIZE;
use hostcall_abi::typed::Errno;
use hostcall_client::std_services::Fs;
use hostcall_client::typed::Client;

use crate::errno::{CReturn, ret, set_errno};
use crate::heap::malloc;
use crate::{Nvptx, cstr, host};

/// A call with paths as C answers it: `ENAMETOOLONG` for paths that do not fit one
/// request together (the client's `E2BIG`), else its answer.
pub(crate) fn path_ret<T: CReturn>(r: Result<T, Errno>) -> i64 {
    ret(r.map_err(|e| if e.0 == E2BIG { Errno(ENAMETOOLONG) } else { e }))
}

/// Runs `f` on the bytes of C string `p` (`EFAULT` if it is null), as C answers it.
///
/// # Safety
/// `p` must be null or a C string.
pub(crate) unsafe fn with_path<T: CReturn>(
    p: *const c_char,
    f: impl FnOnce(&[u8]) -> Result<T, Errno>,
) -> i64 {
    // SAFETY: the caller's contract.
    path_ret(unsafe { cstr(p) }.ok_or(Errno(EFAULT)).and_then(f))
}

/// # Safety
/// `path` must be a C string; a mode argument must follow when `flags` has `O_CREAT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mut args: ...
) -> c_int {
    let mode = if flags & O_CREAT != 0 || flags & O_TMPFILE == O_TMPFILE {
        // SAFETY: with these flags, the caller passes a mode (the caller's contract).
        unsafe { args.next_arg::<c_uint>() }
    } else {
        0
    };
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().openat(dirfd, p, flags, mode)) as c_int }
}

/// # Safety
/// `path` must be a C string and `out` valid for writing an x86_64 `struct stat`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    out: *mut c_void,
    flags: c_int,
) -> c_int {
    if out.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    // SAFETY: the caller's contract (a struct stat is STAT_SIZE bytes).
    let out = unsafe { &mut *out.cast::<[u8; STAT_SIZE]>() };
    // SAFETY: the caller's contract.
    unsafe {
        with_path(path, |p| {
            if p.is_empty() && flags & AT_EMPTY_PATH != 0 {
                return host::<dyn Fs>().fstat(dirfd, out);
            }
            let follow = (flags & AT_SYMLINK_NOFOLLOW == 0) as u32;
            host::<dyn Fs>().statat(dirfd, p, follow, out)
        }) as c_int
    }
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().unlinkat(dirfd, p, flags)) as c_int }
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { unlinkat(AT_FDCWD, path, 0) }
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { unlinkat(AT_FDCWD, path, AT_REMOVEDIR) }
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: c_uint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().mkdir(p, mode)) as c_int }
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: c_uint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_path(path, |p| host::<dyn Fs>().chmod(p, mode)) as c_int }
}

/// Calls a two-path service of `Fs` (`rename`, `link`, `symlink`).
///
/// # Safety
/// Both must be C strings.
unsafe fn two_paths(
    service: impl FnOnce(&Client<Nvptx, dyn Fs>, &[u8], &[u8]) -> Result<(), Errno>,
    first: *const c_char,
    second: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(a), Some(b)) = (unsafe { cstr(first) }, unsafe { cstr(second) }) else {
        set_errno(EFAULT);
        return -1;
    };
    path_ret(service(&host::<dyn Fs>(), a, b)) as c_int
}

/// # Safety
/// Both must be C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { two_paths(|fs, a, b| fs.rename(a, b), old, new) }
}

/// `std::fs::hard_link`'s call. Only the working directory as both `dirfd`s and no
/// flag but `AT_SYMLINK_FOLLOW`'s absence are served (what std passes).
///
/// # Safety
/// Both paths must be C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn linkat(
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    if olddirfd != AT_FDCWD || newdirfd != AT_FDCWD || flags & AT_SYMLINK_FOLLOW != 0 {
        set_errno(EINVAL);
        return -1;
    }
    // SAFETY: the caller's contract.
    unsafe { two_paths(|fs, a, b| fs.link(a, b), old, new) }
}

/// # Safety
/// Both must be C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, link: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { two_paths(|fs, a, b| fs.symlink(a, b), target, link) }
}

#[unsafe(no_mangle)]
pub extern "C" fn fchmod(fd: c_int, mode: c_uint) -> c_int {
    ret(host::<dyn Fs>().fchmod(fd, mode)) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn ftruncate64(fd: c_int, len: i64) -> c_int {
    ret(host::<dyn Fs>().ftruncate(fd, len)) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    ret(host::<dyn Fs>().fsync(fd)) as c_int
}

/// As `fsync`: the host flushes data and metadata alike.
#[unsafe(no_mangle)]
pub extern "C" fn fdatasync(fd: c_int) -> c_int {
    fsync(fd)
}

/// Moves the run's working directory (std's `env::set_current_dir`), in guest paths.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    // SAFETY: the caller passes a NUL-terminated path.
    unsafe { with_path(path, |p| host::<dyn Fs>().chdir(p)) as c_int }
}

/// A second fd for what `fd` has open (std's `try_clone`).
#[unsafe(no_mangle)]
pub extern "C" fn dup(fd: c_int) -> c_int {
    ret(host::<dyn Fs>().dup(fd)) as c_int
}

/// `F_GETFD`/`F_SETFD` (close-on-exec, which means nothing without `exec`),
/// `F_DUPFD`/`F_DUPFD_CLOEXEC` (`dup`: the host's fds start at 3 and the lowest free
/// one is not promised), and on a socket `F_GETFL`/`F_SETFL` (its non-blocking mode);
/// the rest fail with `EINVAL` as for an unknown command.
///
/// # Safety
/// As `fcntl(2)`: `F_SETFL` passes an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, mut args: ...) -> c_int {
    const F_GETFD: c_int = 1;
    const F_SETFD: c_int = 2;
    const F_GETFL: c_int = 3;
    const F_SETFL: c_int = 4;
    const F_DUPFD: c_int = 0;
    const F_DUPFD_CLOEXEC: c_int = 1030;
    let socket = || {
        (cmd == F_GETFL || cmd == F_SETFL)
            .then(|| crate::net::socket_flags(fd))
            .flatten()
    };
    match cmd {
        F_GETFD => 1,
        F_SETFD => 0,
        F_DUPFD | F_DUPFD_CLOEXEC => dup(fd),
        F_GETFL | F_SETFL => match socket() {
            Some(flags) if cmd == F_GETFL => flags,
            // SAFETY: F_SETFL passes an int (the caller's contract).
            Some(_) => crate::net::set_socket_flags(fd, unsafe { args.next_arg::<c_int>() }),
            None => {
                set_errno(EINVAL);
                -1
            }
        },
        _ => {
            set_errno(EINVAL);
            -1
        }
    }
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
