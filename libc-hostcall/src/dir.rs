//! Directory streams (`opendir`, `fdopendir`, `readdir64`, `closedir`, `dirfd`) over the
//! `Getdents` service: a stream holds one bulk buffer of records and refills it when
//! it has handed them all out.

use core::ffi::{c_char, c_int};

use hostcall_abi::BULK_PER_LANE;
use hostcall_abi::dirent::{self, kind};
use hostcall_abi::errno::ENOMEM;
use hostcall_abi::fcntl::{O_CLOEXEC, O_DIRECTORY, O_RDONLY};
use hostcall_client::std_services::Fs;

use crate::heap::{free, malloc};
use crate::{errno::ret, errno::set_errno, host};

/// x86_64 glibc's `struct dirent64`.
#[repr(C)]
pub struct Dirent64 {
    d_ino: u64,
    d_off: i64,
    d_reclen: u16,
    d_type: u8,
    d_name: [u8; 256],
}

/// What a `DIR *` points to.
pub struct Dir {
    fd: c_int,
    /// Records received and not yet handed out: `buf[pos..len]`.
    buf: [u8; BULK_PER_LANE],
    pos: usize,
    len: usize,
    /// Entries handed out so far (`d_off`).
    served: i64,
    /// The entry `readdir64` returned last (valid until the next call, as POSIX says).
    entry: Dirent64,
}

/// # Safety
/// `fd` must be an open directory fd whose ownership passes to the stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut Dir {
    let d = malloc(size_of::<Dir>()).cast::<Dir>();
    if d.is_null() {
        set_errno(ENOMEM);
        return core::ptr::null_mut();
    }
    // SAFETY: `d` has room for a Dir, which is plain integers: all zero bytes make a
    // valid (empty) stream, and the fd is set before anyone reads it. Zeroed in place,
    // not built on the stack: a Dir is 4 KiB, a large part of a GPU thread's stack.
    unsafe {
        core::ptr::write_bytes(d, 0, 1);
        (&raw mut (*d).fd).write(fd);
    }
    d
}

/// # Safety
/// `path` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut Dir {
    // SAFETY: the caller's contract.
    let fd = unsafe { crate::fs::open64(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
    if fd < 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: `fd` is the directory just opened, owned by the stream from here.
    let d = unsafe { fdopendir(fd) };
    if d.is_null() {
        crate::fs::close(fd);
    }
    d
}

/// The next entry, or null at the end (errno untouched) or on an error (errno set).
///
/// # Safety
/// `d` must come from `opendir`/`fdopendir` and not be closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(d: *mut Dir) -> *mut Dirent64 {
    // SAFETY: the caller's contract.
    let d = unsafe { &mut *d };
    if d.pos == d.len {
        let n = ret(host::<dyn Fs>().getdents(d.fd, &mut d.buf));
        if n <= 0 {
            return core::ptr::null_mut();
        }
        (d.pos, d.len) = (0, n as usize);
    }
    let Some((record, _)) = dirent::decode(&d.buf[d.pos..d.len]) else {
        // A record cut short: the host broke the format; end the listing.
        d.pos = d.len;
        return core::ptr::null_mut();
    };
    d.pos += record.len();
    d.served += 1;
    let e = &mut d.entry;
    e.d_ino = record.ino;
    e.d_off = d.served;
    e.d_reclen = size_of::<Dirent64>() as u16;
    e.d_type = if record.kind <= kind::DT_SOCK {
        record.kind
    } else {
        kind::DT_UNKNOWN
    };
    e.d_name[..record.name.len()].copy_from_slice(record.name);
    e.d_name[record.name.len()] = 0;
    e
}

/// # Safety
/// `d` must come from `opendir`/`fdopendir` and not be closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(d: *mut Dir) -> c_int {
    // SAFETY: the caller's contract.
    let fd = unsafe { (*d).fd };
    // SAFETY: the stream came from malloc and is not used after this.
    unsafe { free(d.cast()) };
    crate::fs::close(fd)
}

/// # Safety
/// `d` must come from `opendir`/`fdopendir` and not be closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dirfd(d: *mut Dir) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { (*d).fd }
}
