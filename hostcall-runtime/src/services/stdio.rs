//! The GPU's fds 0, 1 and 2: the host process's own stdio, optionally also captured
//! (the demo and tests inspect what the kernel printed).

use std::io::{Read, Write};
use std::sync::Mutex;

/// Host stdio as the GPU sees it.
pub(crate) struct Stdio {
    /// Pass writes through to the host's stdout/stderr.
    pub echo: bool,
    /// Let fd 0 read the host's stdin.
    pub stdin: bool,
    /// Copies of what fds 1 and 2 received, when capturing.
    pub captured: Option<[Mutex<Vec<u8>>; 2]>,
}

impl Stdio {
    /// Writes to fd 1 or 2.
    pub fn write(&self, fd: i32, data: &[u8]) -> std::io::Result<usize> {
        let i = (fd - 1) as usize;
        if let Some(cap) = &self.captured {
            cap[i]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(data);
        }
        if self.echo {
            if fd == 1 {
                std::io::stdout().lock().write_all(data)?;
            } else {
                std::io::stderr().lock().write_all(data)?;
            }
        }
        Ok(data.len())
    }

    /// Reads from fd 0, if granted.
    pub fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.stdin {
            return Err(std::io::Error::from_raw_os_error(
                hostcall_abi::errno::EBADF,
            ));
        }
        std::io::stdin().lock().read(buf)
    }

    /// Takes what was captured on fd 1 and fd 2 so far.
    pub fn take_captured(&self) -> (Vec<u8>, Vec<u8>) {
        match &self.captured {
            Some([out, err]) => (
                std::mem::take(&mut *out.lock().unwrap_or_else(|p| p.into_inner())),
                std::mem::take(&mut *err.lock().unwrap_or_else(|p| p.into_inner())),
            ),
            None => Default::default(),
        }
    }
}
