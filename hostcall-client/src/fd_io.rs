//! An fd's reads and writes from the GPU. std's declared `Fs.read` and `Fs.write`
//! (`hostcall_abi::std_services`) move one bulk buffer a call: [`read`] and
//! [`write`](fn@write) make as many calls as a buffer needs, and move a large buffer in
//! global memory by DMA instead (`Fs.read_to_device`, `Fs.write_from_device`).
//! stdout's and stderr's output goes by the transport's own services
//! (`hostcall_abi::service`), which a declared call cannot express: posted in ticket
//! order, nobody waiting ([`write_posted`]). Results
//! are `i64`: a value, or `-errno` on failure.

use core::sync::atomic::AtomicU64;

use hostcall_abi::errno::{EAGAIN, EINVAL, EIO, ENOSYS};
use hostcall_abi::std_services::Fs;
use hostcall_abi::typed::Errno;
use hostcall_abi::{
    BULK_PER_LANE, DEVICE_READ_MAX, DEVICE_WRITE_MAX, POSTED_WAITS, Service, Status,
};

use crate::typed::{Client, OnChannel};
use crate::{Channel, Numbering, Platform, Reply, Request};

/// The result of a transport call as a C return: the value, or `-errno`.
fn outcome(reply: Reply) -> i64 {
    match reply.status {
        Status::Ok => reply.result,
        Status::UnknownService => -(ENOSYS as i64),
        Status::Malformed => -(EINVAL as i64),
        // `exchange` traps on it; a posted reply never carries it.
        Status::Killed => -(EIO as i64),
    }
}

/// A byte count as a C return: the count, or `-errno`.
fn count(r: Result<usize, Errno>) -> i64 {
    match r {
        Ok(n) => n as i64,
        Err(e) => -(e.0 as i64),
    }
}

/// std's `Fs` over `ch`.
fn fs<P: Platform + 'static>(ch: &Channel) -> Client<P, dyn Fs> {
    Client::new(OnChannel::new(*ch))
}

/// The request of a posted write of `piece` to stdout or stderr (`fd` 1 or 2), which
/// takes `count` tickets of `tickets` when it is published (one per piece of the write it
/// begins) and carries the first. It comes back unsent while the host holds posted
/// output back ([`Request::unsent_if_held`]): [`post_or_wait`] then sends it so that it
/// waits.
pub fn posted_write_request<'a>(
    fd: i32,
    piece: &'a [u8],
    tickets: &'a AtomicU64,
    count: u64,
) -> Request<'a> {
    Request {
        send: piece,
        len_arg: Some(1),
        posted: true,
        unsent_if_held: true,
        numbering: Some(Numbering {
            counter: tickets,
            arg: 2,
            count,
        }),
        ..Request::bare(Service::WritePosted as u32, [fd as u64, 0, 0, 0, 0, 0])
    }
}

/// Writes of at least this many bytes from global memory go by DMA
/// (`Fs.write_from_device`): below it, copying through the bulk buffer costs less than
/// the host's copy set-up. A lane stores into the bulk buffer across PCIe about 90 ns a
/// word: a GPU echo server writing 64 KiB pieces that way moved 80 MB/s on an H200, the
/// host's DMA costs some 30 µs a call, and they cross near 3 KiB.
pub const DEVICE_WRITE_MIN: usize = 4 << 10;

/// Writes all of `data` to `fd`. Large buffers in global memory travel by DMA, the host
/// copying them out of GPU memory; others through the bulk buffer, one `Fs.write` per
/// bulk buffer. Returns the bytes written, or `-errno` if nothing was (a later failure
/// returns the count so far, as a short write).
pub fn write<P: Platform + 'static>(ch: &Channel, fd: i32, data: &[u8]) -> i64 {
    if data.len() >= DEVICE_WRITE_MIN && P::is_global(data.as_ptr()) {
        return write_from_device::<P>(ch, fd, data);
    }
    let fs = fs::<P>(ch);
    if data.is_empty() {
        return count(fs.write(fd, data));
    }
    let mut done = 0usize;
    while done < data.len() {
        let piece = &data[done..data.len().min(done + BULK_PER_LANE)];
        match fs.write(fd, piece) {
            Err(e) if done == 0 => return -(e.0 as i64),
            Err(_) | Ok(0) => break,
            Ok(n) => done += n,
        }
    }
    done as i64
}

/// `write` of a global-memory buffer: one `Fs.write_from_device` per
/// `DEVICE_WRITE_MAX` bytes. This thread's writes to `data` precede the request's
/// system-scope release, so the host's copy sees them.
fn write_from_device<P: Platform + 'static>(ch: &Channel, fd: i32, data: &[u8]) -> i64 {
    let fs = fs::<P>(ch);
    let mut done = 0usize;
    for chunk in data.chunks(DEVICE_WRITE_MAX as usize) {
        match fs.write_from_device(fd, chunk.as_ptr() as u64, chunk.len() as u64) {
            Err(e) if done == 0 => return -(e.0 as i64),
            Err(_) => break,
            Ok(n) => {
                done += n;
                if n < chunk.len() {
                    break;
                }
            }
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
    let reply = ch.exchange::<P>(posted_write_request(fd, data, tickets, 1));
    post_or_wait::<P>(ch, reply, fd, data, tickets);
    data.len() as i64
}

/// Finishes a posted write of one `piece` to stdout or stderr whose request
/// ([`posted_write_request`]) was answered `reply`: if it came back unsent, because the
/// host holds posted output back while its stdout is stalled, the piece goes as a
/// write that waits for room ([`write_ordered`]), as `write(2)` to a full pipe does.
pub fn post_or_wait<P: Platform>(
    ch: &Channel,
    reply: Reply,
    fd: i32,
    piece: &[u8],
    tickets: &AtomicU64,
) {
    if reply.result == -(EAGAIN as i64) {
        write_ordered::<P>(ch, fd, piece, tickets);
    }
}

/// A request of `service` carrying a ticket an earlier request took: it waits for its
/// answer, on a continuation port (`hostcall_abi::continuation_ports`).
fn continuing<P: Platform>(ch: &Channel, service: Service, args: [u64; 6], send: &[u8]) -> Reply {
    ch.exchange::<P>(Request {
        send,
        len_arg: (!send.is_empty()).then_some(1),
        continues: true,
        ..Request::bare(service as u32, args)
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
/// stdout or stderr (`OrderedFromDevice`): it takes one ticket when published, and the
/// host copies it out of GPU memory by DMA when that ticket's turn has come, answering
/// `EAGAIN` before; so it is never held on the host, and moves at DMA speed. Sent again,
/// it goes on a continuation port. This thread's writes to `part` precede the request's
/// system-scope release, so the host's copy sees them. Returns whether all of it was
/// written.
pub fn write_ordered_from_device<P: Platform>(
    ch: &Channel,
    fd: i32,
    part: &[u8],
    tickets: &AtomicU64,
) -> bool {
    let mut args = [fd as u64, part.as_ptr() as u64, part.len() as u64, 0, 0, 0];
    let reply = ch.exchange::<P>(Request {
        numbering: Some(Numbering {
            counter: tickets,
            arg: 3,
            count: 1,
        }),
        ..Request::bare(Service::OrderedFromDevice as u32, args)
    });
    args[3] = reply.number;
    let again = || continuing::<P>(ch, Service::OrderedFromDevice, args, &[]);
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

/// Reads into global memory of at least this many bytes go by DMA
/// (`Fs.read_to_device`): a lane copies out of the bulk buffer one 8-byte load across
/// PCIe at a time, about a microsecond each, so even a kilobyte costs more than the
/// host's copy.
pub const DEVICE_READ_MIN: usize = 1024;

/// Reads up to `buf.len()` bytes in one round trip (a short read, as POSIX allows, when
/// `buf` is larger than what one call brings). A large buffer in global memory is filled
/// by the host's DMA, up to `DEVICE_READ_MAX` bytes; others through the bulk buffer, up
/// to `BULK_PER_LANE` bytes.
pub fn read<P: Platform + 'static>(ch: &Channel, fd: i32, buf: &mut [u8]) -> i64 {
    let fs = fs::<P>(ch);
    if buf.len() >= DEVICE_READ_MIN && P::is_global(buf.as_ptr()) {
        let n = buf.len().min(DEVICE_READ_MAX as usize);
        let r = fs.read_to_device(fd, buf.as_mut_ptr() as u64, n as u64);
        // The host's copy precedes its answer's release; the answer (inline, polled
        // relaxed) then this system-scope fence order this lane's reads of `buf` after
        // the copy.
        P::fence_system();
        return count(r);
    }
    count(fs.read(fd, buf).map(|filled| filled.0))
}
