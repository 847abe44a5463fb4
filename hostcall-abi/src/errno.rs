//! x86_64 Linux errno numbers: the wire codes equal libc's, so libc-hostcall stores a
//! negated result in `errno` unchanged and the host translates OS errors in one place.

#![allow(missing_docs)] // the names are POSIX's

use core::fmt;

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const ESRCH: i32 = 3;
pub const EIO: i32 = 5;
pub const E2BIG: i32 = 7;
pub const EBADF: i32 = 9;
pub const EAGAIN: i32 = 11;
pub const ENOMEM: i32 = 12;
pub const EACCES: i32 = 13;
pub const EFAULT: i32 = 14;
pub const EEXIST: i32 = 17;
pub const EXDEV: i32 = 18;
pub const ENOTDIR: i32 = 20;
pub const EISDIR: i32 = 21;
pub const EINVAL: i32 = 22;
pub const EMFILE: i32 = 24;
pub const ENOTTY: i32 = 25;
pub const ENOSPC: i32 = 28;
pub const ESPIPE: i32 = 29;
pub const EROFS: i32 = 30;
pub const EPIPE: i32 = 32;
pub const ERANGE: i32 = 34;
pub const EDEADLK: i32 = 35;
pub const ENAMETOOLONG: i32 = 36;
pub const ENOSYS: i32 = 38;
pub const ENOTEMPTY: i32 = 39;
pub const ELOOP: i32 = 40;
pub const ENOTSOCK: i32 = 88;
pub const EMSGSIZE: i32 = 90;
pub const ENOPROTOOPT: i32 = 92;
pub const EPROTONOSUPPORT: i32 = 93;
pub const EAFNOSUPPORT: i32 = 97;
pub const ECONNABORTED: i32 = 103;
pub const ENOTCONN: i32 = 107;
pub const ETIMEDOUT: i32 = 110;
pub const ECONNREFUSED: i32 = 111;

/// A failure, as Linux's errno number (x86_64 numbering, [`crate::errno`]).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::errno::*;
        let name = match self.0 {
            EPERM => "EPERM",
            ENOENT => "ENOENT",
            EIO => "EIO",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            EACCES => "EACCES",
            EFAULT => "EFAULT",
            EEXIST => "EEXIST",
            EINVAL => "EINVAL",
            EPIPE => "EPIPE",
            ERANGE => "ERANGE",
            ENOSYS => "ENOSYS",
            _ => return write!(f, "Errno({})", self.0),
        };
        f.write_str(name)
    }
}

/// An errno number from code that keeps it as an `i32` (a host's `raw_os_error`, a C
/// return): `?` turns it into the declared services' error.
impl From<i32> for Errno {
    fn from(e: i32) -> Errno {
        Errno(e)
    }
}
