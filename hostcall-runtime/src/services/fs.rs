//! The GPU's files ([`Files`]: its fd table, its mounts, its stdio) and the stream
//! services that read and write them: through the bulk buffer, by DMA, or posted to
//! stdout and stderr in ticket order. The GPU holds descriptors of the runtime's own
//! table: it can never reach a host descriptor other than stdio (0/1/2). std's declared
//! `Fs` services (opening, stating, the directory tree) are `std_fs`'s.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use hostcall_abi::errno::{EAGAIN, EBADF, EFAULT};
use hostcall_abi::{DEVICE_READ_MAX, DEVICE_WRITE_MAX, POSTED_WAITS, Service};

use super::fd_table::{Direction, FdTable, Handle, Waitable};
use super::sandbox::Sandbox;
use super::stdin::Stdin;

use super::stdio::PostedError;
use super::wait::{self, Interest, Watch};
use super::{Call, Handler, Malformed, Reply, Stdio, errno_of};
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

/// Whether an error says the fd is not ready (it is non-blocking on the host).
pub(crate) fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}

/// What waiting for `h` to be ready for `interest` watches.
pub(crate) fn watch(h: &Handle, w: &Waitable, interest: Interest) -> Vec<Watch> {
    vec![Watch {
        file: h.file.clone(),
        token: w.token,
        interest,
    }]
}

/// A DMA service's device address and length (`args[1]`, `args[2]`): at most `max`
/// bytes, not running past the end of the address space.
fn device_range(call: &Call<'_>, max: u64) -> Result<(u64, u64), Malformed> {
    let (addr, len) = (call.args[1], call.args[2]);
    if len > max {
        return Err(Malformed(format!("{len} bytes, over the {max}-byte limit")));
    }
    if addr.checked_add(len).is_none() {
        return Err(Malformed(format!(
            "{len} bytes at {addr:#x} run past the end of the address space"
        )));
    }
    Ok((addr, len))
}

pub(crate) use super::fd_table::Listing;

/// The file services and the capabilities they check.
pub(crate) struct Files {
    /// Shared by the launches of a run over several GPUs.
    pub table: Arc<Mutex<FdTable>>,
    /// Where `WriteFromDevice` reads the GPU's buffers.
    pub device: Arc<dyn DeviceMemory>,
    /// The mounts and the virtual cwd: the only places paths resolve to.
    pub sandbox: Arc<Sandbox>,
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

pub(crate) fn to_reply(r: Result<Reply, i32>) -> Reply {
    r.unwrap_or_else(Reply::errno)
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

    fn write(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let data = call.input;
        let w = match call.fd_arg(0)? {
            fd @ (1 | 2) => self.stdio.write(fd, data),
            0 => return Err(EBADF),
            fd => {
                let h = self.handle(fd)?;
                match &h.wait {
                    Some(w) => write_ready(&h, w, data)?,
                    None => write_some(&h, data).map_err(|e| errno_of(&e))?,
                }
            }
        };
        Ok(Reply::value(w as i64))
    }

    /// `WriteFromDevice`: the bytes are in GPU global memory; the device copies them out
    /// by DMA, piece by piece, and each piece is written as it arrives.
    fn write_from_device(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (addr, len) = device_range(call, DEVICE_WRITE_MAX)?;
        let fd = match call.fd_arg(0) {
            Ok(0) | Err(_) => return Ok(Reply::errno(EBADF)),
            Ok(fd) => fd,
        };
        let file = if is_stdio(fd) {
            None
        } else {
            match self.handle(fd) {
                Ok(h) => Some(h),
                Err(e) => return Ok(Reply::errno(e)),
            }
        };
        if let Some(h) = &file
            && let Some(w) = &h.wait
        {
            return Ok(self.write_from_device_ready(h, w, addr, len));
        }
        let (done, stop) = if file.is_none() && call.args[4] == POSTED_WAITS {
            // Output in ticket order, streamed in its turn and never held.
            let ticket = call.args[3];
            match self
                .stdio
                .at_turn(fd, (call.block, call.thread), ticket, |sink| {
                    self.device.stream(addr, len, sink)
                }) {
                Ok(streamed) => streamed,
                Err(PostedError::NotYet { .. }) => return Ok(Reply::errno(EAGAIN)),
                Err(e) => return Err(Malformed(format!("ordered write to fd {fd}: {e}"))),
            }
        } else {
            self.device.stream(addr, len, &mut |piece| match &file {
                None => {
                    self.stdio.write(fd, piece);
                    Ok(())
                }
                Some(h) => write_all(h, piece),
            })
        };
        Ok(self.streamed(addr, len, done, stop))
    }

    /// The answer to a `WriteFromDevice` that wrote `done` of `len` bytes from `addr` and
    /// stopped for `stop`, if it did.
    fn streamed(&self, addr: u64, len: u64, done: u64, stop: Option<StreamStop>) -> Reply {
        match stop {
            Some(StreamStop::Copy(e)) => {
                self.log.warn(
                    Kind::Io,
                    format_args!("WriteFromDevice: copying {len} bytes at {addr:#x}: {e}"),
                );
                if done == 0 {
                    Reply::errno(EFAULT)
                } else {
                    Reply::value(done as i64)
                }
            }
            Some(StreamStop::Sink(e)) if done == 0 => Reply::errno(errno_of(&e)),
            _ => Reply::value(done as i64),
        }
    }

    /// `WriteFromDevice` to a socket or pipe: as much as it takes now, from where the
    /// call's last attempt stopped; the call waits for room (unless the GPU made the
    /// fd non-blocking, or its send timeout passes) until all of it went.
    fn write_from_device_ready(&self, h: &Handle, w: &Waitable, addr: u64, len: u64) -> Reply {
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
                        Reply::value(sent as i64)
                    } else {
                        Reply::errno(EAGAIN)
                    };
                }
                let timeout = w.timeout(Direction::Send);
                Reply::errno(wait::until_ready(watch(h, w, Interest::WRITE), timeout, sent).0)
            }
            stop => self.streamed(addr, len, sent, stop),
        }
    }

    /// `ReadToDevice`: one read from the fd into host memory, then a DMA copy of what it
    /// read into the lane's buffer in GPU memory.
    fn read_to_device(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (addr, len) = device_range(call, DEVICE_READ_MAX)?;
        let mut buf = vec![0u8; len as usize];
        let read = match call.fd_arg(0) {
            Ok(0) => self.stdin.read(&mut buf),
            Ok(1 | 2) | Err(_) => Err(EBADF),
            Ok(fd) => self.handle(fd).and_then(|h| read_from(&h, &mut buf)),
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => return Ok(Reply::errno(e)),
        };
        if let Err(e) = self.device.fill(addr, &buf[..n]) {
            self.log.warn(
                Kind::Io,
                format_args!("ReadToDevice: copying {n} bytes to {addr:#x}: {e}"),
            );
            return Ok(Reply::errno(EFAULT));
        }
        Ok(Reply::value(n as i64))
    }

    fn read(&self, call: &mut Call<'_>) -> Result<Result<Reply, i32>, Malformed> {
        let n = call.len_arg(1)?;
        let fd = call.fd_arg(0);
        let buf = &mut call.out[..n];
        Ok((|| {
            let n = match fd? {
                0 => self.stdin.read(buf)?,
                1 | 2 => return Err(EBADF),
                fd => read_from(&self.handle(fd)?, buf)?,
            };
            Ok(Reply::bytes(n))
        })())
    }

    /// Closes every file the GPU holds (its run ended), outside the table's lock.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn close_all(&self) {
        let all = self.table().take_all();
        drop(all);
    }
}

impl Handler for Files {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let Some(service) = Service::from_id(call.service) else {
            return Err(Malformed(format!(
                "service {} is not a file service",
                call.service
            )));
        };
        Ok(match service {
            Service::Write => to_reply(self.write(call)),
            Service::WriteFromDevice => self.write_from_device(call)?,
            Service::WritePosted => {
                let fd = call.fd_arg(0).unwrap_or(-1);
                if fd != 1 && fd != 2 {
                    return Err(Malformed(format!(
                        "posted write to fd {}: only 1 and 2 take them",
                        call.args[0]
                    )));
                }
                let waits = call.args[3] == POSTED_WAITS;
                let writer = (call.block, call.thread);
                match self
                    .stdio
                    .write_posted(fd, writer, call.args[2], call.input, waits)
                {
                    Ok(()) => Reply::value(call.input.len() as i64),
                    Err(PostedError::Full { .. }) if waits => Reply::errno(EAGAIN),
                    Err(e) => return Err(Malformed(format!("posted write to fd {fd}: {e}"))),
                }
            }
            Service::Read => to_reply(self.read(call)?),
            Service::ReadToDevice => self.read_to_device(call)?,
            Service::Ping | Service::Collect => {
                return Err(Malformed(format!(
                    "{} is not a file service",
                    service.name()
                )));
            }
        })
    }

    fn can_block(&self, service: u32) -> bool {
        // Reading and writing files: 64 MiB into a file on a slow file system holds up
        // every other port. (std's declared file services block as their declarations
        // say: `, blocks` in `hostcall_abi::std_services`.)
        matches!(
            Service::from_id(service),
            Some(Service::Read | Service::ReadToDevice | Service::Write | Service::WriteFromDevice)
        )
    }

    fn may_block(&self, service: u32, args: &[u64; 6]) -> bool {
        // Of those, stdin and the fds waited for by readiness (sockets, pipes) are served
        // on the polling threads: their host fds never block. So is a write to stdout or
        // stderr while its writer has room; one that must wait for room, and a copy from
        // GPU memory into them (up to 64 MiB, as the writer takes it), go to the pool.
        let fd = i32::try_from(args[0] as i64).unwrap_or(-1);
        let waitable = || self.table().is_waitable(fd);
        match Service::from_id(service) {
            Some(Service::Read | Service::ReadToDevice) => !is_stdio(fd) && !waitable(),
            Some(Service::Write) if fd == 1 || fd == 2 => !self.stdio.has_room(fd),
            Some(Service::WriteFromDevice) if fd == 1 || fd == 2 => true,
            Some(Service::Write | Service::WriteFromDevice) => fd != 0 && !waitable(),
            _ => true,
        }
    }

    fn only_takes_time(&self, service: u32, args: &[u64; 6]) -> bool {
        // A read or write of a regular file or a directory: neither stdio (whose output
        // waits for other GPU threads' turns, or for its reader) nor an fd waited for by
        // readiness.
        let fd = i32::try_from(args[0] as i64).unwrap_or(-1);
        self.can_block(service) && !is_stdio(fd) && !self.table().is_waitable(fd)
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
