//! One function per host service, building its request by the conventions of
//! `hostcall_abi::service`. Results are `i64`: a value, or `-errno` on failure. Transport
//! errors (unknown service, malformed request) arrive as `-ENOSYS` / `-EINVAL`.

use core::sync::atomic::AtomicU64;

use hostcall_abi::errno::{EAGAIN, EINVAL, EIO, ENOSYS, ERANGE};
use hostcall_abi::stat::STAT_SIZE;
use hostcall_abi::{BULK_PER_LANE, DEVICE_WRITE_MAX, POSTED_WAITS, Service, Status};

use crate::{Channel, Numbering, Platform, Reply, Request};

fn outcome(reply: Reply) -> i64 {
    match reply.status {
        Status::Ok => reply.result,
        Status::UnknownService => -(ENOSYS as i64),
        Status::Malformed => -(EINVAL as i64),
        // `exchange` traps on it; a posted reply never carries it.
        Status::Killed => -(EIO as i64),
    }
}

fn simple<P: Platform>(ch: &Channel, service: Service, args: [u64; 6]) -> i64 {
    outcome(ch.call::<P>(service as u32, args, &[], &mut [], None))
}

/// A path or name must fit in the smallest bulk buffer (a lane's in a shared packet).
fn too_long(bytes: &[u8]) -> bool {
    bytes.len() > BULK_PER_LANE
}

/// The request of a ping of `value`: the host echoes it (a transport round trip and
/// nothing else).
pub fn ping_request(value: u64) -> Request<'static> {
    Request {
        service: Service::Ping as u32,
        args: [value, 0, 0, 0, 0, 0],
        send: &[],
        send_more: &[],
        recv: &mut [],
        len_arg: None,
        posted: false,
        numbering: None,
    }
}

/// Echoes `value` (a transport round trip and nothing else).
pub fn ping<P: Platform>(ch: &Channel, value: u64) -> u64 {
    ch.exchange::<P>(ping_request(value)).result as u64
}

/// The request of a posted write of `piece` to stdout or stderr (`fd` 1 or 2), which
/// takes `count` tickets of `tickets` when it is published (one per piece of the write it
/// begins) and carries the first.
pub fn posted_write_request<'a>(
    fd: i32,
    piece: &'a [u8],
    tickets: &'a AtomicU64,
    count: u64,
) -> Request<'a> {
    Request {
        service: Service::WritePosted as u32,
        args: [fd as u64, 0, 0, 0, 0, 0],
        send: piece,
        send_more: &[],
        recv: &mut [],
        len_arg: Some(1),
        posted: true,
        numbering: Some(Numbering {
            counter: tickets,
            arg: 2,
            count,
        }),
    }
}

/// Writes of at least this many bytes from global memory go by DMA (`WriteFromDevice`):
/// below it, copying through the bulk buffer costs less than the host's copy set-up.
pub const DEVICE_WRITE_MIN: usize = 256 << 10;

/// Writes all of `data` to `fd`. Large buffers in global memory travel by DMA, the host
/// copying them out of GPU memory; others through the bulk buffer, as many round trips
/// as it needs. Returns the bytes written, or `-errno` if nothing was (a later failure
/// returns the count so far, as a short write).
pub fn write<P: Platform>(ch: &Channel, fd: i32, data: &[u8]) -> i64 {
    if data.len() >= DEVICE_WRITE_MIN && P::is_global(data.as_ptr()) {
        return write_from_device::<P>(ch, fd, data);
    }
    if data.is_empty() {
        return simple::<P>(ch, Service::Write, [fd as u64, 0, 0, 0, 0, 0]);
    }
    let mut done = 0usize;
    while done < data.len() {
        let args = [fd as u64, 0, 0, 0, 0, 0];
        let r = outcome(ch.call::<P>(Service::Write as u32, args, &data[done..], &mut [], Some(1)));
        if r < 0 {
            return if done == 0 { r } else { done as i64 };
        }
        if r == 0 {
            break;
        }
        done += r as usize;
    }
    done as i64
}

/// `write` of a global-memory buffer: one round trip per `DEVICE_WRITE_MAX` bytes. This
/// thread's writes to `data` precede the request's system-scope release, so the host's
/// copy sees them.
fn write_from_device<P: Platform>(ch: &Channel, fd: i32, data: &[u8]) -> i64 {
    let mut done = 0usize;
    for chunk in data.chunks(DEVICE_WRITE_MAX as usize) {
        let args = [
            fd as u64,
            chunk.as_ptr() as u64,
            chunk.len() as u64,
            0,
            0,
            0,
        ];
        let r = simple::<P>(ch, Service::WriteFromDevice, args);
        if r < 0 {
            return if done == 0 { r } else { done as i64 };
        }
        done += r as usize;
        if (r as usize) < chunk.len() {
            break;
        }
    }
    done as i64
}

/// Writes to stdout or stderr of at most this many bytes go posted, whole.
pub const POSTED_WHOLE_MAX: usize = 64 * BULK_PER_LANE;
/// Larger writes from other than global memory go in parts of this many bytes, each
/// whole, sent by [`write_ordered`]; from global memory, in parts of
/// `DEVICE_WRITE_MAX` bytes copied by DMA ([`write_ordered_from_device`]).
pub const ORDERED_BATCH: usize = 256 * BULK_PER_LANE;

/// Writes `data` to stdout or stderr (`fd` 1 or 2). It is cut into pieces that fit any
/// packet, which take consecutive tickets of `tickets` when the first piece is
/// published, and the host writes the pieces of an fd in ticket order. So one thread's
/// writes keep their order, and no other thread's bytes come inside a write of up to
/// [`ORDERED_BATCH`] bytes (a larger one may have them between its parts, as POSIX
/// allows). Up to [`POSTED_WHOLE_MAX`] bytes the pieces are posted, without waiting
/// for the host; larger writes wait ([`write_ordered`], [`write_ordered_from_device`]),
/// so that the output the host must hold for them stays bounded and nothing is
/// dropped. Returns `data.len()`: stdio errors are not reported back, as with CUDA's
/// `printf`.
pub fn write_posted<P: Platform>(ch: &Channel, fd: i32, data: &[u8], tickets: &AtomicU64) -> i64 {
    if data.len() > POSTED_WHOLE_MAX {
        if P::is_global(data.as_ptr()) {
            for part in data.chunks(DEVICE_WRITE_MAX as usize) {
                if !write_ordered_from_device::<P>(ch, fd, part, tickets) {
                    break;
                }
            }
        } else {
            for part in data.chunks(ORDERED_BATCH) {
                if !write_ordered::<P>(ch, fd, part, tickets) {
                    break;
                }
            }
        }
        return data.len() as i64;
    }
    let mut pieces = data.chunks(BULK_PER_LANE);
    let Some(first) = pieces.next() else {
        return 0;
    };
    let count = data.len().div_ceil(BULK_PER_LANE) as u64;
    let reply = ch.exchange::<P>(posted_write_request(fd, first, tickets, count));
    for (ticket, piece) in (reply.number + 1..).zip(pieces) {
        let args = [fd as u64, 0, ticket, 0, 0, 0];
        ch.post::<P>(Service::WritePosted as u32, args, piece, Some(1));
    }
    data.len() as i64
}

/// One part of a large write to stdout or stderr: its pieces take consecutive tickets
/// when the first is published, and each waits for the host. The host answers `EAGAIN`
/// for a piece it has no room to hold yet (the output before it has not arrived), and
/// the piece is sent again after a pause; the piece whose turn it is always goes
/// through, so the write advances as fast as the host writes the output before it.
/// Returns whether every piece was taken (it stops at the first the host refuses).
pub fn write_ordered<P: Platform>(ch: &Channel, fd: i32, part: &[u8], tickets: &AtomicU64) -> bool {
    let mut pieces = part.chunks(BULK_PER_LANE);
    let Some(first) = pieces.next() else {
        return true;
    };
    let count = part.len().div_ceil(BULK_PER_LANE) as u64;
    let mut request = posted_write_request(fd, first, tickets, count);
    request.args[3] = POSTED_WAITS;
    request.posted = false;
    let reply = ch.exchange::<P>(request);
    let ticket = reply.number;
    let piece = |ticket: u64, piece: &[u8]| {
        let args = [fd as u64, 0, ticket, POSTED_WAITS, 0, 0];
        ch.call::<P>(Service::WritePosted as u32, args, piece, &mut [], Some(1))
    };
    let took = |r: Reply| r.status == Status::Ok && r.result >= 0;
    took(until_taken::<P>(reply, || piece(ticket, first)))
        && (ticket + 1..)
            .zip(pieces)
            .all(|(t, p)| took(until_taken::<P>(piece(t, p), || piece(t, p))))
}

/// One part, of at most `DEVICE_WRITE_MAX` bytes in global memory, of a large write to
/// stdout or stderr: it takes one ticket when published, and the host copies it out of
/// GPU memory by DMA when that ticket's turn has come, answering `EAGAIN` before; so it
/// is never held on the host, and moves at DMA speed. This thread's writes to `part`
/// precede the request's system-scope release, so the host's copy sees them. Returns
/// whether all of it was written.
pub fn write_ordered_from_device<P: Platform>(
    ch: &Channel,
    fd: i32,
    part: &[u8],
    tickets: &AtomicU64,
) -> bool {
    let mut args = [
        fd as u64,
        part.as_ptr() as u64,
        part.len() as u64,
        0,
        POSTED_WAITS,
        0,
    ];
    let reply = ch.exchange::<P>(Request {
        service: Service::WriteFromDevice as u32,
        args,
        send: &[],
        send_more: &[],
        recv: &mut [],
        len_arg: None,
        posted: false,
        numbering: Some(Numbering {
            counter: tickets,
            arg: 3,
            count: 1,
        }),
    });
    args[3] = reply.number;
    let again = || ch.call::<P>(Service::WriteFromDevice as u32, args, &[], &mut [], None);
    outcome(until_taken::<P>(reply, again)) == part.len() as i64
}

/// The host's answer to a request once it is not `EAGAIN`: `reply` (the first answer)
/// or that of a resend by `again`, after pauses of 1 µs doubling to 1 ms.
fn until_taken<P: Platform>(mut reply: Reply, again: impl Fn() -> Reply) -> Reply {
    let mut pause = 1_000;
    while reply.status == Status::Ok && reply.result == -(EAGAIN as i64) {
        P::nanosleep(pause);
        pause = (pause * 2).min(1_000_000);
        reply = again();
    }
    reply
}

/// Reads up to `buf.len()` bytes in one round trip (a short read, as POSIX allows, when
/// `buf` is larger than the bulk buffer).
pub fn read<P: Platform>(ch: &Channel, fd: i32, buf: &mut [u8]) -> i64 {
    let args = [fd as u64, 0, 0, 0, 0, 0];
    outcome(ch.call::<P>(Service::Read as u32, args, &[], buf, Some(1)))
}

/// Opens `path` (no terminating NUL) with Linux `flags` and `mode`; returns a GPU fd.
pub fn open<P: Platform>(ch: &Channel, path: &[u8], flags: i32, mode: u32) -> i64 {
    if too_long(path) {
        return -(hostcall_abi::errno::ENAMETOOLONG as i64);
    }
    let args = [flags as u64, mode as u64, path.len() as u64, 0, 0, 0];
    outcome(ch.call::<P>(Service::Open as u32, args, path, &mut [], None))
}

/// Closes a GPU fd.
pub fn close<P: Platform>(ch: &Channel, fd: i32) -> i64 {
    simple::<P>(ch, Service::Close, [fd as u64, 0, 0, 0, 0, 0])
}

/// Moves a GPU fd's offset; `whence` is Linux's `SEEK_*`.
pub fn lseek<P: Platform>(ch: &Channel, fd: i32, offset: i64, whence: i32) -> i64 {
    simple::<P>(
        ch,
        Service::Lseek,
        [fd as u64, offset as u64, whence as u64, 0, 0, 0],
    )
}

/// Fills `out` with the x86_64 `struct stat` of a GPU fd.
pub fn fstat<P: Platform>(ch: &Channel, fd: i32, out: &mut [u8; STAT_SIZE]) -> i64 {
    let args = [fd as u64, 0, 0, 0, 0, 0];
    outcome(ch.call::<P>(Service::Fstat as u32, args, &[], out, None))
}

/// Fills `out` with the x86_64 `struct stat` of `path`, following links if `follow`.
pub fn stat<P: Platform>(
    ch: &Channel,
    path: &[u8],
    follow: bool,
    out: &mut [u8; STAT_SIZE],
) -> i64 {
    if too_long(path) {
        return -(hostcall_abi::errno::ENAMETOOLONG as i64);
    }
    let args = [path.len() as u64, follow as u64, 0, 0, 0, 0];
    outcome(ch.call::<P>(Service::Stat as u32, args, path, out, None))
}

/// A service whose reply is a string: copies it into `out` and returns its length, or
/// `-ERANGE` if `out` is too small.
fn string_reply<P: Platform>(ch: &Channel, service: Service, input: &[u8], out: &mut [u8]) -> i64 {
    if too_long(input) {
        return -(hostcall_abi::errno::ENAMETOOLONG as i64);
    }
    let args = [input.len() as u64, 0, 0, 0, 0, 0];
    let r = outcome(ch.call::<P>(service as u32, args, input, out, None));
    if r >= 0 && r as usize > out.len() {
        return -(ERANGE as i64);
    }
    r
}

/// The host process's working directory (the GPU program's cwd).
pub fn getcwd<P: Platform>(ch: &Channel, out: &mut [u8]) -> i64 {
    string_reply::<P>(ch, Service::Getcwd, &[], out)
}

/// The canonical absolute form of `path`.
pub fn realpath<P: Platform>(ch: &Channel, path: &[u8], out: &mut [u8]) -> i64 {
    string_reply::<P>(ch, Service::Realpath, path, out)
}

/// The target of the symbolic link `path`.
pub fn readlink<P: Platform>(ch: &Channel, path: &[u8], out: &mut [u8]) -> i64 {
    string_reply::<P>(ch, Service::Readlink, path, out)
}

/// The value of environment variable `name` as the host grants it, or `-ENOENT`.
pub fn getenv<P: Platform>(ch: &Channel, name: &[u8], out: &mut [u8]) -> i64 {
    string_reply::<P>(ch, Service::Getenv, name, out)
}

/// Tells the host the program exits with `code`; the caller must then stop the kernel.
pub fn exit<P: Platform>(ch: &Channel, code: i32) -> i64 {
    simple::<P>(ch, Service::Exit, [code as u64, 0, 0, 0, 0, 0])
}

/// Tells the host this thread aborts; the caller must then trap.
pub fn abort<P: Platform>(ch: &Channel) -> i64 {
    simple::<P>(ch, Service::Abort, [0; 6])
}

/// The host's `CLOCK_REALTIME`, in nanoseconds since the Unix epoch.
pub fn clock_realtime<P: Platform>(ch: &Channel) -> i64 {
    simple::<P>(ch, Service::ClockRealtime, [0; 6])
}

/// Fills `buf` (up to one bulk buffer: a short count when larger) with random bytes from
/// the host's OS.
pub fn getrandom<P: Platform>(ch: &Channel, buf: &mut [u8]) -> i64 {
    outcome(ch.call::<P>(Service::Getrandom as u32, [0; 6], &[], buf, Some(0)))
}

/// A service whose input is one path (its length in `a0`) and whose other arguments
/// follow: `OpenAt`, `StatAt`, `UnlinkAt`, `Mkdir`, `Chmod`.
fn path_call<P: Platform>(
    ch: &Channel,
    service: Service,
    path: &[u8],
    rest: [u64; 3],
    out: &mut [u8],
) -> i64 {
    if too_long(path) {
        return -(hostcall_abi::errno::ENAMETOOLONG as i64);
    }
    let args = [path.len() as u64, rest[0], rest[1], rest[2], 0, 0];
    outcome(ch.call::<P>(service as u32, args, path, out, None))
}

/// Opens `path` relative to the directory `dirfd` (or `AT_FDCWD`).
pub fn openat<P: Platform>(ch: &Channel, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> i64 {
    let rest = [dirfd as u64, flags as u64, mode as u64];
    path_call::<P>(ch, Service::OpenAt, path, rest, &mut [])
}

/// `stat` of `path` relative to the directory `dirfd`, following links if `follow`.
pub fn statat<P: Platform>(
    ch: &Channel,
    dirfd: i32,
    path: &[u8],
    follow: bool,
    out: &mut [u8; STAT_SIZE],
) -> i64 {
    path_call::<P>(
        ch,
        Service::StatAt,
        path,
        [dirfd as u64, follow as u64, 0],
        out,
    )
}

/// Removes the file (or, with `AT_REMOVEDIR`, the empty directory) `path` relative to
/// the directory `dirfd`.
pub fn unlinkat<P: Platform>(ch: &Channel, dirfd: i32, path: &[u8], flags: i32) -> i64 {
    path_call::<P>(
        ch,
        Service::UnlinkAt,
        path,
        [dirfd as u64, flags as u64, 0],
        &mut [],
    )
}

/// Makes the directory `path`.
pub fn mkdir<P: Platform>(ch: &Channel, path: &[u8], mode: u32) -> i64 {
    path_call::<P>(ch, Service::Mkdir, path, [mode as u64, 0, 0], &mut [])
}

/// Sets the permission bits of `path`.
pub fn chmod<P: Platform>(ch: &Channel, path: &[u8], mode: u32) -> i64 {
    path_call::<P>(ch, Service::Chmod, path, [mode as u64, 0, 0], &mut [])
}

/// A service of two paths (`Rename`, `Link`, `Symlink`): `joined` is `first NUL second`.
pub fn two_paths<P: Platform>(ch: &Channel, service: Service, joined: &[u8]) -> i64 {
    if too_long(joined) {
        return -(hostcall_abi::errno::ENAMETOOLONG as i64);
    }
    let args = [joined.len() as u64, 0, 0, 0, 0, 0];
    outcome(ch.call::<P>(service as u32, args, joined, &mut [], None))
}

/// Sets the permission bits of a GPU fd's file.
pub fn fchmod<P: Platform>(ch: &Channel, fd: i32, mode: u32) -> i64 {
    simple::<P>(ch, Service::Fchmod, [fd as u64, mode as u64, 0, 0, 0, 0])
}

/// Sets the length of a GPU fd's file.
pub fn ftruncate<P: Platform>(ch: &Channel, fd: i32, len: i64) -> i64 {
    simple::<P>(ch, Service::Ftruncate, [fd as u64, len as u64, 0, 0, 0, 0])
}

/// Flushes a GPU fd's file to its device.
pub fn fsync<P: Platform>(ch: &Channel, fd: i32) -> i64 {
    simple::<P>(ch, Service::Fsync, [fd as u64, 0, 0, 0, 0, 0])
}

/// The next entries of the directory open as `fd`, as `hostcall_abi::dirent` records in
/// `out`; returns the bytes written, 0 at the end.
pub fn getdents<P: Platform>(ch: &Channel, fd: i32, out: &mut [u8]) -> i64 {
    let args = [fd as u64, out.len() as u64, 0, 0, 0, 0];
    outcome(ch.call::<P>(Service::Getdents as u32, args, &[], out, Some(1)))
}

/// Copies the `which` start-up block (`STARTUP_ARGS`, `STARTUP_ENV`) from `offset` into
/// `out`; returns the block's whole length.
pub fn startup<P: Platform>(ch: &Channel, which: u64, offset: u64, out: &mut [u8]) -> i64 {
    let args = [which, offset, out.len() as u64, 0, 0, 0];
    outcome(ch.call::<P>(Service::Startup as u32, args, &[], out, Some(2)))
}
