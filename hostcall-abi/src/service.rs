//! Service ids and transport status codes.
//!
//! Argument conventions (`a0..a5` = `LaneSlot::args`; "bulk" = the lane's bulk buffer).
//! Out: `a0` is the result, and `a5` the number of bulk bytes the host wrote back (0 for
//! services without bulk output):
//!
//! | service | arguments | bulk | result |
//! | --- | --- | --- | --- |
//! | `Ping` | any | – | `a0` echoed |
//! | `Write` | fd, len | in: data | bytes written |
//! | `Read` | fd, len | out: data | bytes read |
//! | `Open` | flags, mode, path len | in: path | fd |
//! | `Close` | fd | – | 0 |
//! | `Lseek` | fd, offset, whence | – | new offset |
//! | `Fstat` | fd | out: x86_64 `struct stat` | 0 |
//! | `Stat` | path len, follow links (0/1) | in: path, out: `struct stat` | 0 |
//! | `Getcwd` | – | out: path | path length |
//! | `Realpath` | path len | in: path, out: path | path length |
//! | `Readlink` | path len | in: path, out: target | target length |
//! | `Getenv` | name len | in: name, out: value | value length |
//! | `Exit` | code | – | 0 (the caller then stops the kernel) |
//! | `Abort` | – | – | 0 (the caller then traps) |
//! | `ClockRealtime` | – | – | ns since the Unix epoch |
//! | `Getrandom` | len | out: bytes | bytes written |
//! | `WritePosted` | fd (1 or 2), len, ticket, 0 or [`POSTED_WAITS`] | in: data | posted: none, nobody waits; with [`POSTED_WAITS`]: len, or `-EAGAIN` when the host holds too much output waiting for earlier tickets (send the same ticket again later) |
//! | `WriteFromDevice` | fd, device address, len; for fd 1 or 2 optionally a ticket and [`POSTED_WAITS`] | – | bytes written (the host copies the bytes out of GPU global memory by DMA; at most [`DEVICE_WRITE_MAX`] per call). With a ticket, the bytes are written in ticket order with the posted writes, and the answer is `-EAGAIN` until the ticket's turn has come (send it again later) |
//! | `OpenAt` | path len, dirfd, flags, mode | in: path | fd |
//! | `StatAt` | path len, dirfd, follow links (0/1) | in: path, out: `struct stat` | 0 |
//! | `UnlinkAt` | path len, dirfd, [`AT_REMOVEDIR`] or 0 | in: path | 0 |
//! | `Mkdir` | path len, mode | in: path | 0 |
//! | `Chmod` | path len, mode | in: path | 0 |
//! | `Rename` | len | in: old path, NUL, new path | 0 |
//! | `Link` | len | in: existing path, NUL, new path | 0 |
//! | `Symlink` | len | in: target, NUL, link path | 0 |
//! | `Fchmod` | fd, mode | – | 0 |
//! | `Ftruncate` | fd, len | – | 0 |
//! | `Fsync` | fd | – | 0 |
//! | `Getdents` | fd, len | out: [`dirent`](crate::dirent) records | bytes (0 at the end) |
//! | `Startup` | [`STARTUP_ARGS`] or [`STARTUP_ENV`], offset, len | out: the block's bytes from offset | the block's length |
//!
//! Services declared with `service!` (`hostcall_client::std_services`) follow them in
//! `STD_IDS`; their declarations are their conventions.
//!
//! `dirfd` is a GPU fd of a directory, or [`AT_FDCWD`] for the working directory; an
//! absolute path ignores it, as on Linux. The `Startup` blocks are NUL-terminated
//! strings back to back: the program's arguments, and its environment as `NAME=value`.

/// The first id of std's services: they take [`crate::typed::STD_IDS`], which no user
/// service can, so that a user's id 0 is the default handler (as in AMD's hostcall API)
/// and user ids never collide with std's.
pub const STD_BASE: u32 = crate::typed::STD_IDS.start;

/// A host service of std's, by numeric id.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is documented by the table above
pub enum Service {
    Ping = STD_BASE,
    Write = STD_BASE + 1,
    Read = STD_BASE + 2,
    Open = STD_BASE + 3,
    Close = STD_BASE + 4,
    Lseek = STD_BASE + 5,
    Fstat = STD_BASE + 6,
    Stat = STD_BASE + 7,
    Getcwd = STD_BASE + 8,
    Realpath = STD_BASE + 9,
    Readlink = STD_BASE + 10,
    Getenv = STD_BASE + 11,
    Exit = STD_BASE + 12,
    Abort = STD_BASE + 13,
    ClockRealtime = STD_BASE + 14,
    Getrandom = STD_BASE + 15,
    WriteFromDevice = STD_BASE + 16,
    WritePosted = STD_BASE + 17,
    OpenAt = STD_BASE + 18,
    StatAt = STD_BASE + 19,
    UnlinkAt = STD_BASE + 20,
    Mkdir = STD_BASE + 21,
    Chmod = STD_BASE + 22,
    Rename = STD_BASE + 23,
    Link = STD_BASE + 24,
    Symlink = STD_BASE + 25,
    Fchmod = STD_BASE + 26,
    Ftruncate = STD_BASE + 27,
    Fsync = STD_BASE + 28,
    Getdents = STD_BASE + 29,
    Startup = STD_BASE + 30,
}

/// Linux's `AT_FDCWD`: a `dirfd` meaning the working directory.
pub const AT_FDCWD: i32 = -100;

/// Linux's `AT_REMOVEDIR`: `UnlinkAt` removes an empty directory.
pub const AT_REMOVEDIR: i32 = 0x200;

/// `Startup`'s first argument: the program's arguments (`argv`).
pub const STARTUP_ARGS: u64 = 0;

/// `Startup`'s first argument: the program's environment (`environ`).
pub const STARTUP_ENV: u64 = 1;

/// `WritePosted`'s fourth argument when the caller waits for the answer: the host then
/// answers `EAGAIN` rather than refusing a piece it has no room to hold, so a large
/// write slows down instead of losing output.
pub const POSTED_WAITS: u64 = 1;

/// Most bytes one `WriteFromDevice` call moves; the client loops over larger writes.
pub const DEVICE_WRITE_MAX: u64 = 64 << 20;

/// Bytes in a path, its terminating NUL included, as on Linux: the host answers
/// `ENAMETOOLONG` for a longer one.
pub const PATH_MAX: usize = 4096;

/// Bytes in one component of a path, as on Linux.
pub const NAME_MAX: usize = 255;

impl Service {
    /// Every service, in id order.
    pub const ALL: [Service; 31] = [
        Service::Ping,
        Service::Write,
        Service::Read,
        Service::Open,
        Service::Close,
        Service::Lseek,
        Service::Fstat,
        Service::Stat,
        Service::Getcwd,
        Service::Realpath,
        Service::Readlink,
        Service::Getenv,
        Service::Exit,
        Service::Abort,
        Service::ClockRealtime,
        Service::Getrandom,
        Service::WriteFromDevice,
        Service::WritePosted,
        Service::OpenAt,
        Service::StatAt,
        Service::UnlinkAt,
        Service::Mkdir,
        Service::Chmod,
        Service::Rename,
        Service::Link,
        Service::Symlink,
        Service::Fchmod,
        Service::Ftruncate,
        Service::Fsync,
        Service::Getdents,
        Service::Startup,
    ];

    /// The service with this id, if any.
    pub fn from_id(id: u32) -> Option<Service> {
        Service::ALL
            .get(id.checked_sub(STD_BASE)? as usize)
            .copied()
    }

    /// Its index among std's services (its id less [`STD_BASE`]).
    pub const fn index(self) -> usize {
        (self as u32 - STD_BASE) as usize
    }

    /// The argument holding the length of the bytes the lane sends in its bulk buffer,
    /// for services that send any (the table above). The host copies exactly those
    /// bytes out of the port before the service runs.
    pub const fn input_len_arg(self) -> Option<usize> {
        match self {
            Service::Write | Service::WritePosted => Some(1),
            Service::Open => Some(2),
            Service::Stat
            | Service::Realpath
            | Service::Readlink
            | Service::Getenv
            | Service::OpenAt
            | Service::StatAt
            | Service::UnlinkAt
            | Service::Mkdir
            | Service::Chmod
            | Service::Rename
            | Service::Link
            | Service::Symlink => Some(0),
            _ => None,
        }
    }

    /// A short lowercase name for traces.
    pub fn name(self) -> &'static str {
        match self {
            Service::Ping => "ping",
            Service::Write => "write",
            Service::Read => "read",
            Service::Open => "open",
            Service::Close => "close",
            Service::Lseek => "lseek",
            Service::Fstat => "fstat",
            Service::Stat => "stat",
            Service::Getcwd => "getcwd",
            Service::Realpath => "realpath",
            Service::Readlink => "readlink",
            Service::Getenv => "getenv",
            Service::Exit => "exit",
            Service::Abort => "abort",
            Service::ClockRealtime => "clock_realtime",
            Service::Getrandom => "getrandom",
            Service::WriteFromDevice => "write_from_device",
            Service::WritePosted => "write_posted",
            Service::OpenAt => "openat",
            Service::StatAt => "statat",
            Service::UnlinkAt => "unlinkat",
            Service::Mkdir => "mkdir",
            Service::Chmod => "chmod",
            Service::Rename => "rename",
            Service::Link => "link",
            Service::Symlink => "symlink",
            Service::Fchmod => "fchmod",
            Service::Ftruncate => "ftruncate",
            Service::Fsync => "fsync",
            Service::Getdents => "getdents",
            Service::Startup => "startup",
        }
    }
}

/// Whether the host ran the service: the transport's own verdict, kept apart from the
/// service's result so a trap-worthy protocol error never looks like an errno.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The service ran; `args[0]` holds its result.
    Ok = 0,
    /// No service has this id on the host (`args[0]` = `-ENOSYS`).
    UnknownService = 1,
    /// The request broke the service's argument rules, e.g. a length over the lane's
    /// bulk buffer (`args[0]` = `-EINVAL`).
    Malformed = 2,
    /// The host has stopped the launch (its timeout fired): the lane records
    /// [`crate::FaultKind::Killed`] and traps instead of returning.
    Killed = 3,
}

impl Status {
    /// The status with this code; unknown codes read as `Malformed`.
    pub const fn from_code(code: u32) -> Status {
        match code {
            0 => Status::Ok,
            1 => Status::UnknownService,
            3 => Status::Killed,
            _ => Status::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for (i, s) in Service::ALL.iter().enumerate() {
            assert_eq!(*s as u32, STD_BASE + i as u32);
            assert_eq!(s.index(), i);
            assert_eq!(Service::from_id(STD_BASE + i as u32), Some(*s));
        }
        assert_eq!(Service::from_id(STD_BASE + Service::ALL.len() as u32), None);
        assert_eq!(Service::from_id(0), None, "id 0 is the default handler's");
        assert!(crate::typed::STD_IDS.contains(&(Service::Startup as u32)));
    }

    #[test]
    fn input_lengths_follow_the_table() {
        assert_eq!(Service::Write.input_len_arg(), Some(1));
        assert_eq!(Service::Open.input_len_arg(), Some(2));
        assert_eq!(Service::Getenv.input_len_arg(), Some(0));
        assert_eq!(
            Service::Read.input_len_arg(),
            None,
            "read's bulk is output only"
        );
        assert_eq!(Service::Getrandom.input_len_arg(), None);
    }

    #[test]
    fn status_codes_round_trip() {
        for s in [
            Status::Ok,
            Status::UnknownService,
            Status::Malformed,
            Status::Killed,
        ] {
            assert_eq!(Status::from_code(s as u32), s);
        }
        assert_eq!(Status::from_code(77), Status::Malformed);
    }
}
