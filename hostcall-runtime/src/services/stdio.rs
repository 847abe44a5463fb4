//! The GPU's fds 0, 1 and 2: the host process's own stdio, optionally also captured
//! (the demo and tests inspect what the kernel printed).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Mutex;

/// Posted writes of one fd waiting for the tickets before theirs.
#[derive(Default)]
pub(crate) struct Reorder {
    next: u64,
    waiting: BTreeMap<u64, Vec<u8>>,
}

/// Host stdio as the GPU sees it.
pub(crate) struct Stdio {
    /// Pass writes through to the host's stdout/stderr.
    pub echo: bool,
    /// Let fd 0 read the host's stdin.
    pub stdin: bool,
    /// Copies of what fds 1 and 2 received, when capturing.
    pub captured: Option<[Mutex<Vec<u8>>; 2]>,
    /// Posted writes to fds 1 and 2, put back in ticket order.
    pub posted: [Mutex<Reorder>; 2],
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

    /// A posted write to fd 1 or 2: written now if it is the next ticket (with any that
    /// were waiting for it), else kept until its turn.
    pub fn write_posted(&self, fd: i32, ticket: u64, data: &[u8]) -> std::io::Result<()> {
        let mut r = self.posted[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if ticket != r.next {
            r.waiting.insert(ticket, data.to_vec());
            return Ok(());
        }
        self.write(fd, data)?;
        r.next += 1;
        while let Some(d) = {
            let next = r.next;
            r.waiting.remove(&next)
        } {
            self.write(fd, &d)?;
            r.next += 1;
        }
        Ok(())
    }

    /// Writes whatever posted data still waits (after a launch ended), in ticket order;
    /// returns how many tickets never arrived (writes cut short by a trap).
    pub fn flush_posted(&self) -> std::io::Result<u64> {
        let mut missing = 0;
        for (i, m) in self.posted.iter().enumerate() {
            let mut r = m.lock().unwrap_or_else(|p| p.into_inner());
            for (ticket, d) in std::mem::take(&mut r.waiting) {
                missing += ticket - r.next;
                r.next = ticket + 1;
                self.write(i as i32 + 1, &d)?;
            }
        }
        Ok(missing)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posted_writes_come_out_in_ticket_order_and_gaps_are_counted() {
        let s = Stdio {
            echo: false,
            stdin: false,
            captured: Some(Default::default()),
            posted: Default::default(),
        };
        for (ticket, text) in [(2, "c"), (0, "a"), (4, "e"), (1, "b")] {
            s.write_posted(1, ticket, text.as_bytes()).unwrap();
        }
        assert_eq!(
            s.take_captured().0,
            b"abc",
            "0, 1, 2 as soon as each gap closes"
        );
        assert_eq!(s.flush_posted().unwrap(), 1, "ticket 3 never came");
        assert_eq!(s.take_captured().0, b"e");
        s.write_posted(2, 0, b"err").unwrap();
        assert_eq!(s.take_captured().1, b"err", "each fd has its own tickets");
    }
}
