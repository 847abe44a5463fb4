//! The GPU's fd 0: the host process's stdin, when granted, read without ever blocking a
//! host thread. A read that finds nothing waits in the reactor for stdin to have
//! something, like a read of any pipe the GPU holds, so a stop reaches it.
//!
//! The host's fd 0 is never made non-blocking itself: its open file description is
//! shared with the parent (a shell's terminal), which would then see `EAGAIN`. A pipe,
//! a FIFO or a terminal is opened anew through `/proc/self/fd/0`, non-blocking, as a
//! description of the runtime's own; a socket is read with `MSG_DONTWAIT`; a regular
//! file never waits.

use std::fs::File;
use std::io::Read;
use std::sync::{Arc, OnceLock};

use hostcall_abi::errno::{EAGAIN, EBADF};

use super::wait::{self, Interest, Watch};
use super::{errno_of, would_block};

/// How the runtime reads the host's stdin.
struct Source {
    file: Arc<File>,
    /// The reactor's key for it.
    token: u64,
    /// A socket: read with `MSG_DONTWAIT`.
    socket: bool,
}

/// The GPU's fd 0.
pub(crate) struct Stdin {
    granted: bool,
    source: OnceLock<Result<Source, i32>>,
}

impl Stdin {
    /// fd 0 as the embedder granted it (`HostBuilder::stdin`): the host's stdin, or
    /// nothing (`EBADF`).
    pub fn new(granted: bool) -> Stdin {
        Stdin {
            granted,
            source: OnceLock::new(),
        }
    }

    /// Reads what stdin has, up to `buf`'s length, as a blocking read of fd 0 would:
    /// waiting (in the reactor) until it has something or ends.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, i32> {
        if !self.granted {
            return Err(EBADF);
        }
        let s = self.source.get_or_init(open).as_ref().map_err(|e| *e)?;
        let read = if s.socket {
            let flags = rustix::net::RecvFlags::DONTWAIT;
            rustix::net::recv(&*s.file, buf, flags)
                .map(|(n, _)| n)
                .map_err(std::io::Error::from)
        } else {
            (&*s.file).read(buf)
        };
        match read {
            Ok(n) => Ok(n),
            Err(e) if would_block(&e) => {
                let watch = Watch {
                    file: s.file.clone(),
                    token: s.token,
                    interest: Interest::READ,
                };
                Err(wait::until_ready(vec![watch], None, 0).0)
            }
            Err(e) => Err(errno_of(&e)),
        }
    }
}

/// The runtime's own way into the host's stdin (see the module's docs).
fn open() -> Result<Source, i32> {
    use rustix::fs::FileType;
    let stdin = rustix::stdio::stdin();
    let kind = rustix::fs::fstat(stdin)
        .map(|st| FileType::from_raw_mode(st.st_mode))
        .map_err(|e| e.raw_os_error())?;
    let token = super::fd_table::new_token();
    let dup = || -> Result<File, i32> {
        let fd = rustix::io::fcntl_dupfd_cloexec(stdin, 3).map_err(|e| e.raw_os_error())?;
        Ok(File::from(fd))
    };
    let (file, socket) = match kind {
        FileType::Socket => (dup()?, true),
        FileType::Fifo | FileType::CharacterDevice => {
            let flags = rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::NONBLOCK
                | rustix::fs::OFlags::CLOEXEC;
            let fd = rustix::fs::open("/proc/self/fd/0", flags, rustix::fs::Mode::empty())
                .map_err(|e| {
                    log::warn!("opening stdin anew to read it without blocking: {e}");
                    EAGAIN
                })?;
            (File::from(fd), false)
        }
        _ => (dup()?, false),
    };
    Ok(Source {
        file: Arc::new(file),
        token,
        socket,
    })
}
