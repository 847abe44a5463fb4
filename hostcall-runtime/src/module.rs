//! The backend interface: what the runtime needs from a GPU (or its emulation) to run
//! one launch while serving hostcalls.

use hostcall_abi::DeviceConfig;

use crate::Result;

/// One kernel parameter, passed by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelArg {
    /// A 32-bit parameter (`u32`/`i32` in the kernel's signature).
    U32(u32),
    /// A 64-bit parameter (`u64`/`i64`/pointer).
    U64(u64),
    /// A stream the host serves ([`crate::Host::stream`]): `Host::run` passes the
    /// address of its descriptor in the launch, a 64-bit parameter.
    Stream(crate::stream::StreamHandle),
}

/// A kernel launch: entry point, grid and block shapes, parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The kernel's symbol name.
    pub kernel: String,
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Parameters, in the kernel's order.
    pub args: Vec<KernelArg>,
}

impl Launch {
    /// A one-dimensional launch of `blocks` blocks of `threads` threads.
    pub fn linear(kernel: &str, blocks: u32, threads: u32, args: Vec<KernelArg>) -> Launch {
        Launch {
            kernel: kernel.to_owned(),
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
            args,
        }
    }

    /// Threads in the whole launch.
    pub fn threads(&self) -> u64 {
        self.grid
            .iter()
            .chain(&self.block)
            .map(|&d| d as u64)
            .product()
    }
}

/// How a launch ended, as the backend saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchEnd {
    /// Every thread returned.
    Completed,
    /// A thread trapped (`exit` and `abort` end the launch that way, after telling the
    /// host).
    Trapped(String),
    /// The launch stopped with another error (an illegal address, ...).
    Faulted(String),
}

/// Host memory the GPU can address (host-pinned and mapped, for CUDA).
#[derive(Clone, Copy, Debug)]
pub struct HostMemory {
    /// Where the host sees it.
    pub host: *mut u8,
    /// Where the GPU sees it.
    pub device: u64,
    /// Bytes.
    pub len: usize,
}

/// Why [`DeviceMemory::stream`] stopped before the end.
#[derive(Debug)]
pub enum StreamStop {
    /// Copying out of device memory failed (a bad address, a dead context).
    Copy(String),
    /// The sink refused a piece.
    Sink(std::io::Error),
}

/// Reads GPU global memory while a kernel runs (for services that take a device address
/// instead of bulk bytes, such as `WriteFromDevice`).
pub trait DeviceMemory: Send + Sync {
    /// Copies `len` bytes from device address `addr` to the host, handing them to `sink`
    /// in order, in pieces of the implementation's choosing. Returns the bytes `sink`
    /// took, and why it stopped early, if it did.
    fn stream(
        &self,
        addr: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> (u64, Option<StreamStop>);
}

/// One declared service's slot in a module (`hostcall_abi::typed::ServiceSlot`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleSlot {
    /// Its symbol (`__HOSTCALL__Trait__method`), or, in an emulated module, the
    /// service's name.
    pub symbol: String,
    /// Its bytes as the module holds them.
    pub bytes: Vec<u8>,
}

/// A loaded GPU module that can run kernels. Allocations live as long as the module.
pub trait GpuModule {
    /// The device, for messages and reports.
    fn describe(&self) -> String;
    /// Each GPU thread's stack, where the module sets one: a launch that traps with no
    /// thread having asked to end most likely overflowed it, and the run says so.
    fn stack_bytes(&self) -> Option<usize> {
        None
    }
    /// Makes the calling thread ready to drive the module: a module moved to another
    /// thread (one per GPU in `Host::run_all`) is bound to it before anything else.
    fn bind_to_thread(&mut self) -> Result<()> {
        Ok(())
    }
    /// The module's `__hostcall_abi_version`.
    fn abi_version(&mut self) -> Result<u32>;
    /// Zeroed host memory the GPU can address, aligned to 4096 bytes.
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMemory>;
    /// Zeroed device memory, aligned to 256 bytes; returns its device address.
    fn alloc_device_zeroed(&mut self, len: usize) -> Result<u64>;
    /// Device memory holding `bytes`, aligned to 256 bytes; returns its device address.
    /// For what every GPU thread reads (a host-pinned word costs each reader a PCIe
    /// round trip).
    fn alloc_device_copy(&mut self, bytes: &[u8]) -> Result<u64>;
    /// Writes the module's `__hostcall_config` global.
    fn write_config(&mut self, config: &DeviceConfig) -> Result<()>;
    /// Starts the kernel; returns at once.
    fn launch(&mut self, launch: &Launch) -> Result<()>;
    /// A handle the server threads use to read device memory during a launch.
    fn device_memory(&self) -> std::sync::Arc<dyn DeviceMemory>;
    /// Whether the last launch has ended; never blocks.
    fn poll(&mut self) -> Result<Option<LaunchEnd>>;
    /// The slots of the declared services its kernels call.
    fn service_slots(&mut self) -> Result<Vec<ModuleSlot>>;
    /// Writes service id `id` into the slot `symbol` (one of [`GpuModule::service_slots`]).
    fn bind_service(&mut self, symbol: &str, id: u32) -> Result<()>;
}
