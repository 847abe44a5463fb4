//! GPU memory the host reads while a kernel runs: the copy engine, through two pinned
//! staging buffers on a stream of its own ([`CudaReader`]).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::DriverError;
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::Result;
use crate::error::driver_message;
use crate::module::{DeviceMemory, LaunchMemory, StreamStop};

/// Bytes of each of the two pinned staging buffers `Fs.write_from_device` copies
/// through: small enough that the first copy, which nothing overlaps, is short (50 µs
/// at PCIe speed), large enough that each `write` into the page cache is efficient.
const STAGING_BYTES: usize = 1 << 20;

/// Copies device memory to the host with the copy engine while the kernel runs, through
/// two pinned staging buffers on a non-blocking stream of its own (so it never waits for
/// the kernel): piece `k + 1` is copied while the sink takes piece `k`.
pub(super) struct CudaReader {
    ctx: sys::CUcontext,
    staging: std::sync::Mutex<Option<Staging>>,
    /// The launch's memory, entered for each copy.
    memory: Arc<LaunchMemory>,
}

impl CudaReader {
    /// A reader of `memory`, in context `ctx`; its staging buffers are made at its first
    /// copy.
    pub(super) fn new(ctx: sys::CUcontext, memory: Arc<LaunchMemory>) -> CudaReader {
        CudaReader {
            ctx,
            staging: std::sync::Mutex::new(None),
            memory,
        }
    }
}

/// An ended launch's allocations, freed once no service copies out of them.
pub(super) struct Deferred {
    pub(super) memory: Arc<LaunchMemory>,
    pub(super) device: Vec<sys::CUdeviceptr>,
    pub(super) host: Vec<*mut c_void>,
    pub(super) heaps: Vec<Arc<super::heap::ReservedHeap>>,
}

/// The pinned buffers and stream of a [`CudaReader`], made on first use.
struct Staging {
    bufs: [*mut c_void; 2],
    stream: sys::CUstream,
}

// SAFETY: a CUDA context handle may be used from any thread once made current there; the
// staging buffers and stream are used only under the mutex.
unsafe impl Send for CudaReader {}
// SAFETY: as for Send; each call makes the context current on its own thread.
unsafe impl Sync for CudaReader {}

impl Staging {
    /// # Safety
    /// The reader's context must be current.
    unsafe fn new() -> std::result::Result<Staging, cudarc::driver::DriverError> {
        // SAFETY: plain allocations in the current context, freed by `CudaReader`'s drop.
        unsafe {
            let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)?;
            let a = cu::malloc_host(STAGING_BYTES, 0)?;
            let b = cu::malloc_host(STAGING_BYTES, 0)?;
            Ok(Staging {
                bufs: [a, b],
                stream,
            })
        }
    }
}

impl DeviceMemory for CudaReader {
    fn stream(
        &self,
        addr: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> (u64, Option<StreamStop>) {
        let fail = |e: DriverError| Some(StreamStop::Copy(driver_message(&e)));
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the context outlives the launch (the module owns it).
        if let Err(e) = unsafe { cu::ctx::set_current(self.ctx) } {
            return (0, fail(e));
        }
        let staging = match &mut *guard {
            Some(s) => s,
            // SAFETY: the context was made current just above.
            None => match unsafe { Staging::new() } {
                Ok(s) => guard.insert(s),
                Err(e) => return (0, fail(e)),
            },
        };
        let piece = |k: u64| {
            let off = k * STAGING_BYTES as u64;
            (off, (len - off).min(STAGING_BYTES as u64) as usize)
        };
        let pieces = len.div_ceil(STAGING_BYTES as u64);
        let issue = |k: u64| {
            let (off, n) = piece(k);
            // SAFETY: each buffer has STAGING_BYTES bytes and is written only by the copy
            // issued into it, which is awaited (stream synchronize) before the sink reads
            // it or another copy reuses it; the driver checks that the source range is
            // device memory and fails the copy otherwise.
            unsafe {
                let buf = staging.bufs[(k % 2) as usize].cast::<u8>();
                cu::memcpy_dtoh_async(
                    std::slice::from_raw_parts_mut(buf, n),
                    addr + off,
                    staging.stream,
                )
            }
        };
        // SAFETY: the stream is live until the reader drops.
        let wait = || unsafe { cu::stream::synchronize(staging.stream) };
        if pieces == 0 {
            return (0, None);
        }
        let gone = || {
            Some(StreamStop::Copy(
                "the launch ended and its memory was freed".into(),
            ))
        };
        {
            let Some(_copying) = self.memory.enter() else {
                return (0, gone());
            };
            if let Err(e) = issue(0).and_then(|()| wait()) {
                return (0, fail(e));
            }
        }
        let mut done = 0;
        for k in 0..pieces {
            // Copy `k + 1` runs while the sink takes piece `k`; it stays inside the
            // launch's memory until it has been awaited.
            let copying = (k + 1 < pieces).then(|| self.memory.enter()).flatten();
            let ended = k + 1 < pieces && copying.is_none();
            let next = if copying.is_some() {
                issue(k + 1)
            } else {
                Ok(())
            };
            let (_, n) = piece(k);
            // SAFETY: copy `k` into this buffer completed (awaited above).
            let bytes = unsafe {
                std::slice::from_raw_parts(staging.bufs[(k % 2) as usize].cast::<u8>(), n)
            };
            let took = sink(bytes);
            let copied = next.and_then(|()| wait());
            drop(copying);
            if let Err(e) = took {
                return (done, Some(StreamStop::Sink(e)));
            }
            done += n as u64;
            if let Err(e) = copied {
                return (done, fail(e));
            }
            if ended {
                return (done, gone());
            }
        }
        (done, None)
    }

    fn fill(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let fail = |e: DriverError| driver_message(&e);
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the context outlives the launch (the module owns it).
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(fail)?;
        let staging = match &mut *guard {
            Some(s) => s,
            // SAFETY: the context was made current just above.
            None => guard.insert(unsafe { Staging::new() }.map_err(fail)?),
        };
        for (k, piece) in data.chunks(STAGING_BYTES).enumerate() {
            let Some(_copying) = self.memory.enter() else {
                return Err("the launch ended and its memory was freed".into());
            };
            let at = addr + (k * STAGING_BYTES) as u64;
            // SAFETY: the pinned buffer holds STAGING_BYTES bytes and is used by one copy
            // at a time (the staging lock), awaited before it is reused; the copy goes on
            // the reader's non-blocking stream, so it never waits for the running kernel
            // (a copy on the default stream would), and the driver fails it unless the
            // destination is device memory.
            unsafe {
                let buf = staging.bufs[0].cast::<u8>();
                std::ptr::copy_nonoverlapping(piece.as_ptr(), buf, piece.len());
                cu::memcpy_htod_async(
                    at,
                    std::slice::from_raw_parts(buf, piece.len()),
                    staging.stream,
                )
                .and_then(|()| cu::stream::synchronize(staging.stream))
                .map_err(fail)?;
            }
        }
        Ok(())
    }
}

impl Drop for CudaReader {
    fn drop(&mut self) {
        let staging = self.staging.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = staging.take() {
            // Errors are ignored, as in `CudaModule`'s drop.
            // SAFETY: made by `Staging::new` in this context, released once.
            unsafe {
                let _ = cu::ctx::set_current(self.ctx);
                let _ = cu::stream::destroy(s.stream);
                for b in s.bufs {
                    let _ = cu::free_host(b);
                }
            }
        }
    }
}
