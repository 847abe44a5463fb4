//! The runtime's one error type.

use std::time::Duration;

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
    /// The launch would not fit what the runtime or device allows.
    #[error("invalid launch: {0}")]
    InvalidLaunch(String),
    /// The kernel ran past the configured limit; it may still be running.
    #[error("the kernel did not finish within {0:?} (HOSTCALL_TIMEOUT_S or Host::timeout)")]
    Timeout(Duration),
    /// A host-side I/O failure outside any service (e.g. creating a capture).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Wraps a cudarc driver error with what was being done.
    pub(crate) fn cuda(what: &'static str, e: cudarc::driver::DriverError) -> Error {
        Error::Cuda {
            what,
            message: format!("{e:?}"),
        }
    }
}

/// Result with the runtime's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
