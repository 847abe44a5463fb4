//! Reading and writing an fd (`hostcall_client::fd_io`): std's `Fs.read` and `Fs.write`,
//! large buffers by DMA, and stdout and stderr posted in each thread's order. The fds
//! are the host runtime's own table (0/1/2 are the host's stdio); opening and the rest
//! of the file calls are `fs`'s.

use core::ffi::{c_int, c_void};

use hostcall_client::fd_io;

use crate::errno::check;
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
