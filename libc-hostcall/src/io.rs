//! Reading and writing an fd (`hostcall_client::fd_io`): std's `Fs.read` and `Fs.write`,
//! large buffers by DMA, and stdout and stderr posted in each thread's order. The fds
//! are the host runtime's own table (0/1/2 are the host's stdio); opening and the rest
//! of the file calls are `fs`'s.

use core::ffi::{c_int, c_void};

use hostcall_abi::errno::{EINVAL, ENOTTY};
use hostcall_client::fd_io;

use crate::errno::{check, set_errno};
use crate::{Nvptx, channel};

/// # Safety
/// `buf` must be valid for reading `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), n) };
    if fd == 1 || fd == 2 {
        let tickets = &crate::launch_state().stdio_tickets[fd as usize];
        return fd_io::write_posted::<Nvptx>(&channel(), fd, data, tickets) as isize;
    }
    check(fd_io::write::<Nvptx>(&channel(), fd, data)) as isize
}

/// # Safety
/// `buf` must be valid for writing `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
    check(fd_io::read::<Nvptx>(&channel(), fd, data)) as isize
}

/// Linux's `struct iovec`.
#[repr(C)]
pub struct IoVec {
    base: *mut c_void,
    len: usize,
}

/// The most bytes [`writev`] gathers into one write (as Linux's `writev` to a pipe is
/// one write up to `PIPE_BUF`); larger ones are written piece by piece.
const GATHERED_MAX: usize = 4096;

/// The buffers `iov` lists, `count` of them; `None` (and `EINVAL`) for a negative count.
///
/// # Safety
/// `iov` must point to `count` `iovec`s.
unsafe fn buffers<'a>(iov: *const IoVec, count: c_int) -> Option<&'a [IoVec]> {
    if count < 0 {
        set_errno(EINVAL);
        return None;
    }
    if count == 0 || iov.is_null() {
        return Some(&[]);
    }
    // SAFETY: the caller's contract.
    Some(unsafe { core::slice::from_raw_parts(iov, count as usize) })
}

/// `each` over the buffers in order, as `readv` and `writev` do piece by piece: the
/// bytes moved, up to a short count or an error (returned when nothing moved).
fn piece_by_piece(parts: &[IoVec], each: impl Fn(&IoVec) -> isize) -> isize {
    let mut done = 0isize;
    for p in parts {
        let n = each(p);
        if n < 0 {
            return if done > 0 { done } else { n };
        }
        done += n;
        if (n as usize) < p.len {
            break;
        }
    }
    done
}

/// Writes the buffers in order, as one write when they are small together (stdout and
/// stderr then keep them in one piece among other threads' lines).
///
/// # Safety
/// `iov` must point to `count` `iovec`s, each valid for reading its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const IoVec, count: c_int) -> isize {
    // SAFETY: the caller's contract.
    let Some(parts) = (unsafe { buffers(iov, count) }) else {
        return -1;
    };
    let total: usize = parts.iter().map(|p| p.len).sum();
    if parts.len() > 1 && total <= GATHERED_MAX {
        let joined = crate::heap::malloc(total.max(1)).cast::<u8>();
        if !joined.is_null() {
            let mut at = 0;
            for p in parts {
                // SAFETY: `joined` holds `total` bytes; each part is valid for its length.
                unsafe {
                    core::ptr::copy_nonoverlapping(p.base.cast::<u8>(), joined.add(at), p.len)
                };
                at += p.len;
            }
            // SAFETY: `joined` holds `total` initialized bytes, freed once written.
            let n = unsafe { write(fd, joined.cast(), total) };
            // SAFETY: from `malloc` above.
            unsafe { crate::heap::free(joined.cast()) };
            return n;
        }
    }
    // SAFETY: the caller's contract.
    piece_by_piece(parts, |p| unsafe { write(fd, p.base, p.len) })
}

/// Reads into the buffers in order, stopping at a short read.
///
/// # Safety
/// `iov` must point to `count` `iovec`s, each valid for writing its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const IoVec, count: c_int) -> isize {
    // SAFETY: the caller's contract.
    let Some(parts) = (unsafe { buffers(iov, count) }) else {
        return -1;
    };
    // SAFETY: the caller's contract.
    piece_by_piece(parts, |p| unsafe { read(fd, p.base, p.len) })
}

/// No fd of a GPU program is a terminal: its stdout and stderr are posted to the host
/// through the channel, whatever the host's own are (libtest, for one, then prints
/// without colours, as into a pipe).
#[unsafe(no_mangle)]
pub extern "C" fn isatty(_fd: c_int) -> c_int {
    set_errno(ENOTTY);
    0
}
