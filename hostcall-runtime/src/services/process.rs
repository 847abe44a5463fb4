//! Process-level services: exit, abort, the realtime clock, randomness, `Ping`, and the
//! process's identity.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use hostcall_abi::Service;
use hostcall_abi::errno::EIO;

use super::{Call, Handler, Malformed, Reply};

/// How the GPU program asked to end, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// `std::process::exit(code)` (or libc `exit`), with the status a Linux parent
    /// would see: `code & 0xff`.
    Exit(u8),
    /// A thread called `abort` (every panic ends there).
    Abort {
        /// The aborting thread's linear block index.
        block: u32,
        /// The aborting thread's index within its block.
        thread: u32,
    },
}

/// State of the process services: the first termination request wins.
#[derive(Default)]
pub(crate) struct Process {
    termination: Mutex<Option<Termination>>,
}

impl Process {
    fn terminate(&self, t: Termination) {
        let mut slot = self.termination.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(t);
        }
    }

    /// The first termination request of the run.
    pub fn termination(&self) -> Option<Termination> {
        *self.termination.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Handler for Process {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let service = Service::from_id(call.service);
        Ok(match service {
            Some(Service::Ping) => Reply::value(call.args[0] as i64),
            Some(Service::Exit) => {
                self.terminate(Termination::Exit((call.args[0] & 0xff) as u8));
                Reply::value(0)
            }
            Some(Service::Abort) => {
                log::error!(
                    "GPU thread (block {}, thread {}) aborted",
                    call.block,
                    call.thread
                );
                self.terminate(Termination::Abort {
                    block: call.block,
                    thread: call.thread,
                });
                Reply::value(0)
            }
            Some(Service::ClockRealtime) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                Reply::value(now.as_nanos() as i64)
            }
            Some(Service::Getrandom) => {
                let n = call.len_arg(0)?;
                match getrandom::fill(&mut call.out[..n]) {
                    Ok(()) => Reply::bytes(n),
                    Err(e) => {
                        log::warn!("getrandom: {e}");
                        Reply::errno(EIO)
                    }
                }
            }
            _ => Reply::errno(EIO),
        })
    }
}

/// std's `Identity` service: the GPU program's process is the host's.
pub(crate) struct HostIdentity;

impl hostcall_client::std_services::Identity for HostIdentity {
    fn getpid(&self) -> i32 {
        std::process::id() as i32
    }

    fn getppid(&self) -> i32 {
        rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
    }
}
