//! How a run ended: [`Outcome`], the [`RunReport`] beside it, and how both are read
//! from what the program asked for and how its launch ended.

use std::time::Duration;

use hostcall_abi::typed::Errno;
use hostcall_abi::{FaultKind, FaultRecord};

use crate::guest_log::Who;
use crate::module::LaunchEnd;
use crate::services::{ServiceTable, Termination};
use crate::stream::StreamReport;

/// What the GPU program did, once its launch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every thread returned.
    Completed,
    /// The program called `exit(code)`; this is `code & 0xff`, as a Linux parent sees it.
    Exited(u8),
    /// A thread aborted, or panicked (std ends a panic in an abort on the GPU); its
    /// message went to stderr.
    Aborted {
        /// The aborting thread's GPU, by its place in a run over several
        /// ([`Host::run_all`](crate::Host::run_all)); `None` in a run on one.
        gpu: Option<u32>,
        /// Linear block index of the aborting thread.
        block: u32,
        /// Thread index within the block.
        thread: u32,
        /// Whether it panicked: the run then ends with 101, as a Rust program's panic
        /// does, and with 134 (SIGABRT's status) for a plain `abort`.
        panicked: bool,
    },
    /// The launch failed without the program asking to end (illegal address, ...).
    Faulted(String),
}

impl Outcome {
    /// What went wrong, in one sentence naming the GPU thread, when the program did not
    /// end by returning or calling `exit` (std has printed a panic's own message).
    pub fn failure(&self) -> Option<String> {
        match self {
            Outcome::Completed | Outcome::Exited(_) => None,
            &Outcome::Aborted {
                gpu,
                block,
                thread,
                panicked,
            } => Some(format!(
                "GPU thread ({}) {}; the run ends with {}",
                Who { gpu, block, thread },
                if panicked { "panicked" } else { "aborted" },
                self.exit_code()
            )),
            Outcome::Faulted(why) => Some(format!("the GPU program faulted: {why}")),
        }
    }

    /// The process exit code that reflects this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Completed => 0,
            Outcome::Exited(c) => *c as i32,
            Outcome::Aborted { panicked: true, .. } => 101,
            Outcome::Aborted { .. } => 134,
            Outcome::Faulted(_) => crate::EXIT_RUN_FAILED.into(),
        }
    }
}

/// The result of [`Host::run`](crate::Host::run).
#[derive(Clone, Debug)]
pub struct RunReport {
    /// How the program ended.
    pub outcome: Outcome,
    /// What the GPU wrote to fd 1, if capturing.
    pub stdout: Vec<u8>,
    /// What the GPU wrote to fd 2, if capturing.
    pub stderr: Vec<u8>,
    /// Lane calls served.
    pub calls: u64,
    /// From launch until it ended, every hostcall it made was served, and the host's
    /// stdout and stderr had taken its output.
    pub elapsed: Duration,
    /// With [`HostBuilder::summary`](crate::HostBuilder::summary) (`HOSTCALL_DEBUG=summary`): the table printed to
    /// stderr at the end of the run, of calls, errors and host time per service.
    pub summary: Option<String>,
    /// Each stream's account of the launch, in the order of [`Host::stream`](crate::Host::stream).
    pub streams: Vec<StreamReport>,
}

/// How the program ended, from what it asked for and how the launch ended. An `exit` or
/// `abort` ends the launch with its caller's trap; any other fault after it (an illegal
/// address, a thread that gave up on the transport) is reported, not hidden. A thread
/// that gave up ends the launch with a trap of its own, which its record explains. A
/// trap that nothing explains is, on a GPU, most often a thread's stack overflowing:
/// with `stack`, the kernel's name and its stack bytes, the run says so.
pub(super) fn outcome_of(
    asked: Option<Termination>,
    ended: LaunchEnd,
    transport: Option<String>,
    stack: Option<(&str, usize)>,
) -> Outcome {
    let fault = |why: String| match &transport {
        Some(what) => Outcome::Faulted(format!("{what}; then the launch faulted: {why}")),
        None => Outcome::Faulted(why),
    };
    match (asked, ended) {
        (_, LaunchEnd::Trapped(_)) if let Some(what) = &transport => Outcome::Faulted(what.clone()),
        (_, LaunchEnd::Faulted(why) | LaunchEnd::IllegalAddress(why)) if transport.is_some() => {
            fault(why)
        }
        (Some(Termination::Exit(code)), LaunchEnd::Completed | LaunchEnd::Trapped(_)) => {
            Outcome::Exited(code)
        }
        (
            Some(Termination::Abort {
                gpu,
                block,
                thread,
                panicked,
            }),
            LaunchEnd::Completed | LaunchEnd::Trapped(_),
        ) => Outcome::Aborted {
            gpu,
            block,
            thread,
            panicked,
        },
        (Some(t), LaunchEnd::Faulted(why) | LaunchEnd::IllegalAddress(why)) => {
            let asked = match t {
                Termination::Exit(code) => format!("exit({code})"),
                Termination::Abort {
                    gpu, block, thread, ..
                } => format!("an abort by {:#}", Who { gpu, block, thread }),
            };
            fault(format!("{why}, after {asked}"))
        }
        (None, LaunchEnd::Completed) => Outcome::Completed,
        (None, LaunchEnd::Trapped(why)) => match stack {
            Some((kernel, bytes)) => Outcome::Faulted(format!(
                "kernel `{kernel}` ended with {why} though no GPU thread asked to end: most \
                 likely a thread overflowed its stack of {bytes} bytes (stack_bytes; raise \
                 it with CudaOptions::stack_bytes)"
            )),
            None => fault(why),
        },
        // An overflowing stack is also seen as an illegal address (a kernel recursing
        // past 16 KiB on the H200), which safe Rust does not otherwise make.
        (None, LaunchEnd::IllegalAddress(why)) => match stack {
            Some((kernel, bytes)) => Outcome::Faulted(format!(
                "kernel `{kernel}` ended with {why}: unless unsafe code went out of bounds, \
                 a thread overflowed its stack of {bytes} bytes (stack_bytes; raise it with \
                 CudaOptions::stack_bytes)"
            )),
            None => fault(why),
        },
        (None, LaunchEnd::Faulted(why)) => fault(why),
    }
}

/// What a GPU thread recorded before it gave up on the transport, in words; `services`
/// names the service of a failed call.
pub(super) fn transport_fault(
    f: &FaultRecord,
    services: &ServiceTable,
    gpu: Option<u32>,
) -> Option<String> {
    if f.valid.load(std::sync::atomic::Ordering::Acquire) != 1 {
        return None;
    }
    let waited = Duration::from_nanos(f.waited_ns);
    let what = match FaultKind::from_code(f.kind) {
        Some(FaultKind::NoPort) => format!("found no free port in {waited:.1?}"),
        Some(FaultKind::NoAnswer) => format!(
            "had no answer on port {} for sequence {} in {waited:.1?}",
            f.port, f.seq
        ),
        Some(FaultKind::NoPostedAnswer) => format!(
            "waited {waited:.1?} on port {} for the host to finish posted sequence {}",
            f.port, f.seq
        ),
        Some(FaultKind::ForeignAnswer) => format!(
            "found an answer for another sequence on port {} (waiting for {}, word {:#x}): the host broke the protocol",
            f.port, f.seq, f.detail
        ),
        Some(FaultKind::Killed) => format!(
            "was stopped by the host's timeout during its call on port {}",
            f.port
        ),
        Some(FaultKind::ServiceFailed) => format!(
            "called `{}`, which cannot return an error, and it failed with {:?}",
            services.name(f.port),
            Errno(f.detail as i32)
        ),
        None => format!("recorded an unknown transport fault {}", f.kind),
    };
    Some(format!(
        "GPU thread ({}) gave up: it {what}",
        Who {
            gpu,
            block: f.block,
            thread: f.thread
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_and_abort_do_not_hide_a_later_fault() {
        let trap = || LaunchEnd::Trapped("trap".into());
        let illegal = || LaunchEnd::Faulted("illegal address".into());
        let exit = Some(Termination::Exit(3));
        assert_eq!(outcome_of(exit, trap(), None, None), Outcome::Exited(3));
        let hidden = outcome_of(exit, illegal(), None, None);
        assert!(
            matches!(&hidden, Outcome::Faulted(m) if m.contains("illegal address, after exit(3)")),
            "{hidden:?}"
        );
        let abort = Some(Termination::Abort {
            gpu: None,
            block: 1,
            thread: 2,
            panicked: true,
        });
        assert!(matches!(
            outcome_of(abort, illegal(), None, None),
            Outcome::Faulted(_)
        ));
        let gave_up = outcome_of(exit, trap(), Some("GPU thread gave up".into()), None);
        assert!(matches!(&gave_up, Outcome::Faulted(m) if m.starts_with("GPU thread gave up")));
        // A thread that gave up ends the launch with its own trap: the record says it
        // all, and the driver's "unspecified launch failure" would only blur it.
        assert_eq!(
            outcome_of(None, trap(), Some("GPU thread gave up: why".into()), None),
            Outcome::Faulted("GPU thread gave up: why".into())
        );
        assert_eq!(
            outcome_of(
                None,
                illegal(),
                Some("GPU thread gave up: why".into()),
                None
            ),
            Outcome::Faulted(
                "GPU thread gave up: why; then the launch faulted: illegal address".into()
            )
        );
        assert_eq!(
            outcome_of(None, LaunchEnd::Completed, None, None),
            Outcome::Completed
        );
    }

    /// A kernel at the default 16 KiB stack died with `CUDA_ERROR_LAUNCH_FAILED
    /// "unspecified launch failure"`, with no word about the stack.
    #[test]
    fn a_trap_no_thread_asked_for_names_the_kernel_and_its_stack() {
        let trap =
            || LaunchEnd::Trapped("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure".into());
        let Outcome::Faulted(why) = outcome_of(None, trap(), None, Some(("kmain", 16384))) else {
            panic!("a fault")
        };
        assert!(
            why.starts_with("kernel `kmain` ended with CUDA_ERROR_LAUNCH_FAILED")
                && why.contains("overflowed its stack of 16384 bytes (stack_bytes;"),
            "{why}"
        );
        // What a thread asked for, or a fault of another kind, says nothing of the stack.
        let stack = Some(("kmain", 16384));
        assert_eq!(
            outcome_of(Some(Termination::Exit(3)), trap(), None, stack),
            Outcome::Exited(3)
        );
        let illegal = || {
            LaunchEnd::IllegalAddress("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access".into())
        };
        let Outcome::Faulted(why) = outcome_of(None, illegal(), None, stack) else {
            panic!("a fault")
        };
        assert!(
            why.starts_with("kernel `kmain` ended with CUDA_ERROR_ILLEGAL_ADDRESS")
                && why.contains("overflowed its stack of 16384 bytes"),
            "{why}"
        );
        let misaligned = LaunchEnd::Faulted("CUDA_ERROR_MISALIGNED_ADDRESS".into());
        assert_eq!(
            outcome_of(None, misaligned, None, stack),
            Outcome::Faulted("CUDA_ERROR_MISALIGNED_ADDRESS".into())
        );
        assert_eq!(
            outcome_of(None, illegal(), None, None),
            Outcome::Faulted("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access".into())
        );
    }
}
