//! The device heap as a reserved range of addresses that is backed by memory chunk by
//! chunk as the GPU's allocator reaches the end of what is backed (CUDA's virtual memory
//! management: `cuMemAddressReserve` once, then `cuMemCreate`, `cuMemMap` and
//! `cuMemSetAccess` for each chunk). A process then pays for the memory its program
//! touches, not for half the GPU's at its start and end. Measured on an H100
//! (2026-11-27, five whole processes each): allocating 42 GiB with `cuMemAlloc` and
//! exiting took 383 ms (median), reserving it and backing 64 MiB 349 ms; backing a chunk
//! (64 MiB: 0.15 ms; 512 MiB: 0.35 ms) while a kernel runs does not wait for the kernel,
//! which uses the chunk as soon as the calls return.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::error::driver_message;
use crate::module::{DeviceHeap, HeapRefused, LaunchMemory};
use crate::{Error, Result};

/// Bytes backed at the launch: room for the main thread's frame stack and a program's
/// first allocations, without a request to the host.
const FIRST_BACKED: usize = 64 << 20;

/// The largest chunk one request backs: each request backs what it needs and at least
/// as much again as is backed (so a heap of N bytes takes about log2 N requests at
/// first), but no more than this (so a program does not hold much it never touches).
const CHUNK_MAX: usize = 1 << 30;

/// A heap of reserved addresses, backed from its start as far as asked.
pub(super) struct ReservedHeap {
    ctx: sys::CUcontext,
    device: sys::CUdevice,
    base: sys::CUdeviceptr,
    /// The heap's length, as the launch was told.
    len: u64,
    /// Addresses reserved: `len` rounded up to the granularity.
    reserved: usize,
    granularity: usize,
    /// Bytes backed from the base, read without the lock.
    backed: AtomicU64,
    /// Each chunk mapped, as (offset from the base, bytes), in order.
    chunks: Mutex<Vec<(usize, usize)>>,
    /// The launch's memory: a request after the launch ended backs nothing.
    memory: Arc<LaunchMemory>,
}

// SAFETY: a CUDA context handle may be used from any thread once made current there;
// the chunks are changed only under the mutex.
unsafe impl Send for ReservedHeap {}
// SAFETY: as for Send; each request makes the context current on its own thread.
unsafe impl Sync for ReservedHeap {}

/// Whether `device` can reserve addresses and map memory into them.
///
/// # Safety
/// `device` must be a valid device handle.
pub(super) unsafe fn supported(device: sys::CUdevice) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        cu::device::get_attribute(
            device,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        )
    }
    .is_ok_and(|v| v != 0)
}

impl ReservedHeap {
    /// Reserves `len` bytes of addresses and backs the first [`FIRST_BACKED`] (at least
    /// `zeroed`, which are zeroed), in the current context `ctx` of `device`.
    ///
    /// # Safety
    /// `ctx` must be current and belong to `device`.
    pub(super) unsafe fn new(
        ctx: sys::CUcontext,
        device: sys::CUdevice,
        len: usize,
        zeroed: usize,
        memory: Arc<LaunchMemory>,
    ) -> Result<ReservedHeap> {
        let mut granularity = 0;
        // SAFETY: `prop` describes device memory of `device`; the out-pointer is valid.
        super::check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &properties(device),
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
            )
        })?;
        let granularity = granularity.max(1);
        let reserved = len.max(1).div_ceil(granularity) * granularity;
        let mut base = 0;
        // SAFETY: reserves addresses only; freed by `release`.
        super::check("cuMemAddressReserve", unsafe {
            sys::cuMemAddressReserve(&mut base, reserved, 0, 0, 0)
        })?;
        let heap = ReservedHeap {
            ctx,
            device,
            base,
            len: len as u64,
            reserved,
            granularity,
            backed: AtomicU64::new(0),
            chunks: Mutex::new(Vec::new()),
            memory,
        };
        let first = FIRST_BACKED.max(zeroed).min(reserved);
        let backed = heap
            .back(
                &mut heap.chunks.lock().unwrap_or_else(|p| p.into_inner()),
                first,
            )
            .map_err(|e| Error::cuda("backing the device heap", e));
        // SAFETY: the first `zeroed` bytes were just backed (`first >= zeroed`).
        let zeroing = backed.and_then(|()| unsafe {
            cu::memset_d8_sync(base, 0, zeroed.min(len)).map_err(|e| Error::cuda("cuMemsetD8", e))
        });
        if let Err(e) = zeroing {
            // SAFETY: the reservation and chunks are this heap's, which nobody uses yet.
            unsafe { heap.release() };
            return Err(e);
        }
        Ok(heap)
    }

    /// Backs the bytes from what `chunks` holds to `to` (rounded up to the
    /// granularity), one chunk of memory mapped there with read and write access.
    fn back(
        &self,
        chunks: &mut Vec<(usize, usize)>,
        to: usize,
    ) -> std::result::Result<(), cudarc::driver::DriverError> {
        let start = chunks.last().map_or(0, |&(at, n)| at + n);
        if to <= start {
            return Ok(());
        }
        let size = (to - start).div_ceil(self.granularity) * self.granularity;
        let size = size.min(self.reserved - start);
        let mut handle = 0;
        // SAFETY: each call works on this heap's reservation, past what is mapped
        // (`start..start + size` lies inside it); the handle is released once mapped,
        // after which the mapping holds the memory until `release` unmaps it.
        unsafe {
            sys::cuMemCreate(&mut handle, size, &properties(self.device), 0).result()?;
            let mapped = sys::cuMemMap(self.base + start as u64, size, 0, handle, 0).result();
            let _ = sys::cuMemRelease(handle);
            mapped?;
            chunks.push((start, size));
            let access = sys::CUmemAccessDesc {
                location: properties(self.device).location,
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            sys::cuMemSetAccess(self.base + start as u64, size, &access, 1).result()?;
        }
        self.backed.store(
            (start + size).min(self.len as usize) as u64,
            Ordering::Release,
        );
        Ok(())
    }

    /// Unmaps every chunk and frees the reservation.
    ///
    /// # Safety
    /// No kernel may use the heap any more, nor any request grow it (its launch ended).
    pub(super) unsafe fn release(&self) {
        let chunks = std::mem::take(&mut *self.chunks.lock().unwrap_or_else(|p| p.into_inner()));
        // Errors are ignored: after a trap the context is unusable and every call fails,
        // and the run reports that fault.
        // SAFETY: the caller's contract; each chunk was mapped here and is unmapped once.
        unsafe {
            for (at, size) in chunks {
                let _ = sys::cuMemUnmap(self.base + at as u64, size);
            }
            let _ = sys::cuMemAddressFree(self.base, self.reserved);
        }
    }
}

impl DeviceHeap for ReservedHeap {
    fn base(&self) -> u64 {
        self.base
    }

    fn mapped(&self) -> u64 {
        self.backed.load(Ordering::Acquire)
    }

    fn grow(&self, to: u64) -> std::result::Result<u64, HeapRefused> {
        HeapRefused::past_end(to, self.len)?;
        if to <= self.mapped() {
            return Ok(self.mapped());
        }
        let Some(_inside) = self.memory.enter() else {
            return Err(HeapRefused::NoMemory("the launch has ended".into()));
        };
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let backed = self.mapped() as usize;
        if to as usize > backed {
            let at_least = backed + backed.min(CHUNK_MAX);
            // SAFETY: the module owns the context until it drops, after the launch.
            unsafe { cu::ctx::set_current(self.ctx) }
                .and_then(|()| self.back(&mut chunks, (to as usize).max(at_least)))
                .map_err(|e| HeapRefused::NoMemory(driver_message(&e)))?;
        }
        Ok(self.mapped())
    }
}

/// Device memory of `device`, as every chunk is made.
fn properties(device: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a C struct of integers, enums whose zero is a variant (`INVALID`,
    // `NONE`) and a null pointer: all zero is a valid value.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop
}
