//! The host side of Rust std on NVIDIA GPUs.
//!
//! A [`Host`] grants capabilities (pre-opened directories, environment variables, stdio,
//! network addresses) and runs a launch on a [`GpuModule`] while its server answers the
//! GPU's hostcalls.
//! Backends implement [`GpuModule`]: [`cuda::CudaModule`] for real GPUs here, and the
//! `hostcall-emulator` crate's, which runs the device half of the transport on OS
//! threads for tests without a GPU.
//!
//! Programs add their own services by declaring them once (`hostcall_abi::service!`):
//! [`HostBuilder::serve`] serves a declared trait, [`Host::hostcall`] a closure, and
//! each run checks the module's declared services against what the host serves.
//!
//! `HOSTCALL_DEBUG=1` logs every hostcall (caller, service, arguments, result, latency)
//! through `log`, typed services with their decoded arguments and results;
//! `HOSTCALL_DEBUG=summary` prints a table per run instead (calls, errors, host time per
//! service). [`init_logging`] sets `env_logger` up for that.

pub mod cuda;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod guest_log;
mod host;
mod module;
mod server;
pub mod services;
pub mod stream;

pub use error::{EXIT_NO_GPU, EXIT_RUN_FAILED, Error, Result};
pub use guest_log::{SHOWN_PER_KIND, escaped};
pub use host::{
    DEFAULT_BLOCKING_THREADS, DEFAULT_CAPTURE_LIMIT, DEFAULT_HEAP_BYTES, DEFAULT_MAX_OPEN_FILES,
    DEFAULT_PORTS, DEFAULT_TIMEOUT, DEFAULT_WAIT_LIMIT, Host, HostBuilder, MAX_DEFAULT_CONSUMERS,
    MAX_DEFAULT_STREAM_READERS, Outcome, RunReport, default_consumers, default_stream_readers,
};
pub use host::{LaunchServices, Running, Scope};
pub use module::{
    Copying, DeviceHeap, DeviceMemory, GpuModule, HeapRefused, HostMemory, KernelArg, Launch,
    LaunchEnd, LaunchMemory, ModuleSlot, StreamStop,
};
pub use server::InFlight;
pub use services::Unserved;
pub use services::lifetime::{Lifetime, Serving};
pub use services::typed::UnservedCall;

/// Starts `env_logger` with warnings on, and each hostcall traced when `HOSTCALL_DEBUG`
/// is set (`RUST_LOG` still overrides both). A logger set up before is kept.
pub fn init_logging() {
    let v = std::env::var("HOSTCALL_DEBUG");
    start_logging(v.is_ok_and(|v| v != "0" && v != "summary"));
}

/// [`init_logging`] with tracing on or off.
pub(crate) fn start_logging(trace: bool) {
    let default = if trace {
        "warn,hostcall=info,hostcall_runtime=info"
    } else {
        "warn"
    };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_timestamp_micros()
        .try_init();
}
