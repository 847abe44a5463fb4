//! The flag sets of `<fcntl.h>` that cross the wire: `open(2)`'s flags and the `*at`
//! calls' `AT_*`, with Linux x86_64's values, which libc-hostcall passes unchanged and
//! the host reads. The host pins each against the OS's own value when it compiles
//! (`hostcall-runtime`'s `services::fs`), so a wrong one cannot ship.

#![allow(missing_docs)] // the names are POSIX's and Linux's

pub const O_RDONLY: i32 = 0;
pub const O_WRONLY: i32 = 0o1;
pub const O_RDWR: i32 = 0o2;
/// The access mode's bits (`O_RDONLY`, `O_WRONLY`, `O_RDWR`).
pub const O_ACCMODE: i32 = 0o3;
pub const O_CREAT: i32 = 0o100;
pub const O_EXCL: i32 = 0o200;
pub const O_NOCTTY: i32 = 0o400;
pub const O_TRUNC: i32 = 0o1000;
pub const O_APPEND: i32 = 0o2000;
pub const O_NONBLOCK: i32 = 0o4000;
pub const O_LARGEFILE: i32 = 0o100000;
pub const O_DIRECTORY: i32 = 0o200000;
pub const O_NOFOLLOW: i32 = 0o400000;
pub const O_CLOEXEC: i32 = 0o2000000;
/// `O_TMPFILE` includes `O_DIRECTORY`'s bit: test it as `flags & O_TMPFILE == O_TMPFILE`.
pub const O_TMPFILE: i32 = 0o20200000;

/// Every open flag the host serves; it refuses others with `EINVAL`.
pub const O_SERVED: i32 = O_ACCMODE
    | O_CREAT
    | O_EXCL
    | O_NOCTTY
    | O_TRUNC
    | O_APPEND
    | O_LARGEFILE
    | O_DIRECTORY
    | O_NOFOLLOW
    | O_CLOEXEC
    | O_NONBLOCK;

/// A `dirfd` meaning the working directory.
pub const AT_FDCWD: i32 = -100;
/// The last component is not followed when it is a symbolic link.
pub const AT_SYMLINK_NOFOLLOW: i32 = 0x100;
/// `unlinkat` removes an empty directory (`Fs.unlinkat`).
pub const AT_REMOVEDIR: i32 = 0x200;
/// `linkat` follows a symbolic link as its source.
pub const AT_SYMLINK_FOLLOW: i32 = 0x400;
/// An empty path means `dirfd` itself.
pub const AT_EMPTY_PATH: i32 = 0x1000;
