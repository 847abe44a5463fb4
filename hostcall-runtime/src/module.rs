//! The backend interface: what the runtime needs from a GPU (or its emulation) to run
//! one launch while serving hostcalls.

use std::sync::Arc;

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
    Stream(StreamHandle),
}

/// A stream the host serves ([`crate::stream`]): a kernel gets it as
/// `KernelArg::Stream(handle)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamHandle(pub(crate) u32);

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
    /// Every thread returned or exited (as a binary's threads do when its `exit` finds
    /// them all parked or waiting: libc-hostcall's `ending`).
    Completed,
    /// A thread trapped (`exit` and `abort` end the launch that way, after telling the
    /// host, when a thread still runs).
    Trapped(String),
    /// The launch touched memory that nothing holds (`CUDA_ERROR_ILLEGAL_ADDRESS`): a bad
    /// pointer in unsafe code, or a thread's stack overflowing.
    IllegalAddress(String),
    /// The launch stopped with another error (a misaligned address, ...).
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
/// instead of bulk bytes, such as `Fs.write_from_device`).
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

    /// Copies `data` into device memory at `addr` (what `Fs.read_to_device` read),
    /// returning once the bytes are there; fails, naming why, when the range is not the
    /// launch's memory or the launch has ended.
    fn fill(&self, addr: u64, data: &[u8]) -> Result<(), String>;
}

/// A launch's device heap: a range of device addresses of which a prefix is backed by
/// memory, grown on the GPU's request (`Memory::grow_heap`) so that a process pays for
/// the memory its program touches, not for the whole range at its start and end.
pub trait DeviceHeap: Send + Sync {
    /// The device address of its first byte.
    fn base(&self) -> u64;
    /// Bytes from the base backed by memory now.
    fn mapped(&self) -> u64;
    /// Backs at least the first `to` bytes (at most the heap's length) with memory,
    /// returning once the GPU can use them; returns the bytes backed now.
    fn grow(&self, to: u64) -> std::result::Result<u64, HeapRefused>;
}

/// Why a heap did not grow.
#[derive(Debug, thiserror::Error)]
pub enum HeapRefused {
    /// Past the heap's reserved range.
    #[error("{asked} bytes asked of a heap of {len}")]
    PastEnd {
        /// Bytes asked for.
        asked: u64,
        /// The heap's length.
        len: u64,
    },
    /// The launch ended, or the device has no memory left: the driver's words.
    #[error("{0}")]
    NoMemory(String),
}

impl HeapRefused {
    /// Refuses `asked` bytes of a heap of `len`, as every heap does first.
    pub fn past_end(asked: u64, len: u64) -> std::result::Result<(), HeapRefused> {
        if asked > len {
            return Err(HeapRefused::PastEnd { asked, len });
        }
        Ok(())
    }
}

/// A heap allocated whole: nothing to grow.
pub(crate) struct WholeHeap {
    pub(crate) base: u64,
    pub(crate) len: u64,
}

impl DeviceHeap for WholeHeap {
    fn base(&self) -> u64 {
        self.base
    }

    fn mapped(&self) -> u64 {
        self.len
    }

    fn grow(&self, to: u64) -> std::result::Result<u64, HeapRefused> {
        HeapRefused::past_end(to, self.len)?;
        Ok(self.len)
    }
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

/// A loaded GPU module that can run kernels. A launch's allocations live until it ends
/// ([`GpuModule::end_launch`]).
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
    /// The device's streaming multiprocessors, 0 where unknown (an emulated device):
    /// the GPU's `available_parallelism` follows it (`hostcall_abi::spawn::processors`).
    fn multiprocessors(&self) -> u32 {
        0
    }
    /// The module's `__hostcall_abi_version`.
    fn abi_version(&mut self) -> Result<u32>;
    /// Zeroed host memory the GPU can address, aligned to 4096 bytes, for the launch
    /// about to start: it lives until [`GpuModule::end_launch`].
    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMemory>;
    /// Device memory, aligned to 256 bytes, for the launch about to start (until
    /// [`GpuModule::end_launch`]), of which the first `zeroed` bytes are zeroed: the
    /// heap needs only its allocator's state zeroed, and zeroing tens of GiB costs a
    /// start-up tens of milliseconds. Returns its device address.
    fn alloc_device(&mut self, len: usize, zeroed: usize) -> Result<u64>;
    /// The launch's device heap of `len` bytes (until [`GpuModule::end_launch`]), its
    /// first `zeroed` bytes zeroed. By default allocated whole; a module that can map
    /// memory into a reserved range while its kernel runs maps only a first part, and
    /// the rest as the GPU asks ([`DeviceHeap`]).
    fn alloc_heap(&mut self, len: usize, zeroed: usize) -> Result<Arc<dyn DeviceHeap>> {
        let base = self.alloc_device(len, zeroed)?;
        Ok(Arc::new(WholeHeap {
            base,
            len: len as u64,
        }))
    }
    /// [`GpuModule::alloc_device`] with every byte zeroed.
    fn alloc_device_zeroed(&mut self, len: usize) -> Result<u64> {
        self.alloc_device(len, len)
    }
    /// Frees what the `alloc_*` calls gave the launch that ended, once the host is done
    /// with it, so that a module launched many times holds one launch's memory at most.
    /// A module whose kernel may still run (stopped at its time limit, say) keeps it.
    fn end_launch(&mut self);
    /// Device memory holding `bytes`, aligned to 256 bytes; returns its device address.
    /// For what every GPU thread reads (a host-pinned word costs each reader a PCIe
    /// round trip).
    fn alloc_device_copy(&mut self, bytes: &[u8]) -> Result<u64>;
    /// Writes the module's `__hostcall_config` global.
    fn write_config(&mut self, config: &DeviceConfig) -> Result<()>;
    /// Starts the kernel; returns at once.
    fn launch(&mut self, launch: &Launch) -> Result<()>;
    /// A handle the server threads use to read device memory during a launch.
    fn device_memory(&self) -> Arc<dyn DeviceMemory>;
    /// Whether the last launch has ended; never blocks.
    fn poll(&mut self) -> Result<Option<LaunchEnd>>;
    /// The kernel of the last launch, if it may still run: stopped at its time limit, a
    /// kernel that never calls the host runs on. Another launch on the module is refused
    /// until it has ended, since it would rewrite the configuration and the service ids
    /// the running kernel reads.
    fn still_running(&mut self) -> Result<Option<String>>;
    /// The slots of the declared services its kernels call.
    fn service_slots(&mut self) -> Result<Vec<ModuleSlot>>;
    /// Writes service id `id` into the slot `symbol` (one of [`GpuModule::service_slots`]).
    fn bind_service(&mut self, symbol: &str, id: u32) -> Result<()>;
}

/// Whether one launch's memory may still be read, shared by the module and the readers
/// of its device memory ([`GpuModule::device_memory`]). A service may outlive its
/// launch (a blocking job stuck on a FIFO), so a reader enters before each copy and
/// leaves after it, and the module frees the memory only once none is inside; a reader
/// that comes after the launch ended copies nothing.
#[derive(Debug, Default)]
pub struct LaunchMemory {
    ended: std::sync::atomic::AtomicBool,
    copying: std::sync::atomic::AtomicUsize,
}

impl LaunchMemory {
    /// Starts a copy out of the launch's memory; `None` once the launch has ended.
    pub fn enter(&self) -> Option<Copying<'_>> {
        use std::sync::atomic::Ordering::SeqCst;
        // SeqCst on both sides: a reader that counted itself in before the module marked
        // the end is seen by `end`, and one that counted itself in after sees the mark.
        self.copying.fetch_add(1, SeqCst);
        if self.ended.load(SeqCst) {
            self.copying.fetch_sub(1, SeqCst);
            return None;
        }
        Some(Copying(self))
    }

    /// Marks the launch ended; whether its memory may be freed now (no copy inside).
    pub fn end(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.ended.store(true, SeqCst);
        self.idle()
    }

    /// Whether no copy is inside.
    pub fn idle(&self) -> bool {
        self.copying.load(std::sync::atomic::Ordering::SeqCst) == 0
    }
}

/// A copy in progress out of a launch's memory (see [`LaunchMemory::enter`]).
pub struct Copying<'a>(&'a LaunchMemory);

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        self.0
            .copying
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_memory_is_freed_only_with_no_copy_inside_and_refuses_copies_after() {
        let m = LaunchMemory::default();
        let copying = m.enter().expect("the launch runs");
        assert!(!m.end(), "a copy is inside: not yet");
        assert!(m.enter().is_none(), "no copy starts after the end");
        drop(copying);
        assert!(m.idle() && m.end());
    }
}
