//! std's services, declared as users declare theirs (`service!`): each is one
//! declaration here and one implementation in `hostcall-runtime`, which every host
//! serves; the declaration is the service's convention, and lives here, below both
//! halves, so that each depends on it and neither on the other. Their ids are fixed in
//! `STD_IDS`, after those of the transport's own services ([`Service`](crate::Service)),
//! and checked distinct when this crate compiles. Each method says how long it may keep
//! the host (`quick`, `blocks`, `waits`, or what it does with an fd: `reads_fd`,
//! `writes_fd`, `copies_to_fd`; [`crate::typed::Waits`]); a method that says nothing
//! does not compile here. A new trait is one more block below: the host's [`StdHost`]
//! then lacks its implementation until it has one.
//!
//! Paths are bytes without a terminating NUL. An output buffer is cut to one lane's
//! bulk buffer (`BULK_PER_LANE` bytes) on the way; a string answer that does not fit the
//! room the host sees is refused with `ERANGE` (or cut, where the C call cuts it).
//! `dirfd` is a GPU fd of a directory, or
//! [`AT_FDCWD`](crate::AT_FDCWD) for the working directory; an absolute path
//! ignores it, as on Linux.

#[cfg(not(target_arch = "nvptx64"))]
extern crate alloc;

#[cfg(not(target_arch = "nvptx64"))]
use alloc::sync::Arc;

#[cfg(not(target_arch = "nvptx64"))]
use crate::typed::Dispatch;
use crate::typed::{Errno, Filled, Signature, ids_distinct};

use crate::service;

/// std's declared traits, each `pub trait Name = serve { .. }`: the trait (through
/// [`service!`]), its place in [`STD_DECLARED`], and a method `serve` of [`StdHost`],
/// so that a trait declared here is one a host cannot leave out.
macro_rules! std_traits {
    ($(
        $(#[$meta:meta])*
        pub trait $t:ident = $serve:ident { $($body:tt)* }
    )*) => {
        $(
            service! {
                $(#[$meta])*
                pub trait $t { $($body)* }
            }
        )*

        /// Every service of std's declared traits, which every host serves, trait by
        /// trait in the order declared.
        pub const STD_DECLARED: &[&[Signature]] = &[$(<dyn $t>::SERVICES),*];

        /// What serves std's declared traits on a host: an implementation of each, which
        /// [`serve_std`] hands to the host's [`ServeEach`].
        #[cfg(not(target_arch = "nvptx64"))]
        pub trait StdHost {
            $(
                #[doc = concat!("What implements [`", stringify!($t), "`].")]
                fn $serve(&self) -> Arc<impl $t>;
            )*
        }

        /// Hands `host`'s implementation of every std trait to `each`.
        #[cfg(not(target_arch = "nvptx64"))]
        pub fn serve_std(host: &impl StdHost, each: &mut impl ServeEach) {
            $(each.serve::<dyn $t, _>(host.$serve());)*
        }
    };
}

/// What a host does with one implementation of a std trait ([`serve_std`]): registers
/// a handler for each of its methods.
#[cfg(not(target_arch = "nvptx64"))]
pub trait ServeEach {
    /// Serves the declared trait `S` (`dyn Trait`) with `imp`.
    fn serve<S, T>(&mut self, imp: Arc<T>)
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static;
}

// No two of std's services share an id, the transport's own included.
const _: () = assert!(
    ids_distinct(STD_DECLARED, &crate::Service::IDS),
    "two of std's services share an id"
);

std_traits! {
    /// The process the GPU program runs in: the host's.
    pub trait Identity = identity {
        /// Its id (`getpid`, std's `process::id`).
        fn getpid(&self) -> i32 = 0x8000_0010, quick;
        /// Its parent's id (`getppid`, std's `os::unix::process::parent_id`).
        fn getppid(&self) -> i32 = 0x8000_0011, quick;
        /// Its user's id (`getuid`).
        fn getuid(&self) -> u32 = 0x8000_0018, quick;
        /// The user database's entry for `uid` as the host's C library finds it
        /// (`getpwuid_r`, which std's `env::home_dir` calls without `HOME`): in `out`,
        /// the group id as 4 little-endian bytes, then the name, password, comment,
        /// home directory and shell, each ending in a NUL. `ENOENT` when there is no
        /// entry, `ERANGE` when it does not fit in `out`.
        fn passwd(&self, uid: u32, out: &mut [u8]) -> Result<Filled, Errno> = 0x8000_001A, blocks;
    }

    /// How the GPU program ends. The first request of a run decides its exit status.
    pub trait Lifecycle = lifecycle {
        /// The program exits with `code` (the host keeps `code & 0xff`, as Linux does);
        /// the caller then stops the kernel.
        fn exit(&self, code: i32) -> () = 0x8000_0012, quick;
        /// The calling GPU thread aborts; the caller then traps.
        fn abort(&self) -> () = 0x8000_0013, quick;
        /// The calling GPU thread aborts because it panicked (std's `panic = "abort"`, through
        /// fixup 0009): the run ends with 101, as a Rust program's panic does; the caller
        /// then traps.
        fn panic_abort(&self) -> () = 0x8000_0033, quick;
    }

    /// The host's clocks and randomness.
    pub trait Time = time {
        /// `CLOCK_REALTIME`, in nanoseconds since the Unix epoch.
        fn realtime(&self) -> i64 = 0x8000_0014, quick;
        /// Fills `buf` with random bytes from the host's OS; returns its length.
        fn getrandom(&self, buf: &mut [u8]) -> Result<usize, Errno> = 0x8000_0015, quick;
    }

    /// The device heap, which the host maps as the GPU's allocator reaches it
    /// (`LaunchState::heap_mapped`).
    pub trait Memory = memory {
        /// Maps at least the heap's first `to` bytes (counted from its base) before it
        /// answers; returns how many are mapped now (`ENOMEM` when the GPU has no memory
        /// for them, `EINVAL` past the heap's end).
        fn grow_heap(&self, to: u64) -> Result<u64, Errno> = 0x8000_0019, blocks;
    }

    /// The program's environment, as the host grants it.
    pub trait Environment = environment {
        /// The value of variable `name` (`ENOENT` when not granted, `ERANGE` when it does
        /// not fit `value`); returns its length.
        fn getenv(&self, name: &[u8], value: &mut [u8]) -> Result<usize, Errno> = 0x8000_0016, quick;
        /// Block `which` (`STARTUP_ARGS` or `STARTUP_ENV`: NUL-terminated strings back to
        /// back) from byte `offset`, as much as `out` holds; returns the block's length.
        fn startup(&self, which: u64, offset: u64, out: &mut [u8]) -> Result<usize, Errno> =
            0x8000_0017, quick;
    }

    /// Files and directories beneath the directories the host granted.
    pub trait Fs = fs {
        /// Opens `path` relative to `dirfd` with Linux open(2) `flags` and `mode`;
        /// returns a GPU fd.
        fn openat(&self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> Result<i32, Errno> =
            0x8000_0021, waits;
        /// Closes a GPU fd.
        fn close(&self, fd: i32) -> Result<(), Errno> = 0x8000_0022, quick;
        /// Moves a GPU fd's offset (`whence`: Linux's `SEEK_*`); returns the new one.
        fn lseek(&self, fd: i32, offset: i64, whence: i32) -> Result<i64, Errno> = 0x8000_0023, quick;
        /// The x86_64 `struct stat` of a GPU fd, into `out` (`hostcall_abi::stat`).
        fn fstat(&self, fd: i32, out: &mut [u8]) -> Result<(), Errno> = 0x8000_0024, quick;
        /// The `struct stat` of `path` relative to `dirfd`, following a link as the last
        /// component when `follow` is not 0.
        fn statat(&self, dirfd: i32, path: &[u8], follow: u32, out: &mut [u8]) -> Result<(), Errno> =
            0x8000_0025, blocks;
        /// The working directory, into `out`; returns its length (`ERANGE` when it does
        /// not fit).
        fn getcwd(&self, out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0026, quick;
        /// Moves the run's working directory to `path`, a directory (links resolved, so
        /// `getcwd` then names it canonically) where the program may search, as
        /// chdir(2); outside the grants only to where the run started or to a directory
        /// on the way to a grant (`EACCES` elsewhere).
        fn chdir(&self, path: &[u8]) -> Result<(), Errno> = 0x8000_0039, blocks;
        /// The canonical absolute form of `path`, into `out`; returns its length
        /// (`ERANGE` when it does not fit).
        fn realpath(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0027, blocks;
        /// What fits in `out` of the target of the symbolic link `path`; returns its
        /// length, as readlink(2) (a caller whose buffer it fills tries a larger one).
        fn readlink(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0028, blocks;
        /// Removes the file, or with `AT_REMOVEDIR` in `flags` the empty directory, `path`
        /// relative to `dirfd`.
        fn unlinkat(&self, dirfd: i32, path: &[u8], flags: i32) -> Result<(), Errno> = 0x8000_0029, blocks;
        /// Makes the directory `path`.
        fn mkdir(&self, path: &[u8], mode: u32) -> Result<(), Errno> = 0x8000_002A, blocks;
        /// Sets the permission bits of `path`.
        fn chmod(&self, path: &[u8], mode: u32) -> Result<(), Errno> = 0x8000_002B, blocks;
        /// Sets the permission bits of a GPU fd's file.
        fn fchmod(&self, fd: i32, mode: u32) -> Result<(), Errno> = 0x8000_002C, blocks;
        /// Renames `from` to `to` (both in one grant).
        fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> = 0x8000_002D, blocks;
        /// Makes `new` a hard link to `existing` (both in one grant).
        fn link(&self, existing: &[u8], new: &[u8]) -> Result<(), Errno> = 0x8000_002E, blocks;
        /// Makes `link` a symbolic link to `target`, which must be relative and stay
        /// below the link.
        fn symlink(&self, target: &[u8], link: &[u8]) -> Result<(), Errno> = 0x8000_002F, blocks;
        /// Sets the length of a GPU fd's file.
        fn ftruncate(&self, fd: i32, len: i64) -> Result<(), Errno> = 0x8000_0030, blocks;
        /// Flushes a GPU fd's file to its device.
        fn fsync(&self, fd: i32) -> Result<(), Errno> = 0x8000_0031, blocks;
        /// The next entries of the directory open as `fd`, as `hostcall_abi::dirent`
        /// records in `out`; returns the bytes written, 0 at the end.
        fn getdents(&self, fd: i32, out: &mut [u8]) -> Result<usize, Errno> = 0x8000_0032, blocks;
        /// A second fd for what `fd` has open (file or socket; its offset shared), as
        /// `dup` and std's `try_clone` make (stdio is not served: `ENOSYS`).
        fn dup(&self, fd: i32) -> Result<i32, Errno> = 0x8000_0034, quick;
        /// Reads what `fd` has, up to `buf`'s length; 0 at its end. A socket or pipe
        /// waits for bytes as a blocking fd does, unless the GPU made it non-blocking or
        /// its receive timeout passes (`EAGAIN`); fd 0 is the host's stdin. Only the
        /// bytes read travel back.
        fn read(&self, fd: i32, buf: &mut [u8]) -> Result<Filled, Errno> = 0x8000_0035, reads_fd;
        /// Writes `data` to `fd`; returns the bytes written. A socket or pipe takes all
        /// of it, waiting for room as a blocking fd does (unless non-blocking, or its
        /// send timeout passes: what went, `EAGAIN` if nothing); fds 1 and 2 are the
        /// host's stdout and stderr, after the output already in ticket order
        /// ([`Service::WritePosted`](crate::Service::WritePosted)).
        fn write(&self, fd: i32, data: &[u8]) -> Result<usize, Errno> = 0x8000_0036, writes_fd;
        /// Reads from `fd` once, at most `len` bytes (at most
        /// [`DEVICE_READ_MAX`](crate::DEVICE_READ_MAX): a longer read is short), and
        /// copies them into GPU memory at `addr` (by DMA) before it answers; returns the
        /// bytes read (`EFAULT` when the copy fails). The copy precedes the answer's
        /// system-scope release; the caller issues a system-scope acquire fence after
        /// reading its answer and before reading the buffer.
        fn read_to_device(&self, fd: i32, addr: u64, len: u64) -> Result<usize, Errno> =
            0x8000_0037, reads_fd;
        /// Writes the `len` bytes of GPU memory at `addr` to `fd` (at most
        /// [`DEVICE_WRITE_MAX`](crate::DEVICE_WRITE_MAX); `EINVAL` over it), which the
        /// host copies out by DMA as it writes; returns the bytes written (`EFAULT` when
        /// the first copy fails). The caller's writes to them precede the request's
        /// system-scope release.
        fn write_from_device(&self, fd: i32, addr: u64, len: u64) -> Result<usize, Errno> =
            0x8000_0038, copies_to_fd;
    }

    /// Sockets, as the host's own, to and on only the addresses the host granted.
    /// Addresses are Linux `sockaddr` bytes (`hostcall_abi::net`); an address answer
    /// fills `SOCKADDR_MAX` bytes. A socket's fd is one of the `Fs` fds: `close`,
    /// `fstat`, `read` and `write` serve it too.
    pub trait Net = net {
        /// A socket of Linux `domain` (IPv4, IPv6) and `ty` (stream or datagram, with
        /// `SOCK_NONBLOCK` if wanted); returns its fd.
        fn socket(&self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno> = 0x8000_0040, quick;
        /// Connects to `addr` (`EACCES` unless granted).
        fn connect(&self, fd: i32, addr: &[u8]) -> Result<(), Errno> = 0x8000_0041, quick;
        /// Binds to `addr` (`EACCES` unless granted).
        fn bind(&self, fd: i32, addr: &[u8]) -> Result<(), Errno> = 0x8000_0042, quick;
        /// Listens, with a backlog of at most `BACKLOG_MAX`.
        fn listen(&self, fd: i32, backlog: i32) -> Result<(), Errno> = 0x8000_0043, quick;
        /// The next connection, as a new fd (`flags`: `SOCK_NONBLOCK`), its peer's
        /// address in `peer`.
        fn accept(&self, fd: i32, flags: i32, peer: &mut [u8]) -> Result<i32, Errno> = 0x8000_0044, quick;
        /// Sends what it can of `data` with Linux `flags`, to `to` unless it is empty;
        /// returns the bytes sent.
        fn sendto(&self, fd: i32, data: &[u8], flags: i32, to: &[u8]) -> Result<usize, Errno> =
            0x8000_0045, quick;
        /// Receives into `out` after its first `SOCKADDR_MAX` bytes, which take the
        /// sender's address; returns the bytes received.
        fn recvfrom(&self, fd: i32, flags: i32, out: &mut [u8]) -> Result<usize, Errno> =
            0x8000_0046, quick;
        /// Shuts down reading, writing or both (`SHUT_*`).
        fn shutdown(&self, fd: i32, how: i32) -> Result<(), Errno> = 0x8000_0047, quick;
        /// Sets one of the options `hostcall_abi::net` names, from its C value's bytes
        /// (`ENOPROTOOPT` for others).
        fn setsockopt(&self, fd: i32, level: i32, name: i32, value: &[u8]) -> Result<(), Errno> =
            0x8000_0048, quick;
        /// An option's C value, into `out`; returns its length.
        fn getsockopt(&self, fd: i32, level: i32, name: i32, out: &mut [u8]) -> Result<usize, Errno> =
            0x8000_0049, quick;
        /// The socket's own address, or with `peer` not 0 its peer's, into `out`.
        fn name(&self, fd: i32, peer: u32, out: &mut [u8]) -> Result<(), Errno> = 0x8000_004A, quick;
        /// Sets non-blocking mode (`FIONBIO`, `O_NONBLOCK`) when `on` is not 0, else
        /// clears it.
        fn set_nonblocking(&self, fd: i32, on: u32) -> Result<(), Errno> = 0x8000_004B, quick;
        /// Whether the fd is in non-blocking mode (1) or not (0).
        fn nonblocking(&self, fd: i32) -> Result<u32, Errno> = 0x8000_004C, quick;
        /// `poll(2)` over `fds` (`struct pollfd`s): each one's `revents` into `revents`,
        /// two bytes each; returns how many have any. A file is always ready.
        fn poll(&self, fds: &[u8], timeout_ms: i32, revents: &mut [u8]) -> Result<usize, Errno> =
            0x8000_004D, quick;
        /// The addresses of a granted host name, as `SOCKADDR_MAX`-byte records with
        /// port 0, into `out`; returns their bytes (`ENOENT` for a name not granted).
        fn resolve(&self, name: &[u8], out: &mut [u8]) -> Result<usize, Errno> = 0x8000_004E, quick;
    }
}
