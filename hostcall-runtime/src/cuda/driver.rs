//! The driver itself, before any module: whether it is installed, starting it (`cuInit`),
//! the devices it sees, and what its start and end cost a process on their own.

use std::time::{Duration, Instant};

use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::{Error, Result};

/// Whether the CUDA driver library can be loaded on this machine (tests use it to skip).
pub fn driver_present() -> bool {
    // SAFETY: only probes whether the driver library can be opened.
    unsafe { sys::is_culib_present() }
}

/// Finds the driver library and runs `cuInit`, returning how long `cuInit` took.
pub(super) fn start_driver() -> Result<Duration> {
    if !driver_present() {
        return Err(Error::NoDevice(
            "the CUDA driver library (libcuda.so) was not found; install the NVIDIA driver".into(),
        ));
    }
    let t = Instant::now();
    cu::init().map_err(|e| Error::NoDevice(format!("the CUDA driver did not start: {e:?}")))?;
    Ok(t.elapsed())
}

/// What CUDA's own start and end cost a process that loads nothing: the floor under
/// every program's start-up, which `hostcall_bench --programs` reports beside the
/// programs' (`cuInit` alone is most of it on an H100).
#[derive(Clone, Copy, Debug)]
pub struct CudaStart {
    /// `cuInit`.
    pub init: Duration,
    /// Retaining device 0's primary context and making it current.
    pub context: Duration,
    /// Releasing the context again (the driver tears it down).
    pub release: Duration,
}

/// Starts CUDA on device 0, creates its context and releases it, timing each step; for
/// a process of its own, as CUDA starts once per process.
pub fn start_alone() -> Result<CudaStart> {
    let init = start_driver()?;
    let device = cu::device::get(0).map_err(|e| Error::cuda("cuDeviceGet", e))?;
    let t = Instant::now();
    // SAFETY: `device` is a valid device handle from cuDeviceGet; the context retained
    // here is released once, below, and nothing else uses it.
    unsafe {
        let ctx = cu::primary_ctx::retain(device)
            .map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", e))?;
        cu::ctx::set_current(ctx).map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
    }
    let context = t.elapsed();
    let t = Instant::now();
    // SAFETY: retained above, released once.
    unsafe { cu::primary_ctx::release(device) }
        .map_err(|e| Error::cuda("cuDevicePrimaryCtxRelease", e))?;
    Ok(CudaStart {
        init,
        context,
        release: t.elapsed(),
    })
}

/// The CUDA devices of this machine (for running a module on each: `Host::run_all`).
pub fn device_count() -> Result<usize> {
    start_driver()?;
    let n = cu::device::get_count().map_err(|e| Error::cuda("counting devices", e))?;
    Ok(n as usize)
}
