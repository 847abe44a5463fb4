//! A heap backed in part, as a GPU's is ([`hostcall_runtime::DeviceHeap`]): host memory
//! allocated whole, of which only a prefix counts as backed until the program asks for
//! more, so that the runtime's side of the growth (the first backing the launch sees,
//! `Memory::grow_heap`) runs in CI.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hostcall_runtime::{DeviceHeap, HeapRefused};

/// Bytes a request backs at once, at least: a page, as a driver's granularity.
const STEP: u64 = 4096;

/// The emulated heap: `backed` of `len` bytes from `base`.
pub(crate) struct PartlyBacked {
    pub(crate) base: u64,
    pub(crate) len: u64,
    pub(crate) backed: AtomicU64,
    /// Requests that backed more.
    pub(crate) grown: AtomicUsize,
}

impl DeviceHeap for PartlyBacked {
    fn base(&self) -> u64 {
        self.base
    }

    fn mapped(&self) -> u64 {
        self.backed.load(Ordering::Acquire)
    }

    fn grow(&self, to: u64) -> Result<u64, HeapRefused> {
        HeapRefused::past_end(to, self.len)?;
        let to = to.next_multiple_of(STEP).min(self.len);
        if self.backed.fetch_max(to, Ordering::AcqRel) < to {
            self.grown.fetch_add(1, Ordering::Relaxed);
        }
        Ok(self.mapped())
    }
}
