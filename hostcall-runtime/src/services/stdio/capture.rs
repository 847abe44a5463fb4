//! Copies of what the GPU wrote to fds 1 and 2, for an embedder that inspects them (the
//! demo, tests): bounded, with a note saying how much was left out.

use std::sync::Mutex;

/// Copies of what fds 1 and 2 received, up to a limit; past it the bytes are counted and
/// a note saying how many were left out ends the copy.
pub(crate) struct Capture {
    limit: usize,
    fds: [Mutex<(Vec<u8>, u64)>; 2],
}

impl Capture {
    /// A capture keeping at most `limit` bytes of each fd.
    pub fn new(limit: usize) -> Capture {
        Capture {
            limit,
            fds: Default::default(),
        }
    }

    pub(super) fn add(&self, fd: i32, data: &[u8]) {
        let mut c = self.fds[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let room = self.limit.saturating_sub(c.0.len()).min(data.len());
        c.0.extend_from_slice(&data[..room]);
        c.1 += (data.len() - room) as u64;
    }

    pub(super) fn take(&self, fd: i32) -> Vec<u8> {
        let mut c = self.fds[(fd - 1) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (mut bytes, dropped) = std::mem::take(&mut *c);
        if dropped > 0 {
            bytes.extend_from_slice(
                format!(
                    "\n[hostcall: {dropped} more bytes were not captured: the capture keeps {} bytes]\n",
                    self.limit
                )
                .as_bytes(),
            );
        }
        bytes
    }

    /// Bytes kept so far on each fd.
    #[cfg(feature = "fuzzing")]
    pub fn held(&self) -> usize {
        self.fds
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).0.len())
            .sum()
    }
}
