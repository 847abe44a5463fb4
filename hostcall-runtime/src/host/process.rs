//! [`ProcessState`]: what the launches of one run share, as one process's threads do.

use std::sync::{Arc, Mutex};

use crate::guest_log::GuestLog;
use crate::server::Reactor;
use crate::services::{FdTable, Process, Stdin, WorkingDir};

/// What the launches of one run share, as the threads of one process do: the open
/// files, the working directory and stdin, the reactor their calls wait in, how the
/// program asked to end, and the log of what the GPU caused.
#[derive(Clone)]
pub(crate) struct ProcessState {
    pub(super) table: Arc<Mutex<FdTable>>,
    pub(super) cwd: Arc<WorkingDir>,
    pub(super) stdin: Arc<Stdin>,
    pub(super) reactor: Arc<Reactor>,
    pub(super) process: Arc<Process>,
    pub(super) log: Arc<GuestLog>,
}

impl ProcessState {
    /// The reactor the process's waiting calls wait in.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn reactor(&self) -> Arc<Reactor> {
        self.reactor.clone()
    }

    /// The run is over: the reactor lets every call still waiting go, every open still
    /// waiting for a FIFO's other end gets one, and the files close now, outside the
    /// table's lock (a pool worker still inside a service holds the one file it is
    /// using, if any).
    pub(crate) fn end(&self) {
        self.reactor.stop();
        let (files, opens) = {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            (t.take_all(), t.release_opens())
        };
        drop(files);
        for open in opens {
            // The other end of a FIFO a pool thread still waits to open; its open then
            // returns, and its answer is dropped.
            open.release();
        }
        self.log.finish();
    }
}
