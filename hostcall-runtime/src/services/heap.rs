//! std's `Memory` service: the device heap grows as the GPU's allocator reaches the end
//! of what is mapped (`hostcall_abi::LaunchState::heap_mapped`).

use std::sync::Arc;

use hostcall_abi::errno::{EINVAL, ENOMEM};
use hostcall_abi::std_services::Memory;
use hostcall_abi::typed::Errno;

use crate::module::{DeviceHeap, HeapRefused};

/// The launch's heap, as std's `Memory` trait serves it.
pub(crate) struct HeapService(pub(crate) Arc<dyn DeviceHeap>);

impl Memory for HeapService {
    fn grow_heap(&self, to: u64) -> Result<u64, Errno> {
        self.0.grow(to).map_err(|e| {
            log::warn!("the device heap did not grow to {to} bytes: {e}");
            Errno(match e {
                HeapRefused::PastEnd { .. } => EINVAL,
                HeapRefused::NoMemory(_) => ENOMEM,
            })
        })
    }
}
