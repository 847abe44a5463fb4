//! The CUDA backend, over cudarc's driver bindings loaded at run time (so nothing here
//! needs CUDA to build). Loads the cubin matching the device when the module carries
//! one, else JIT-compiles the PTX; raises the thread stack limit std needs; maps the
//! channel in host-pinned memory.

use std::ffi::{CString, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::DriverError;
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use hostcall_abi::{CONFIG_SYMBOL, DeviceConfig, VERSION_SYMBOL};

use crate::error::driver_message;
use crate::module::{
    DeviceHeap, DeviceMemory, GpuModule, HostMemory, KernelArg, Launch, LaunchEnd, LaunchMemory,
    ModuleSlot, WholeHeap,
};
use crate::{Error, Result};

mod driver;
mod heap;
mod image;
mod memory;

use driver::start_driver;
pub use driver::{CudaStart, device_count, driver_present, start_alone};
use image::slot_symbols;
pub use image::{LoadedFrom, ModuleImage};
use memory::{CudaReader, Deferred};

/// Per-thread stack unless set: std's formatting and I/O paths need far more than
/// CUDA's 1 KiB default. Measured on an H100 (`bench/gpu-run.sh`'s probe, commit
/// 0c0e214): the demo and the mixed transport stress fault at 2 KiB and pass at 4 KiB,
/// a panic's message formatting faults at 4 KiB and passes at 8 KiB; the default leaves
/// twice that. The driver reserves it for every resident
/// thread (16 KiB x 2048 threads x 132 SMs = 4.3 GiB on an H100), so it is kept small.
/// A module that knows its need ([`ModuleImage::stack_bytes`]) gets more where it needs
/// more; [`CudaOptions::stack_bytes`] overrides both.
pub const DEFAULT_STACK_BYTES: usize = 16 << 10;

/// Each thread's stack: the one asked for, else the module's need where it knows it and
/// it is larger than [`DEFAULT_STACK_BYTES`], else that default. An explicit stack below
/// the module's need is taken, with a warning: the need takes every indirect call as
/// reaching any function of its signature, so it can be more than a program uses.
fn stack_for(asked: Option<usize>, needed: Option<usize>) -> usize {
    match (asked, needed) {
        (Some(asked), Some(needed)) if asked < needed => {
            log::warn!(
                "a stack of {asked} bytes per GPU thread (stack_bytes) is below the {needed} \
                 the module's deepest call path needs; a thread that goes that deep \
                 overflows it"
            );
            asked
        }
        (Some(asked), _) => asked,
        (None, needed) => needed.unwrap_or(0).max(DEFAULT_STACK_BYTES),
    }
}

/// Why the driver refused a stack of `bytes` per thread on `device`, with the most it
/// would likely take: it sets the stack aside for every thread the GPU can hold at once,
/// out of the memory free now.
fn stack_refused(device: sys::CUdevice, name: &str, bytes: usize, e: &DriverError) -> Error {
    use sys::CUdevice_attribute as A;
    // SAFETY: `device` is a valid device handle and its context is current.
    let attr = |a| unsafe { cu::device::get_attribute(device, a) }.map_or(0, |v| v.max(0) as usize);
    let resident = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        * attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    let free = cu::mem_get_info().map_or(0, |(free, _)| free);
    Error::StackTooLarge {
        bytes,
        device: name.to_string(),
        cause: driver_message(e),
        resident,
        free,
    }
}

/// Options for [`CudaModule::load`], set through `#[must_use]` setters. The default:
/// device 0, the module's own stack, cubins where one fits, pageable access refused.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CudaOptions {
    device: usize,
    stack_bytes: Option<usize>,
    force_jit: bool,
    allow_pageable_access: bool,
}

impl CudaOptions {
    /// The device ordinal to run on (default 0).
    #[must_use]
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }

    /// Per-thread stack limit in bytes (default: the module's need, at least
    /// [`DEFAULT_STACK_BYTES`]).
    #[must_use]
    pub fn stack_bytes(mut self, bytes: usize) -> Self {
        self.stack_bytes = Some(bytes);
        self
    }

    /// Ignore cubins and JIT the PTX (to measure, or to work around a cubin).
    #[must_use]
    pub fn force_jit(mut self, jit: bool) -> Self {
        self.force_jit = jit;
        self
    }

    /// Run on a device that can read and write the host's pageable memory (HMM or ATS,
    /// as on Grace Hopper). There a kernel reaches all of the host process's memory
    /// with plain loads and stores, around every check the host services make, so the
    /// runtime refuses such a device unless the embedder accepts that (default: refuse).
    #[must_use]
    pub fn allow_pageable_access(mut self, allow: bool) -> Self {
        self.allow_pageable_access = allow;
        self
    }
}

/// Why a device is refused, if it is: one that can access pageable host memory, unless
/// allowed (see [`CudaOptions::allow_pageable_access`]).
fn pageable_refusal(name: &str, pageable: bool, allowed: bool) -> Option<Error> {
    (pageable && !allowed).then(|| {
        Error::NoDevice(format!(
            "{name} can access the host's pageable memory (HMM/ATS), so a kernel could read \
             or write any host memory around the sandbox; set \
             CudaOptions::allow_pageable_access(true) to run there anyway"
        ))
    })
}

/// A module loaded into the primary context of one device.
pub struct CudaModule {
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    name: String,
    sm: u32,
    module: sys::CUmodule,
    stream: sys::CUstream,
    loaded_from: LoadedFrom,
    load_time: Duration,
    host_allocs: Vec<*mut c_void>,
    device_allocs: Vec<sys::CUdeviceptr>,
    /// The launch's heap, backed as the GPU reaches it.
    heaps: Vec<Arc<heap::ReservedHeap>>,
    /// Whether the allocations above may still be read by the launch's services.
    memory: Arc<LaunchMemory>,
    /// Ended launches' memory that a service was still copying out of when they ended.
    deferred: Vec<Deferred>,
    /// A launch was started and has not been seen to end.
    running: bool,
    /// The last launch's kernel.
    kernel: String,
    /// The symbols of the declared services' slots the PTX defines.
    slots: Vec<String>,
    /// Each thread's stack, as set in the context.
    stack_bytes: usize,
}

fn check(what: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|e| Error::cuda(what, e))
}

impl CudaModule {
    /// Loads `image` on the device `options` names.
    pub fn load(image: &ModuleImage<'_>, options: &CudaOptions) -> Result<CudaModule> {
        let init = Instant::now();
        let init_time = start_driver()?;
        let count = cu::device::get_count().map_err(|e| Error::cuda("counting devices", e))?;
        if options.device >= count as usize {
            return Err(Error::NoDevice(format!(
                "device {} asked for, {count} CUDA device(s) present",
                options.device
            )));
        }
        let device =
            cu::device::get(options.device as i32).map_err(|e| Error::cuda("cuDeviceGet", e))?;
        let name = cu::device::get_name(device).map_err(|e| Error::cuda("cuDeviceGetName", e))?;
        // SAFETY: `device` is a valid device handle from cuDeviceGet.
        let (major, minor, ctx) = unsafe {
            let attr = |a| {
                cu::device::get_attribute(device, a)
                    .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))
            };
            let major =
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor =
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            let ctx = cu::primary_ctx::retain(device)
                .map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", e))?;
            cu::ctx::set_current(ctx).map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
            (major as u32, minor as u32, ctx)
        };
        let sm = major * 10 + minor;
        log::info!(
            "CUDA started in {:.2?} (cuInit {init_time:.2?}, the context the rest)",
            init.elapsed()
        );
        // SAFETY: as above.
        let pageable = unsafe {
            cu::device::get_attribute(
                device,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
            )
        }
        .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))?;
        if let Some(e) = pageable_refusal(&name, pageable != 0, options.allow_pageable_access) {
            // SAFETY: retained above, released once.
            let _ = unsafe { cu::primary_ctx::release(device) };
            return Err(e);
        }
        let stack_bytes = stack_for(options.stack_bytes, image.stack_bytes);
        if let Err(e) = cu::ctx::set_limit(sys::CUlimit::CU_LIMIT_STACK_SIZE, stack_bytes) {
            let refused = stack_refused(device, &name, stack_bytes, &e);
            // SAFETY: retained above, released once.
            let _ = unsafe { cu::primary_ctx::release(device) };
            return Err(refused);
        }

        let started = Instant::now();
        let cubin = image
            .cubins
            .iter()
            .find(|(s, _)| *s == sm)
            .filter(|_| !options.force_jit);
        let (module, loaded_from) = match cubin {
            Some((s, bytes)) => {
                // SAFETY: a cubin image is read by the driver during the call only.
                let m = unsafe { cu::module::load_data(bytes.as_ptr().cast()) }
                    .map_err(|e| Error::cuda("loading the cubin", e))?;
                (m, LoadedFrom::Cubin(*s))
            }
            None => {
                let ptx = CString::new(image.ptx)
                    .map_err(|_| Error::InvalidLaunch("the PTX contains a NUL byte".into()))?;
                // SAFETY: a NUL-terminated PTX image, read during the call only.
                let m = unsafe { cu::module::load_data(ptx.as_ptr().cast()) }
                    .map_err(|e| Error::cuda("JIT-compiling the PTX", e))?;
                (m, LoadedFrom::PtxJit)
            }
        };
        let load_time = started.elapsed();
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(|e| Error::cuda("cuStreamCreate", e))?;
        log::info!(
            "loaded module {} on {name} (sm_{sm}) from {loaded_from:?} in {load_time:.2?}",
            &image.sha256[..image.sha256.len().min(12)]
        );
        Ok(CudaModule {
            device,
            ctx,
            name,
            sm,
            module,
            stream,
            loaded_from,
            load_time,
            host_allocs: Vec::new(),
            device_allocs: Vec::new(),
            heaps: Vec::new(),
            memory: Arc::default(),
            deferred: Vec::new(),
            running: false,
            kernel: String::new(),
            slots: slot_symbols(image.ptx),
            stack_bytes,
        })
    }

    /// Whether the module came from a cubin or the PTX JIT.
    pub fn loaded_from(&self) -> &LoadedFrom {
        &self.loaded_from
    }

    /// How long loading (cubin) or JIT compiling (PTX) took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The device's SM version (90 for an H100).
    pub fn sm(&self) -> u32 {
        self.sm
    }

    /// Bytes of device memory free now, for sizing a heap.
    pub fn memory_free(&self) -> Result<u64> {
        // SAFETY: the module owns a reference to its primary context until drop.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        cu::mem_get_info()
            .map(|(free, _)| free as u64)
            .map_err(|e| Error::cuda("cuMemGetInfo", e))
    }

    /// The device heap of a program run as a process (`cargo gpu run`, the conformance
    /// suite): half the GPU memory free now, at most [`hostcall_abi::HEAP_MAX_BYTES`]. A
    /// process's heap is bounded by memory alone (a binary's threads take their frame
    /// stacks from it too); the other half is left to the driver and other programs. It
    /// is a range of addresses, backed by memory as the program reaches it
    /// ([`GpuModule::alloc_heap`]), so its size costs nothing until used. A library
    /// embedder sizes its own ([`crate::HostBuilder::heap_bytes`]).
    pub fn process_heap_bytes(&self) -> Result<u64> {
        Ok((self.memory_free()? / 2).min(hostcall_abi::HEAP_MAX_BYTES))
    }

    fn global(&self, name: &str) -> Result<(sys::CUdeviceptr, usize)> {
        let c = CString::new(name).map_err(|_| Error::MissingSymbol(name.into()))?;
        // SAFETY: `self.module` is loaded until drop.
        unsafe { cu::module::get_global(self.module, c) }
            .map_err(|_| Error::MissingSymbol(name.into()))
    }
}

impl GpuModule for CudaModule {
    fn describe(&self) -> String {
        format!("{} (sm_{})", self.name, self.sm)
    }

    fn stack_bytes(&self) -> Option<usize> {
        Some(self.stack_bytes)
    }

    /// 132 on an H100 SXM; `cargo gpu` sizes its launches by it.
    fn multiprocessors(&self) -> u32 {
        // SAFETY: `self.device` is a valid device handle.
        unsafe {
            cu::device::get_attribute(
                self.device,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
        }
        .map_or(0, |n| n.max(0) as u32)
    }

    fn bind_to_thread(&mut self) -> Result<()> {
        // SAFETY: the module owns a reference to its primary context until drop.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(|e| Error::cuda("cuCtxSetCurrent", e))
    }

    fn abi_version(&mut self) -> Result<u32> {
        let (ptr, size) = self.global(VERSION_SYMBOL)?;
        if size != 4 {
            return Err(Error::MissingSymbol(format!(
                "{VERSION_SYMBOL} of 4 bytes ({size} found)"
            )));
        }
        let mut v = [0u32];
        // SAFETY: `ptr` addresses the 4-byte global just looked up.
        unsafe { cu::memcpy_dtoh_sync(&mut v, ptr) }
            .map_err(|e| Error::cuda("reading the ABI version", e))?;
        Ok(v[0])
    }

    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMemory> {
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a plain allocation; freed in drop.
        let host =
            unsafe { cu::malloc_host(len, flags) }.map_err(|e| Error::cuda("cuMemHostAlloc", e))?;
        self.host_allocs.push(host);
        // SAFETY: `host` has `len` writable bytes.
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, len) };
        let mut device = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in the current context.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
        })?;
        Ok(HostMemory {
            host: host.cast(),
            device,
            len,
        })
    }

    fn alloc_device(&mut self, len: usize, zeroed: usize) -> Result<u64> {
        // SAFETY: a plain allocation, freed in drop; the memset covers a prefix of it.
        unsafe {
            let p = cu::malloc_sync(len.max(1)).map_err(|e| Error::cuda("cuMemAlloc", e))?;
            self.device_allocs.push(p);
            cu::memset_d8_sync(p, 0, zeroed.min(len)).map_err(|e| Error::cuda("cuMemsetD8", e))?;
            Ok(p)
        }
    }

    fn alloc_heap(&mut self, len: usize, zeroed: usize) -> Result<Arc<dyn DeviceHeap>> {
        // SAFETY: `self.device` is a valid device handle.
        if !unsafe { heap::supported(self.device) } {
            let base = self.alloc_device(len, zeroed)?;
            return Ok(Arc::new(WholeHeap {
                base,
                len: len as u64,
            }));
        }
        // SAFETY: the module's context is current (`bind_to_thread`) and its device's.
        let heap = Arc::new(unsafe {
            heap::ReservedHeap::new(self.ctx, self.device, len, zeroed, self.memory.clone())
        }?);
        self.heaps.push(heap.clone());
        Ok(heap)
    }

    fn end_launch(&mut self) {
        if self.running {
            // The kernel may still touch it: left until the module is dropped, which
            // leaves it to the driver as well.
            return;
        }
        self.deferred.push(Deferred {
            memory: std::mem::take(&mut self.memory),
            device: std::mem::take(&mut self.device_allocs),
            host: std::mem::take(&mut self.host_allocs),
            heaps: std::mem::take(&mut self.heaps),
        });
        let (idle, busy) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|d| d.memory.end());
        self.deferred = busy;
        for d in idle {
            // Errors are ignored: after a trap the context is unusable and every call
            // fails, and the run reports that fault.
            // SAFETY: allocated by this module for a launch that ended, which no kernel
            // reaches any more, and which no service copies out of: none is inside its
            // `LaunchMemory` and none may enter; each pointer is freed once.
            unsafe {
                for p in d.device {
                    let _ = cu::free_sync(p);
                }
                for p in d.host {
                    let _ = cu::free_host(p);
                }
                for h in d.heaps {
                    h.release();
                }
            }
        }
    }

    fn alloc_device_copy(&mut self, bytes: &[u8]) -> Result<u64> {
        let p = self.alloc_device_zeroed(bytes.len())?;
        // SAFETY: `p` is a fresh device allocation of `bytes.len()` bytes (at least one).
        unsafe { cu::memcpy_htod_sync(p, bytes) }.map_err(|e| Error::cuda("cuMemcpyHtoD", e))?;
        Ok(p)
    }

    fn write_config(&mut self, config: &DeviceConfig) -> Result<()> {
        let (ptr, size) = self.global(CONFIG_SYMBOL)?;
        if size != size_of::<DeviceConfig>() {
            return Err(Error::AbiMismatch {
                module: 0,
                host: hostcall_abi::ABI_VERSION,
            });
        }
        // SAFETY: `ptr` addresses the module's config global of exactly this size.
        unsafe { cu::memcpy_htod_sync(ptr, std::slice::from_ref(config)) }
            .map_err(|e| Error::cuda("writing the hostcall config", e))
    }

    fn service_slots(&mut self) -> Result<Vec<ModuleSlot>> {
        self.slots
            .clone()
            .into_iter()
            .map(|symbol| {
                let (ptr, size) = self.global(&symbol)?;
                let mut bytes = vec![0u8; size];
                // SAFETY: `ptr` addresses the module's global of `size` bytes.
                unsafe { cu::memcpy_dtoh_sync(&mut bytes, ptr) }
                    .map_err(|e| Error::cuda("reading a service slot", e))?;
                Ok(ModuleSlot { symbol, bytes })
            })
            .collect()
    }

    fn bind_service(&mut self, symbol: &str, id: u32) -> Result<()> {
        let (ptr, size) = self.global(symbol)?;
        if size < hostcall_abi::typed::SLOT_HEADER {
            return Err(Error::MissingSymbol(format!("{symbol} as a service slot")));
        }
        // SAFETY: `ptr` addresses the slot, whose first 4 bytes are its id; no launch
        // runs (ids are bound before each).
        unsafe { cu::memcpy_htod_sync(ptr, &[id]) }
            .map_err(|e| Error::cuda("writing a service id", e))
    }

    fn launch(&mut self, launch: &Launch) -> Result<()> {
        let name = CString::new(launch.kernel.as_str())
            .map_err(|_| Error::MissingSymbol(launch.kernel.clone()))?;
        // SAFETY: `self.module` is loaded until drop.
        let f = unsafe { cu::module::get_function(self.module, name) }
            .map_err(|_| Error::MissingSymbol(launch.kernel.clone()))?;
        let per_block: u32 = launch.block.iter().product();
        let limit = Self::limit_of(f)?;
        if per_block > limit.max_threads {
            return Err(Error::InvalidLaunch(format!(
                "{} takes at most {} threads per block ({} registers per thread), not {per_block}: \
                 launch smaller blocks, or build it with ptx-builder's max_threads_per_block",
                launch.kernel, limit.max_threads, limit.registers
            )));
        }
        let mut values = launch
            .args
            .iter()
            .map(|a| match a {
                KernelArg::U32(v) => Ok(*v as u64),
                KernelArg::U64(v) => Ok(*v),
                KernelArg::Stream(_) => Err(Error::InvalidLaunch(format!(
                    "{} is given a stream, which only Host::run can pass",
                    launch.kernel
                ))),
            })
            .collect::<Result<Vec<u64>>>()?;
        // Each pointer addresses a parameter's value; a u32 parameter reads the low 4
        // bytes of its u64 cell, which on this little-endian host hold the value.
        let mut params: Vec<*mut c_void> =
            values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        // SAFETY: `params` matches the kernel's parameters (the caller's launch), and the
        // driver copies the values before cuLaunchKernel returns.
        unsafe { cu::launch_kernel(f, (gx, gy, gz), (bx, by, bz), 0, self.stream, &mut params) }
            .map_err(|e| Error::cuda("cuLaunchKernel", e))?;
        self.running = true;
        self.kernel = launch.kernel.clone();
        Ok(())
    }

    fn device_memory(&self) -> std::sync::Arc<dyn DeviceMemory> {
        std::sync::Arc::new(CudaReader::new(self.ctx, self.memory.clone()))
    }

    fn still_running(&mut self) -> Result<Option<String>> {
        if self.running && self.poll()?.is_none() {
            return Ok(Some(self.kernel.clone()));
        }
        Ok(None)
    }

    fn poll(&mut self) -> Result<Option<LaunchEnd>> {
        // SAFETY: `self.stream` is a live stream of the current context.
        let r = unsafe { sys::cuStreamQuery(self.stream) };
        self.running = r == sys::CUresult::CUDA_ERROR_NOT_READY;
        Ok(match r {
            sys::CUresult::CUDA_SUCCESS => Some(LaunchEnd::Completed),
            sys::CUresult::CUDA_ERROR_NOT_READY => None,
            // A `trap` instruction (how `exit` and `abort` end a launch in which a thread
            // still runs) surfaces as an unspecified launch failure; everything else is
            // a fault of its own kind.
            sys::CUresult::CUDA_ERROR_LAUNCH_FAILED => {
                Some(LaunchEnd::Trapped(driver_message(&DriverError(r))))
            }
            sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS => {
                Some(LaunchEnd::IllegalAddress(driver_message(&DriverError(r))))
            }
            e => Some(LaunchEnd::Faulted(driver_message(&DriverError(e)))),
        })
    }
}

/// What a kernel's compiled form allows a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLimit {
    /// The most threads per block it can be launched with.
    pub max_threads: u32,
    /// Registers each of its threads uses.
    pub registers: u32,
}

impl CudaModule {
    /// The launch limits of `kernel` as compiled for this device.
    pub fn kernel_limit(&self, kernel: &str) -> Result<KernelLimit> {
        let name = CString::new(kernel).map_err(|_| Error::MissingSymbol(kernel.into()))?;
        // SAFETY: `self.module` is loaded until drop.
        let f = unsafe { cu::module::get_function(self.module, name) }
            .map_err(|_| Error::MissingSymbol(kernel.into()))?;
        Self::limit_of(f)
    }

    fn limit_of(f: sys::CUfunction) -> Result<KernelLimit> {
        use sys::CUfunction_attribute_enum as A;
        // SAFETY: `f` is a function of this loaded module.
        let attr = |a| unsafe { cu::function::get_function_attribute(f, a) };
        let (max, regs) = attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
            .and_then(|m| Ok((m, attr(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?)))
            .map_err(|e| Error::cuda("cuFuncGetAttribute", e))?;
        Ok(KernelLimit {
            max_threads: max as u32,
            registers: regs as u32,
        })
    }
}

// SAFETY: the handles are the driver's, which is thread-safe; what a thread does with
// them needs the module's context current on it, which `bind_to_thread` makes so, and
// `Host::run` calls it first. `&mut self` keeps two threads from driving one module.
unsafe impl Send for CudaModule {}

impl Drop for CudaModule {
    fn drop(&mut self) {
        // SAFETY: as in `bind_to_thread`; a module dropped on another thread than the one
        // that ran it frees its memory in its own context.
        let _ = unsafe { cu::ctx::set_current(self.ctx) };
        if self.running {
            // Freeing memory or unloading the module waits for the kernel, which may
            // never end (a timed-out kernel that does not call the host). Leave it all
            // to the driver, which reclaims it when the process exits.
            log::warn!(
                "a kernel is still running on {}: its module and memory are left for the driver to reclaim at exit",
                self.name
            );
            return;
        }
        let freeing = Instant::now();
        self.end_launch();
        if !self.deferred.is_empty() {
            log::warn!(
                "a service still copies out of an ended launch's memory on {}: it is left for the driver to reclaim at exit",
                self.name
            );
        }
        // Errors are ignored: after a trap the context is unusable and every call fails,
        // and the process is about to report that fault anyway.
        // SAFETY: each handle was created by this module and is released once.
        unsafe {
            let _ = cu::stream::destroy(self.stream);
            let _ = cu::module::unload(self.module);
            let _ = cu::primary_ctx::release(self.device);
        }
        log::info!(
            "memory freed and context released in {:.2?}",
            freeing.elapsed()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_is_the_one_asked_for_else_the_modules_need_else_the_default() {
        assert_eq!(stack_for(None, None), DEFAULT_STACK_BYTES);
        assert_eq!(stack_for(None, Some(1024)), DEFAULT_STACK_BYTES);
        assert_eq!(stack_for(None, Some(43_000)), 43_000);
        assert_eq!(stack_for(Some(8192), Some(43_000)), 8192);
        assert_eq!(stack_for(Some(65_536), None), 65_536);
    }

    #[test]
    fn slot_symbols_are_found_in_ptx() {
        let ptx = ".visible .global .align 8 .b8 __HOSTCALL__Kv__get[61] = {0, 1};\n\
                   .visible .global .align 4 .u32 __hostcall_abi_version = 6;\n\
                   \tld.global.u32 %r1, [__HOSTCALL__Kv__get];\n";
        assert_eq!(slot_symbols(ptx), ["__HOSTCALL__Kv__get"]);
    }

    #[test]
    fn a_device_reaching_pageable_host_memory_is_refused_unless_allowed() {
        let refused = pageable_refusal("GH200", true, false).expect("refused");
        assert!(
            refused.to_string().contains("allow_pageable_access"),
            "{refused}"
        );
        assert!(pageable_refusal("GH200", true, true).is_none());
        assert!(pageable_refusal("H100", false, false).is_none());
    }
}
