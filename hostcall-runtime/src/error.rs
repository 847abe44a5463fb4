//! The runtime's one error type.

use std::time::Duration;

use crate::server::InFlight;
use crate::services::sandbox::MountError;

/// The calls in flight, in words (the first few, then how many more).
fn in_flight_text(calls: &[InFlight]) -> String {
    const SHOWN: usize = 8;
    if calls.is_empty() {
        return "no hostcall was in flight".into();
    }
    let mut text = format!("{} hostcalls in flight: ", calls.len());
    let listed: Vec<String> = calls.iter().take(SHOWN).map(ToString::to_string).collect();
    text.push_str(&listed.join(", "));
    if calls.len() > SHOWN {
        text.push_str(&format!(" and {} more", calls.len() - SHOWN));
    }
    text
}

/// Exit code of a run that could not start for want of a GPU (sysexits' `EX_UNAVAILABLE`),
/// so that a script tells "no GPU here" from a program's own failure and from a fault.
pub const EXIT_NO_GPU: u8 = 69;

/// Exit code of a run that faulted, or could not start for any other reason (sysexits'
/// `EX_SOFTWARE`).
pub const EXIT_RUN_FAILED: u8 = 70;

/// Why a run could not start or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable GPU driver or device on this machine.
    #[error("no NVIDIA GPU is usable here: {0}")]
    NoDevice(String),
    /// A CUDA driver call failed.
    #[error("CUDA: {what} failed: {message}")]
    Cuda {
        /// The operation that failed.
        what: &'static str,
        /// The driver's error name and description.
        message: String,
    },
    /// The module speaks another version of the hostcall ABI.
    #[error(
        "the GPU module was built for hostcall ABI {module} but this host speaks ABI {host}: \
         rebuild the kernel crate against this runtime's hostcall-abi"
    )]
    AbiMismatch {
        /// The module's `__hostcall_abi_version` (0 if it has none).
        module: u32,
        /// `hostcall_abi::ABI_VERSION`.
        host: u32,
    },
    /// The module lacks a symbol the runtime needs.
    #[error(
        "the GPU module has no `{0}`: was it linked with libc-hostcall and built by ptx-builder?"
    )]
    MissingSymbol(String),
    /// The per-thread stack asked for is more than the device allows.
    #[error(
        "a stack of {bytes} bytes for each GPU thread is more than the {device} allows \
         ({cause}): the driver sets it aside for each of the {resident} threads the GPU \
         can hold at once, {} MiB at this size against {} MiB free, and no thread has \
         more than 512 KiB of local memory; ask for less with CudaOptions::stack_bytes",
        bytes.saturating_mul(*resident) >> 20,
        free >> 20
    )]
    StackTooLarge {
        /// The stack asked for.
        bytes: usize,
        /// The device's name.
        device: String,
        /// What the driver said.
        cause: String,
        /// Threads the device holds at once (SMs times threads per SM).
        resident: usize,
        /// Device memory free when it was asked.
        free: usize,
    },
    /// A network grant did not parse, or its name did not resolve.
    #[error("network grant {0}")]
    NetGrant(String),
    /// The launch would not fit what the runtime or device allows.
    #[error("invalid launch: {0}")]
    InvalidLaunch(String),
    /// The module's last launch still runs on the device (stopped at its time limit, its
    /// kernel never calls the host): another launch would rewrite what it reads.
    #[error(
        "the module's last launch, kernel `{kernel}`, still runs on the device (stopped at \
         its time limit, it does not call the host): another launch on the module would \
         rewrite the configuration and service ids it reads; wait for it to end, or load \
         the module anew"
    )]
    StillRunning {
        /// The running kernel.
        kernel: String,
    },
    /// The kernel ran past its time limit and was stopped.
    #[error(
        "kernel `{kernel}` was stopped after {elapsed:.1?}: its time limit is {limit:?} \
         (HOSTCALL_TIMEOUT_S or Host::timeout); {}{}",
        in_flight_text(in_flight),
        if *still_running {
            "; it does not call the host, so it runs until this process exits"
        } else {
            ""
        }
    )]
    Timeout {
        /// The kernel's name.
        kernel: String,
        /// The limit it ran past.
        limit: Duration,
        /// From the call of `Host::run` until it was given up on.
        elapsed: Duration,
        /// The calls it had published and not had answered when the limit fired.
        in_flight: Vec<InFlight>,
        /// Whether it still ran after the grace period: a kernel that never calls the
        /// host cannot be stopped from the host, only by ending the process.
        still_running: bool,
    },
    /// The module calls a declared service this host does not serve, or serves with
    /// another signature.
    #[error("{0}")]
    Service(String),
    /// A pre-opened directory was refused.
    #[error(transparent)]
    Sandbox(#[from] MountError),
    /// A host-side I/O failure outside any service (e.g. creating a capture).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The exit code of a process whose run ended in this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NoDevice(_) => EXIT_NO_GPU,
            _ => EXIT_RUN_FAILED,
        }
    }
}

impl Error {
    /// Wraps a cudarc driver error with what was being done.
    pub(crate) fn cuda(what: &'static str, e: cudarc::driver::DriverError) -> Error {
        Error::Cuda {
            what,
            message: driver_message(&e),
        }
    }
}

/// A driver error as its name and the driver's sentence for it:
/// `CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered`.
pub(crate) fn driver_message(e: &cudarc::driver::DriverError) -> String {
    match e.error_string() {
        Ok(text) => format!("{:?}: {}", e.0, text.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

/// Result with the runtime's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// `cuCtxSetLimit(STACK_SIZE)` past the device's limit failed with a raw
    /// `CUDA_ERROR_INVALID_VALUE`. The figures are the H200's, where 512 KiB was refused.
    #[test]
    fn a_stack_too_large_says_what_it_would_take() {
        let e = Error::StackTooLarge {
            bytes: 512 << 10,
            device: "NVIDIA H200".into(),
            cause: "CUDA_ERROR_INVALID_VALUE: invalid argument".into(),
            resident: 270_336,
            free: 142_629 << 20,
        };
        assert_eq!(
            e.to_string(),
            "a stack of 524288 bytes for each GPU thread is more than the NVIDIA H200 allows \
             (CUDA_ERROR_INVALID_VALUE: invalid argument): the driver sets it aside for each \
             of the 270336 threads the GPU can hold at once, 135168 MiB at this size against \
             142629 MiB free, and no thread has more than 512 KiB of local memory; ask for \
             less with CudaOptions::stack_bytes"
        );
    }
}
