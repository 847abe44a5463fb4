//! One function per host service, as libc calls them: the stream services built by the
//! conventions of `hostcall_abi::service`, the others through their declarations
//! (`crate::std_services`). Results are `i64`: a value, or `-errno` on failure.
//! Transport errors (unknown service, malformed request) arrive as `-ENOSYS` / `-EINVAL`.

use core::sync::atomic::Ordering::Acquire;
use core::sync::atomic::{AtomicU64, fence};

use hostcall_abi::errno::{EAGAIN, EINVAL, EIO, ENAMETOOLONG, ENOSYS, ERANGE};
use hostcall_abi::stat::STAT_SIZE;
use hostcall_abi::typed::{Errno, bulk_len};
use hostcall_abi::{
    AT_FDCWD, BULK_PER_LANE, DEVICE_READ_MAX, DEVICE_WRITE_MAX, POSTED_WAITS, Service, Status,
};

use crate::std_services::{Environment, Fs, Lifecycle, Net, Time};
use crate::typed::Client;
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
        continues: false,
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
        continues: false,
    }
}

/// Writes of at least this many bytes from global memory go by DMA (`WriteFromDevice`):
/// below it, copying through the bulk buffer costs less than the host's copy set-up. A
/// lane stores into the bulk buffer across PCIe about 90 ns a word: a GPU echo server
/// writing 64 KiB pieces that way moved 80 MB/s on an H200, the host's DMA costs some
/// 30 µs a call, and they cross near 3 KiB.
pub const DEVICE_WRITE_MIN: usize = 4 << 10;

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

/// Writes to stdout or stderr of at most this many bytes (one piece, which any packet
/// carries) go posted. One the host has no room for yet stays on its port until it
/// has: nothing is lost, and it needs no further port, as a later piece of a longer
/// write would.
pub const POSTED_WHOLE_MAX: usize = BULK_PER_LANE;
/// Larger writes from other than global memory go in parts of this many bytes, each
/// whole, sent by [`write_ordered`]; from global memory, in parts of
/// `DEVICE_WRITE_MAX` bytes copied by DMA ([`write_ordered_from_device`]).
pub const ORDERED_BATCH: usize = 256 * BULK_PER_LANE;

/// Writes `data` to stdout or stderr (`fd` 1 or 2). It is cut into pieces that fit any
/// packet, which take consecutive tickets of `tickets` when the first piece is
/// published, and the host writes the pieces of an fd in ticket order. So one thread's
/// writes keep their order, and no other thread's bytes come inside a write of up to
/// [`ORDERED_BATCH`] bytes (a larger one may have them between its parts, as POSIX
/// allows). A write of one piece ([`POSTED_WHOLE_MAX`] bytes) is posted, without
/// waiting for the host; larger writes wait ([`write_ordered`],
/// [`write_ordered_from_device`]), so that the output the host must hold for them stays
/// bounded and nothing is dropped. Returns `data.len()`: stdio errors are not reported
/// back, as with CUDA's `printf`.
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
    if data.is_empty() {
        return 0;
    }
    ch.exchange::<P>(posted_write_request(fd, data, tickets, 1));
    data.len() as i64
}

/// A request of `service` carrying a ticket an earlier request took: it waits for its
/// answer, on a continuation port (`hostcall_abi::continuation_ports`).
fn continuing<P: Platform>(ch: &Channel, service: Service, args: [u64; 6], send: &[u8]) -> Reply {
    ch.exchange::<P>(Request {
        service: service as u32,
        args,
        send,
        send_more: &[],
        recv: &mut [],
        len_arg: (!send.is_empty()).then_some(1),
        posted: false,
        numbering: None,
        continues: true,
    })
}

/// One part of a large write to stdout or stderr: its pieces take consecutive tickets
/// when the first is published, and each waits for the host. The host answers `EAGAIN`
/// for a piece it has no room to hold yet (the output before it has not arrived), and
/// the piece is sent again after a pause; the piece whose turn it is always goes
/// through, so the write advances as fast as the host writes the output before it. The
/// pieces after the first, and every piece sent again, go on continuation ports, which
/// the host never holds back. Returns whether every piece was taken (it stops at the
/// first the host refuses).
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
        continuing::<P>(ch, Service::WritePosted, args, piece)
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
/// is never held on the host, and moves at DMA speed. Sent again, it goes on a
/// continuation port. This thread's writes to `part` precede the request's system-scope
/// release, so the host's copy sees them. Returns whether all of it was written.
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
        continues: false,
    });
    args[3] = reply.number;
    let again = || continuing::<P>(ch, Service::WriteFromDevice, args, &[]);
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

/// Reads into global memory of at least this many bytes go by DMA (`ReadToDevice`): a
/// lane copies out of the bulk buffer one 8-byte load across PCIe at a time, about a
/// microsecond each, so even a kilobyte costs more than the host's copy.
pub const DEVICE_READ_MIN: usize = 1024;

/// Reads up to `buf.len()` bytes in one round trip (a short read, as POSIX allows, when
/// `buf` is larger than what one call brings). A large buffer in global memory is filled
/// by the host's DMA, up to `DEVICE_READ_MAX` bytes; others through the bulk buffer.
pub fn read<P: Platform>(ch: &Channel, fd: i32, buf: &mut [u8]) -> i64 {
    if buf.len() >= DEVICE_READ_MIN && P::is_global(buf.as_ptr()) {
        let n = buf.len().min(DEVICE_READ_MAX as usize);
        let args = [fd as u64, buf.as_mut_ptr() as u64, n as u64, 0, 0, 0];
        let r = simple::<P>(ch, Service::ReadToDevice, args);
        // The host's copy precedes its answer's release; the answer (inline, polled
        // relaxed) then this acquire fence order this lane's reads of `buf` after the
        // copy.
        fence(Acquire);
        return r;
    }
    let args = [fd as u64, 0, 0, 0, 0, 0];
    outcome(ch.call::<P>(Service::Read as u32, args, &[], buf, Some(1)))
}

/// A declared service's value as libc returns it (`()` is 0).
pub trait CReturn {
    /// The value as a C function's result.
    fn to_i64(self) -> i64;
}

impl CReturn for () {
    fn to_i64(self) -> i64 {
        0
    }
}

impl CReturn for i32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl CReturn for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}

impl CReturn for usize {
    fn to_i64(self) -> i64 {
        self as i64
    }
}

/// A declared service's answer as libc returns it: its value, or `-errno`.
pub fn answer<T: CReturn>(r: Result<T, Errno>) -> i64 {
    r.map_or_else(|e| -(e.0 as i64), T::to_i64)
}

/// The client of std's declared trait `S` over `ch`.
fn client<P: Platform + 'static, S: ?Sized>(ch: &Channel) -> Client<P, S> {
    Client::new(*ch)
}

/// The client of std's socket services: libc's socket functions call its methods,
/// whose `Result`s they turn into errno themselves.
pub fn net<P: Platform + 'static>(ch: &Channel) -> Client<P, dyn Net> {
    client::<P, dyn Net>(ch)
}

/// `out`, cut to what one lane's bulk buffer brings back.
fn room(out: &mut [u8]) -> &mut [u8] {
    let n = out.len().min(BULK_PER_LANE);
    &mut out[..n]
}

/// `-ENAMETOOLONG` when the paths would not fit one lane's bulk buffer together.
fn paths_fit(paths: &[&[u8]]) -> Result<(), i64> {
    if bulk_len(paths) > BULK_PER_LANE {
        return Err(-(ENAMETOOLONG as i64));
    }
    Ok(())
}

/// A string answer of a declared service: its length, or `-ERANGE` when it did not fit
/// `out`.
fn string_answer(r: Result<usize, Errno>, room: usize) -> i64 {
    match r {
        Ok(n) if n > room => -(ERANGE as i64),
        r => answer(r),
    }
}

/// Opens `path` (no terminating NUL) with Linux `flags` and `mode`; returns a GPU fd.
pub fn open<P: Platform + 'static>(ch: &Channel, path: &[u8], flags: i32, mode: u32) -> i64 {
    openat::<P>(ch, AT_FDCWD, path, flags, mode)
}

/// Opens `path` relative to the directory `dirfd` (or `AT_FDCWD`).
pub fn openat<P: Platform + 'static>(
    ch: &Channel,
    dirfd: i32,
    path: &[u8],
    flags: i32,
    mode: u32,
) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).openat(dirfd, path, flags, mode))
}

/// Closes a GPU fd.
pub fn close<P: Platform + 'static>(ch: &Channel, fd: i32) -> i64 {
    answer(client::<P, dyn Fs>(ch).close(fd))
}

/// A second GPU fd for what `fd` has open.
pub fn dup<P: Platform + 'static>(ch: &Channel, fd: i32) -> i64 {
    answer(client::<P, dyn Fs>(ch).dup(fd))
}

/// Moves a GPU fd's offset; `whence` is Linux's `SEEK_*`.
pub fn lseek<P: Platform + 'static>(ch: &Channel, fd: i32, offset: i64, whence: i32) -> i64 {
    answer(client::<P, dyn Fs>(ch).lseek(fd, offset, whence))
}

/// Fills `out` with the x86_64 `struct stat` of a GPU fd.
pub fn fstat<P: Platform + 'static>(ch: &Channel, fd: i32, out: &mut [u8; STAT_SIZE]) -> i64 {
    answer(client::<P, dyn Fs>(ch).fstat(fd, out))
}

/// Fills `out` with the x86_64 `struct stat` of `path`, following links if `follow`.
pub fn stat<P: Platform + 'static>(
    ch: &Channel,
    path: &[u8],
    follow: bool,
    out: &mut [u8; STAT_SIZE],
) -> i64 {
    statat::<P>(ch, AT_FDCWD, path, follow, out)
}

/// `stat` of `path` relative to the directory `dirfd`, following links if `follow`.
pub fn statat<P: Platform + 'static>(
    ch: &Channel,
    dirfd: i32,
    path: &[u8],
    follow: bool,
    out: &mut [u8; STAT_SIZE],
) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).statat(dirfd, path, follow as u32, out))
}

/// The host process's working directory (the GPU program's cwd).
pub fn getcwd<P: Platform + 'static>(ch: &Channel, out: &mut [u8]) -> i64 {
    let out = room(out);
    let n = out.len();
    string_answer(client::<P, dyn Fs>(ch).getcwd(out), n)
}

/// The canonical absolute form of `path`.
pub fn realpath<P: Platform + 'static>(ch: &Channel, path: &[u8], out: &mut [u8]) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    let out = room(out);
    let n = out.len();
    string_answer(client::<P, dyn Fs>(ch).realpath(path, out), n)
}

/// The target of the symbolic link `path`.
pub fn readlink<P: Platform + 'static>(ch: &Channel, path: &[u8], out: &mut [u8]) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    let out = room(out);
    let n = out.len();
    string_answer(client::<P, dyn Fs>(ch).readlink(path, out), n)
}

/// The value of environment variable `name` as the host grants it, or `-ENOENT`.
pub fn getenv<P: Platform + 'static>(ch: &Channel, name: &[u8], out: &mut [u8]) -> i64 {
    if let Err(e) = paths_fit(&[name]) {
        return e;
    }
    let out = room(out);
    let n = out.len();
    string_answer(client::<P, dyn Environment>(ch).getenv(name, out), n)
}

/// Tells the host the program exits with `code`; the caller must then stop the kernel.
pub fn exit<P: Platform + 'static>(ch: &Channel, code: i32) {
    client::<P, dyn Lifecycle>(ch).exit(code)
}

/// Tells the host this thread aborts; the caller must then trap.
pub fn abort<P: Platform + 'static>(ch: &Channel) {
    client::<P, dyn Lifecycle>(ch).abort()
}

/// Tells the host this thread aborts because it panicked; the caller must then trap.
pub fn panic_abort<P: Platform + 'static>(ch: &Channel) {
    client::<P, dyn Lifecycle>(ch).panic_abort()
}

/// The host's `CLOCK_REALTIME`, in nanoseconds since the Unix epoch.
pub fn clock_realtime<P: Platform + 'static>(ch: &Channel) -> i64 {
    client::<P, dyn Time>(ch).realtime()
}

/// Fills `buf` (up to one bulk buffer: a short count when larger) with random bytes from
/// the host's OS.
pub fn getrandom<P: Platform + 'static>(ch: &Channel, buf: &mut [u8]) -> i64 {
    answer(client::<P, dyn Time>(ch).getrandom(room(buf)))
}

/// Removes the file (or, with `AT_REMOVEDIR`, the empty directory) `path` relative to
/// the directory `dirfd`.
pub fn unlinkat<P: Platform + 'static>(ch: &Channel, dirfd: i32, path: &[u8], flags: i32) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).unlinkat(dirfd, path, flags))
}

/// Makes the directory `path`.
pub fn mkdir<P: Platform + 'static>(ch: &Channel, path: &[u8], mode: u32) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).mkdir(path, mode))
}

/// Sets the permission bits of `path`.
pub fn chmod<P: Platform + 'static>(ch: &Channel, path: &[u8], mode: u32) -> i64 {
    if let Err(e) = paths_fit(&[path]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).chmod(path, mode))
}

/// Renames `from` to `to`.
pub fn rename<P: Platform + 'static>(ch: &Channel, from: &[u8], to: &[u8]) -> i64 {
    if let Err(e) = paths_fit(&[from, to]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).rename(from, to))
}

/// Makes `new` a hard link to `existing`.
pub fn link<P: Platform + 'static>(ch: &Channel, existing: &[u8], new: &[u8]) -> i64 {
    if let Err(e) = paths_fit(&[existing, new]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).link(existing, new))
}

/// Makes `link` a symbolic link to `target`.
pub fn symlink<P: Platform + 'static>(ch: &Channel, target: &[u8], link: &[u8]) -> i64 {
    if let Err(e) = paths_fit(&[target, link]) {
        return e;
    }
    answer(client::<P, dyn Fs>(ch).symlink(target, link))
}

/// Sets the permission bits of a GPU fd's file.
pub fn fchmod<P: Platform + 'static>(ch: &Channel, fd: i32, mode: u32) -> i64 {
    answer(client::<P, dyn Fs>(ch).fchmod(fd, mode))
}

/// Sets the length of a GPU fd's file.
pub fn ftruncate<P: Platform + 'static>(ch: &Channel, fd: i32, len: i64) -> i64 {
    answer(client::<P, dyn Fs>(ch).ftruncate(fd, len))
}

/// Flushes a GPU fd's file to its device.
pub fn fsync<P: Platform + 'static>(ch: &Channel, fd: i32) -> i64 {
    answer(client::<P, dyn Fs>(ch).fsync(fd))
}

/// The next entries of the directory open as `fd`, as `hostcall_abi::dirent` records in
/// `out` (at most one bulk buffer's worth); returns the bytes written, 0 at the end.
pub fn getdents<P: Platform + 'static>(ch: &Channel, fd: i32, out: &mut [u8]) -> i64 {
    answer(client::<P, dyn Fs>(ch).getdents(fd, room(out)))
}

/// Copies the `which` start-up block (`STARTUP_ARGS`, `STARTUP_ENV`) from `offset` into
/// `out` (at most one bulk buffer's worth); returns the block's whole length.
pub fn startup<P: Platform + 'static>(
    ch: &Channel,
    which: u64,
    offset: u64,
    out: &mut [u8],
) -> i64 {
    answer(client::<P, dyn Environment>(ch).startup(which, offset, room(out)))
}
