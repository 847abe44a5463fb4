//! The GPU's files ([`Files`]: its fd table, its mounts, its stdio) and reading and
//! writing them: std's `Fs.read` and `Fs.write` (through the bulk buffer) and their
//! copies by DMA, with the waits of sockets, pipes and stdio; where each such call is
//! served ([`FdKinds`]); and stdout's and stderr's output in ticket order (the
//! transport's `WritePosted` and `OrderedFromDevice`). The GPU holds descriptors of the
//! runtime's own table: it can never reach a host descriptor other than stdio (0/1/2).
//! std's other `Fs` services (opening, stating, the directory tree) are `std_fs`'s, in
//! whose `impl Fs` the four calls here are named.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use hostcall_abi::errno::{EAGAIN, EBADF, EFAULT, EINVAL};
use hostcall_abi::typed::{Errno, FdUse};
use hostcall_abi::{DEVICE_READ_MAX, DEVICE_WRITE_MAX, POSTED_WAITS, Service};

use super::fd_table::{Direction, FdTable, Handle, Waitable};
use super::sandbox::{Sandbox, WorkingDir};
use super::stdin::Stdin;

use super::stdio::PostedError;
use super::typed::FdKinds;
use super::wait::{self, Interest, Watch};
use super::{Call, Handler, Malformed, Reply, Stdio, errno_of, would_block};
use crate::guest_log::{GuestLog, Kind};
use crate::module::{DeviceMemory, StreamStop};

/// Writes what it takes of `data` to the file `h`: a socket with `MSG_NOSIGNAL`, so a
/// peer that has gone answers `EPIPE` rather than ending the host process with
/// `SIGPIPE`.
fn write_some(h: &Handle, data: &[u8]) -> std::io::Result<usize> {
    if h.socket {
        let flags = rustix::net::SendFlags::NOSIGNAL;
        return Ok(rustix::net::send(&*h.file, data, flags)?);
    }
    (&*h.file).write(data)
}

/// What waiting for `h` to be ready for `interest` watches.
pub(crate) fn watch(h: &Handle, w: &Waitable, interest: Interest) -> Vec<Watch> {
    vec![Watch {
        file: h.file.clone(),
        token: w.token,
        interest,
    }]
}

/// A copy's device address and length: at most `max` bytes (`EINVAL` over it), not
/// running past the end of the address space (`EFAULT`).
fn device_range(addr: u64, len: u64, max: u64) -> Result<(u64, u64), Errno> {
    if len > max {
        return Err(Errno(EINVAL));
    }
    if addr.checked_add(len).is_none() {
        return Err(Errno(EFAULT));
    }
    Ok((addr, len))
}

pub(crate) use super::fd_table::Listing;

/// The file services and the capabilities they check.
pub(crate) struct Files {
    /// Shared by the launches of a run over several GPUs.
    pub table: Arc<Mutex<FdTable>>,
    /// Where copies out of (and into) GPU memory go.
    pub device: Arc<dyn DeviceMemory>,
    /// The mounts: the only places paths resolve to.
    pub sandbox: Arc<Sandbox>,
    /// The run's working directory, where relative paths start.
    pub cwd: Arc<WorkingDir>,
    pub stdio: Stdio,
    /// The GPU's fd 0.
    pub stdin: Arc<Stdin>,
    /// Where calls wait for the GPU's sockets, pipes and stdin to be ready.
    pub reactor: Arc<dyn wait::Waiters>,
    /// The launch's GPU-caused log lines.
    pub log: Arc<GuestLog>,
    /// The permission bits the GPU may give a file or directory: [`MODES_DEFAULT`]
    /// unless the embedder allows group and other write.
    pub modes: u32,
}

/// Permission bits the GPU may set by default: no group or other write, so nothing it
/// creates or changes is writable by other users of the host (the process's umask is
/// not relied on: `chmod` ignores it, and it may be 0).
pub(crate) const MODES_DEFAULT: u32 = 0o755;

pub(crate) fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

impl Files {
    /// The fd table, locked (a panic elsewhere cannot poison it for good).
    pub(crate) fn table(&self) -> std::sync::MutexGuard<'_, FdTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The permission bits the GPU may set of those it asked for (`modes`).
    pub(crate) fn mode_of(&self, asked: u32) -> u32 {
        asked & self.modes
    }

    pub(crate) fn file(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.table().get(fd)
    }

    /// What a call on `fd` needs, out of the table.
    pub(crate) fn handle(&self, fd: i32) -> Result<Handle, i32> {
        self.table().handle(fd)
    }

    /// `Fs.write`: stdout and stderr after the output already in ticket order; a socket
    /// or pipe as a blocking fd ([`write_ready`]); a file what it takes.
    pub(crate) fn write_fd(&self, fd: i32, data: &[u8]) -> Result<usize, Errno> {
        let h = match fd {
            1 | 2 => return Ok(self.stdio.write(fd, data)),
            0 => return Err(Errno(EBADF)),
            fd => self.handle(fd).map_err(Errno)?,
        };
        match &h.wait {
            Some(w) => write_ready(&h, w, data).map_err(Errno),
            None => write_some(&h, data).map_err(|e| Errno(errno_of(&e))),
        }
    }

    /// `Fs.read`: stdin, a socket or pipe as a blocking fd ([`read_from`]), or a file.
    pub(crate) fn read_fd(&self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        match fd {
            0 => self.stdin.read(buf),
            1 | 2 => Err(EBADF),
            fd => read_from(&self.handle(fd)?, buf),
        }
        .map_err(Errno)
    }

    /// `Fs.write_from_device`: the bytes are in GPU global memory; the device copies them
    /// out by DMA, piece by piece, and each piece is written as it arrives.
    pub(crate) fn write_fd_from_device(
        &self,
        fd: i32,
        addr: u64,
        len: u64,
    ) -> Result<usize, Errno> {
        let (addr, len) = device_range(addr, len, DEVICE_WRITE_MAX)?;
        let file = match fd {
            0 => return Err(Errno(EBADF)),
            1 | 2 => None,
            fd => Some(self.handle(fd).map_err(Errno)?),
        };
        if let Some(h) = &file
            && let Some(w) = &h.wait
        {
            return self.write_from_device_ready(h, w, addr, len);
        }
        let (done, stop) = self.device.stream(addr, len, &mut |piece| match &file {
            None => {
                self.stdio.write(fd, piece);
                Ok(())
            }
            Some(h) => write_all(h, piece),
        });
        self.streamed(addr, len, done, stop)
    }

    /// The answer to a copy from GPU memory that wrote `done` of `len` bytes from `addr`
    /// and stopped for `stop`, if it did.
    fn streamed(
        &self,
        addr: u64,
        len: u64,
        done: u64,
        stop: Option<StreamStop>,
    ) -> Result<usize, Errno> {
        match stop {
            Some(StreamStop::Copy(e)) => {
                self.log.warn(
                    Kind::Io,
                    format_args!("write_from_device: copying {len} bytes at {addr:#x}: {e}"),
                );
                if done == 0 {
                    Err(Errno(EFAULT))
                } else {
                    Ok(done as usize)
                }
            }
            Some(StreamStop::Sink(e)) if done == 0 => Err(Errno(errno_of(&e))),
            _ => Ok(done as usize),
        }
    }

    /// `Fs.write_from_device` to a socket or pipe: as much as it takes now, from where
    /// the call's last attempt stopped; the call waits for room (unless the GPU made the
    /// fd non-blocking, or its send timeout passes) until all of it went.
    fn write_from_device_ready(
        &self,
        h: &Handle,
        w: &Waitable,
        addr: u64,
        len: u64,
    ) -> Result<usize, Errno> {
        let attempt = wait::current();
        let start = attempt.progress.min(len);
        let mut sent = start;
        let (_, stop) = self.device.stream(addr + start, len - start, &mut |piece| {
            let mut at = 0;
            while at < piece.len() {
                match write_some(h, &piece[at..]) {
                    Ok(n) => {
                        at += n;
                        sent += n as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        });
        match stop {
            Some(StreamStop::Sink(e)) if would_block(&e) => {
                if w.nonblocking() || attempt.expired {
                    return if sent > 0 {
                        Ok(sent as usize)
                    } else {
                        Err(Errno(EAGAIN))
                    };
                }
                let timeout = w.timeout(Direction::Send);
                Err(wait::until_ready(
                    watch(h, w, Interest::WRITE),
                    timeout,
                    sent,
                ))
            }
            stop => self.streamed(addr, len, sent, stop),
        }
    }

    /// `Fs.read_to_device`: one read from the fd into host memory, then a DMA copy of
    /// what it read into the caller's buffer in GPU memory.
    pub(crate) fn read_fd_to_device(&self, fd: i32, addr: u64, len: u64) -> Result<usize, Errno> {
        let (addr, len) = device_range(addr, len, DEVICE_READ_MAX)?;
        let mut buf = vec![0u8; len as usize];
        let n = self.read_fd(fd, &mut buf)?;
        if let Err(e) = self.device.fill(addr, &buf[..n]) {
            self.log.warn(
                Kind::Io,
                format_args!("read_to_device: copying {n} bytes to {addr:#x}: {e}"),
            );
            return Err(Errno(EFAULT));
        }
        Ok(n)
    }

    /// `OrderedFromDevice`: a part of a large write to stdout or stderr, in GPU memory,
    /// copied out by DMA and written when its ticket's turn has come (`EAGAIN` before),
    /// so that it is never held on the host.
    fn ordered_from_device(&self, call: &Call<'_>) -> Result<Reply, Malformed> {
        let [fd, addr, len, ticket, ..] = call.args;
        let fd = stdio_fd(fd, "ordered write")?;
        let (addr, len) = match device_range(addr, len, DEVICE_WRITE_MAX) {
            Ok(range) => range,
            Err(e) => return Ok(Reply::errno(e.0)),
        };
        let writer = (call.block, call.thread);
        let streamed = self.stdio.at_turn(fd, writer, ticket, |sink| {
            self.device.stream(addr, len, sink)
        });
        match streamed {
            Ok((done, stop)) => Ok(answer(self.streamed(addr, len, done, stop))),
            Err(PostedError::NotYet { .. }) => Ok(Reply::errno(EAGAIN)),
            Err(e) => Err(Malformed(format!("ordered write to fd {fd}: {e}"))),
        }
    }

    /// `WritePosted`: a piece of a write to stdout or stderr, written in its ticket's
    /// turn; nobody waits for it, unless the writer asked to ([`POSTED_WAITS`]: then a
    /// piece the host has no room to hold yet waits for room on a thread of its own, as
    /// `write(2)` to a full pipe does, where it may, else is answered `EAGAIN`).
    fn write_posted(&self, call: &Call<'_>) -> Result<Reply, Malformed> {
        let [fd, _, ticket, waits, ..] = call.args;
        let fd = stdio_fd(fd, "posted write")?;
        let waits = waits == POSTED_WAITS;
        let writer = (call.block, call.thread);
        let written = if waits {
            self.stdio.write_waiting(fd, writer, ticket, call.input)
        } else {
            self.stdio
                .write_posted(fd, writer, ticket, call.input, false)
        };
        match written {
            Ok(()) => Ok(Reply::value(call.input.len() as i64)),
            Err(PostedError::Full { .. }) if waits => Ok(Reply::errno(EAGAIN)),
            Err(e) => Err(Malformed(format!("posted write to fd {fd}: {e}"))),
        }
    }

    /// Closes every file the GPU holds (its run ended), outside the table's lock.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn close_all(&self) {
        let all = self.table().take_all();
        drop(all);
    }
}

/// stdout's and stderr's output in ticket order: the transport's own services of
/// `hostcall_abi::service`, which std's `write` of fd 1 or 2 sends.
impl Handler for Files {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        match Service::from_id(call.service) {
            Some(Service::WritePosted) => self.write_posted(call),
            Some(Service::OrderedFromDevice) => self.ordered_from_device(call),
            _ => Err(Malformed(format!(
                "service {} is not stdio's ordered output",
                call.service
            ))),
        }
    }

    /// Ordered output answers a count or an errno, never bytes.
    fn answer_len(&self, _: u32, _: &[u64; 6], _: &[u8], _: usize) -> usize {
        0
    }

    fn can_block(&self, service: u32) -> bool {
        // A copy from GPU memory into stdout or stderr: up to 64 MiB, as the writer takes
        // it; and a piece whose writer waits, while the host has no room for it.
        matches!(
            Service::from_id(service),
            Some(Service::OrderedFromDevice | Service::WritePosted)
        )
    }

    fn may_block(&self, service: u32, args: &[u64; 6]) -> bool {
        // A posted piece never blocks: one the host has no room for waits on its port
        // (`super::Admission`). One whose writer waits, and finds no room, waits for it
        // parked, rather than have its writer send it again and again: thousands of
        // writers retrying would take the ports from every other call.
        let [fd, len, ticket, waits, ..] = *args;
        service == Service::OrderedFromDevice as u32
            || (waits == POSTED_WAITS
                && matches!(fd, 1 | 2)
                && !self.stdio.takes_waiting(fd as i32, ticket, len as usize))
    }

    fn waits_on_peer(&self, _: u32, _: &[u64; 6]) -> bool {
        // The writer makes room as the host's stdout takes its bytes: a reader there may
        // take them as late as it likes.
        true
    }

    fn parks_at_once(&self, service: u32, _: &[u64; 6]) -> bool {
        // A piece handed over for want of room (`may_block`): its writer is told to wait
        // parked at once, so that thousands of writers waiting on a stalled stdout hold
        // no port, not even for the first 100 µs each.
        service == Service::WritePosted as u32
    }
}

impl FdKinds for Files {
    fn may_block(&self, fd: i32, what: FdUse) -> bool {
        // stdin and the fds waited for by readiness (sockets, pipes) are served where
        // they are polled: their host fds never block. So is a write to stdout or stderr
        // while its writer has room; one that must wait for room, and a copy from GPU
        // memory into them (up to 64 MiB, as the writer takes it), go to the pool, as
        // does every call on a regular file (64 MiB into a file on a slow file system
        // would hold up every other port).
        match (fd, what) {
            (0..=2, FdUse::Read) | (0, _) => false,
            (1 | 2, FdUse::Write) => !self.stdio.has_room(fd),
            (1 | 2, FdUse::CopyOut) => true,
            (fd, _) => !self.table().is_waitable(fd),
        }
    }

    fn only_takes_time(&self, fd: i32) -> bool {
        // A regular file or a directory: neither stdio (whose output waits for other GPU
        // threads' turns, or for its reader) nor an fd waited for by readiness.
        !is_stdio(fd) && !self.table().is_waitable(fd)
    }

    fn waits_on_peer(&self, fd: i32) -> bool {
        // A write to stdout or stderr waits for room, which the host's stdout makes as
        // its reader takes the bytes, as late as it likes. (Every other call that may
        // block is on a file, which only takes time.)
        is_stdio(fd)
    }
}

/// The answer to a call whose value is a byte count.
fn answer(r: Result<usize, Errno>) -> Reply {
    match r {
        Ok(n) => Reply::value(n as i64),
        Err(e) => Reply::errno(e.0),
    }
}

/// The fd of a request for stdio's ordered output: 1 or 2 only.
fn stdio_fd(arg: u64, what: &str) -> Result<i32, Malformed> {
    match arg {
        1 | 2 => Ok(arg as i32),
        _ => Err(Malformed(format!(
            "{what} to fd {arg}: only 1 and 2 take them"
        ))),
    }
}

impl super::Admission for Files {
    /// A packet with posted pieces for stdout or stderr is taken once their fds have
    /// room for each; at once, without reading its lanes, while they have room for any.
    fn admits(&self, lanes: &mut dyn Iterator<Item = hostcall_abi::LaneSlot>) -> bool {
        if self.stdio.has_room_for_any_piece() {
            return true;
        }
        let mut pieces = lanes.filter_map(|slot| {
            let [fd, len, ticket, waits, ..] = slot.args;
            (slot.service == Service::WritePosted as u32
                && waits != POSTED_WAITS
                && matches!(fd, 1 | 2))
            .then_some((fd as i32, ticket, len as usize))
        });
        self.stdio.admits(&mut pieces)
    }
}

/// Reads what `h` has, up to `buf`'s length: a file at once; a socket or pipe as a
/// blocking fd would, waiting until it has something (unless the GPU made it
/// non-blocking, or its receive timeout passes: `EAGAIN`).
pub(crate) fn read_from(h: &Handle, buf: &mut [u8]) -> Result<usize, i32> {
    match (&*h.file).read(buf) {
        Ok(n) => Ok(n),
        Err(e) if would_block(&e) => match &h.wait {
            Some(w) if !w.nonblocking() => {
                let timeout = w.timeout(Direction::Receive);
                Err(wait::until_ready(watch(h, w, Interest::READ), timeout, 0).0)
            }
            _ => Err(EAGAIN),
        },
        Err(e) => Err(errno_of(&e)),
    }
}

/// Writes `data` to a socket or pipe as a blocking fd does, all of it, waiting for room
/// as it needs, from where the call's last attempt stopped; unless the GPU made it
/// non-blocking or its send timeout passes: then what went (`EAGAIN` if nothing).
pub(crate) fn write_ready(h: &Handle, w: &Waitable, data: &[u8]) -> Result<usize, i32> {
    let attempt = wait::current();
    let mut done = (attempt.progress as usize).min(data.len());
    while done < data.len() {
        match write_some(h, &data[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if would_block(&e) => {
                if w.nonblocking() || attempt.expired {
                    break;
                }
                let timeout = w.timeout(Direction::Send);
                return Err(
                    wait::until_ready(watch(h, w, Interest::WRITE), timeout, done as u64).0,
                );
            }
            Err(e) if done == 0 => return Err(errno_of(&e)),
            Err(_) => break,
        }
    }
    match done {
        0 if !data.is_empty() => Err(EAGAIN),
        n => Ok(n),
    }
}

/// Writes all of `data` to a file (a regular one: it takes what it is given).
fn write_all(h: &Handle, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        match write_some(h, data) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
