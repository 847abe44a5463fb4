//! std's services, declared as users declare theirs (`service!`): each is one
//! declaration here and one implementation in `hostcall-runtime`, which every host
//! serves; the declaration is the service's convention. Their ids are fixed in
//! `STD_IDS`, after those of the stream services (`hostcall_abi::Service`).
//!
//! Paths are bytes without a terminating NUL. Services that answer a string or a record
//! fill the output buffer and return the length of the whole answer, which the caller
//! compares with the room it gave. `dirfd` is a GPU fd of a directory, or
//! [`AT_FDCWD`](hostcall_abi::AT_FDCWD) for the working directory; an absolute path
//! ignores it, as on Linux.

use hostcall_abi::typed::Errno;

use crate::service;

service! {
    /// The process the GPU program runs in: the host's.
    pub trait Identity {
        /// Its id (`getpid`, std's `process::id`).
        fn getpid(&self) -> i32 = 0x8000_0010;
        /// Its parent's id (`getppid`, std's `os::unix::process::parent_id`).
        fn getppid(&self) -> i32 = 0x8000_0011;
        /// Its user's id (`getuid`).
        fn getuid(&self) -> u32 = 0x8000_0018;
    }
}

service! {
    /// How the GPU program ends. The first request of a run decides its exit status.
    pub trait Lifecycle {
        /// The program exits with `code` (the host keeps `code & 0xff`, as Linux does);
        /// the caller then stops the kernel.
        fn exit(&self, code: i32) -> () = 0x8000_0012;
        /// The calling GPU thread aborts; the caller then traps.
        fn abort(&self) -> () = 0x8000_0013;
        /// The calling GPU thread aborts because it panicked (std's `panic = "abort"`, through
        /// fixup 0009): the run ends with 101, as a Rust program's panic does; the caller
        /// then traps.
        fn panic_abort(&self) -> () = 0x8000_0033;
    }
}

service! {
    /// The host's clocks and randomness.
    pub trait Time {
        /// `CLOCK_REALTIME`, in nanoseconds since the Unix epoch.
        fn realtime(&self) -> i64 = 0x8000_0014;
        /// Fills `buf` with random bytes from the host's OS; returns its length.
        fn getrandom(&self, buf: &mut [u8]) -> Result<usize, Errno> = 0x8000_0015;
    }
}

service! {
    /// The program's environment, as the host grants it.
    pub trait Environment {
        /// The value of variable `name` (`ENOENT` when not granted, `ERANGE` when it does
        /// not fit `value`); returns its length.
        fn getenv(&self, name: &[u8], value: &mut [u8]) -> Result<usize, Errno> = 0x8000_0016;
        /// Block `which` (`STARTUP_ARGS` or `STARTUP_ENV`: NUL-terminated strings back to
        /// back) from byte `offset`, as much as `out` holds; returns the block's length.
        fn startup(&self, which: u64, offset: u64, out: &mut [u8]) -> Result<usize, Errno> =
            0x8000_0017;
    }
}

service! {
    /// Files and directories beneath the directories the host granted.
    pub trait Fs {
        /// Opens `path` relative to `dirfd` with Linux open(2) `flags` and `mode`;
        /// returns a GPU fd.
        fn openat(&self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> Result<i32, Errno> =
            0x8000_0021;
        /// Closes a GPU fd.
        fn close(&self, fd: i32) -> Result<(), Errno> = 0x8000_0022;
        /// Moves a GPU fd's offset (`whence`: Linux's `SEEK_*`); returns the new one.
        fn lseek(&self, fd: i32, offset: i64, whence: i32) -> Result<i64, Errno> = 0x8000_0023;
        /// The x86_64 `struct stat` of a GPU fd, into `out` (`hostcall_abi::stat`).
        fn fstat(&self, fd: i32, out: &mut [u8]) -> Result<(), Errno> = 0x8000_0024;
        /// The `struct stat` of `path` relative to `dirfd`, following a link as the last
        /// component when `follow` is not 0.
        fn statat(&self, dirfd: i32, path: &[u8], follow: u32, out: &mut [u8]) -> Result<(), Errno> =
            0x8000_0025;
        /// The working directory, into `out`; returns its length.
        fn getcwd(&self, out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0026;
        /// The canonical absolute form of `path`, into `out`; returns its length.
        fn realpath(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0027;
        /// The target of the symbolic link `path`, into `out`; returns its length.
        fn readlink(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0028;
        /// Removes the file, or with `AT_REMOVEDIR` in `flags` the empty directory, `path`
        /// relative to `dirfd`.
        fn unlinkat(&self, dirfd: i32, path: &[u8], flags: i32) -> Result<(), Errno> = 0x8000_0029;
        /// Makes the directory `path`.
        fn mkdir(&self, path: &[u8], mode: u32) -> Result<(), Errno> = 0x8000_002A;
        /// Sets the permission bits of `path`.
        fn chmod(&self, path: &[u8], mode: u32) -> Result<(), Errno> = 0x8000_002B;
        /// Sets the permission bits of a GPU fd's file.
        fn fchmod(&self, fd: i32, mode: u32) -> Result<(), Errno> = 0x8000_002C;
        /// Renames `from` to `to` (both in one grant).
        fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> = 0x8000_002D;
        /// Makes `new` a hard link to `existing` (both in one grant).
        fn link(&self, existing: &[u8], new: &[u8]) -> Result<(), Errno> = 0x8000_002E;
        /// Makes `link` a symbolic link to `target`, which must be relative and stay
        /// below the link.
        fn symlink(&self, target: &[u8], link: &[u8]) -> Result<(), Errno> = 0x8000_002F;
        /// Sets the length of a GPU fd's file.
        fn ftruncate(&self, fd: i32, len: i64) -> Result<(), Errno> = 0x8000_0030;
        /// Flushes a GPU fd's file to its device.
        fn fsync(&self, fd: i32) -> Result<(), Errno> = 0x8000_0031;
        /// The next entries of the directory open as `fd`, as `hostcall_abi::dirent`
        /// records in `out`; returns the bytes written, 0 at the end.
        fn getdents(&self, fd: i32, out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0032;
    }
}
