//! Process-level services: exit and abort (`Lifecycle`), the realtime clock and
//! randomness (`Time`), the process's identity, and `Ping`.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use hostcall_abi::errno::EIO;
use hostcall_abi::std_services::{Identity, Lifecycle, Time};
use hostcall_abi::typed::Errno;

use super::{Call, Handler, Malformed, Reply};
use crate::guest_log::{GuestLog, Kind};

/// How the GPU program asked to end, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// `std::process::exit(code)` (or libc `exit`), with the status a Linux parent
    /// would see: `code & 0xff`.
    Exit(u8),
    /// A thread called `abort`, or panicked (std ends a panic in an abort on the GPU).
    Abort {
        /// The aborting thread's GPU, in a run over several.
        gpu: Option<u32>,
        /// The aborting thread's linear block index.
        block: u32,
        /// The aborting thread's index within its block.
        thread: u32,
        /// Whether the abort ends a panic.
        panicked: bool,
    },
}

/// State of the process services: the first termination request wins. The launches of
/// a run over several GPUs share it, each through its own handle (`on_gpu`). Once it is
/// set, each launch's host answers its calls that wait `Killed` (`Host::run`'s wait
/// loop), as a process's end stops its threads wherever they wait.
pub(crate) struct Process {
    termination: Arc<Mutex<Option<Termination>>>,
    gpu: Option<u32>,
    /// The run's GPU-caused log lines: each abort is one, within the launch's limit.
    log: Arc<GuestLog>,
}

impl Process {
    /// The process of a run whose GPU-caused lines go to `log`.
    pub fn new(log: Arc<GuestLog>) -> Process {
        Process {
            termination: Arc::default(),
            gpu: None,
            log,
        }
    }

    /// The handle the launch on the GPU at place `gpu` of a run serves with.
    pub fn on_gpu(&self, gpu: Option<u32>) -> Process {
        Process {
            termination: self.termination.clone(),
            gpu,
            log: self.log.clone(),
        }
    }

    /// Records the run's first termination.
    fn terminate(&self, t: Termination) {
        self.termination
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(t);
    }

    /// The calling GPU thread aborts, after a panic or not.
    fn aborted(&self, panicked: bool) {
        let (block, thread) = super::typed::caller();
        let who = crate::guest_log::Who {
            gpu: self.gpu,
            block,
            thread,
        };
        let what = if panicked { "panicked" } else { "aborted" };
        self.log
            .warn(Kind::Abort, format_args!("GPU thread ({who}) {what}"));
        self.terminate(Termination::Abort {
            gpu: self.gpu,
            block,
            thread,
            panicked,
        });
    }

    /// The first termination request of the run.
    pub fn termination(&self) -> Option<Termination> {
        *self.termination.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Handler for Process {
    /// `Ping`, the null call: the host echoes `a0`.
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        Ok(Reply::value(call.args[0] as i64))
    }
}

impl Lifecycle for Process {
    fn exit(&self, code: i32) {
        self.terminate(Termination::Exit((code & 0xff) as u8));
    }

    fn abort(&self) {
        self.aborted(false);
    }

    fn panic_abort(&self) {
        self.aborted(true);
    }
}

/// std's `Time` services: the host's clock and its OS's randomness.
pub(crate) struct HostTime;

impl Time for HostTime {
    fn realtime(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        now.as_nanos() as i64
    }

    fn getrandom(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        getrandom::fill(buf).map_err(|e| {
            log::warn!("getrandom: {e}");
            Errno(EIO)
        })?;
        Ok(buf.len())
    }
}

/// std's `Identity` service: the GPU program's process is the host's.
pub(crate) struct HostIdentity;

impl Identity for HostIdentity {
    fn getpid(&self) -> i32 {
        std::process::id() as i32
    }

    fn getppid(&self) -> i32 {
        rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
    }

    fn getuid(&self) -> u32 {
        rustix::process::getuid().as_raw()
    }
}
