//! A global allocator that counts the bytes allocated and not yet freed, for the test
//! binaries that measure the host's memory: each installs it as its own
//! (`#[global_allocator] static A: Counting = Counting;`) and reads [`live`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::AtomicIsize;
use std::sync::atomic::Ordering::Relaxed;

/// Bytes allocated and not yet freed, process-wide.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system allocator, counted.
pub struct Counting;

// SAFETY: every call goes to `System` unchanged; only the count is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Bytes allocated and not yet freed, where [`Counting`] is the global allocator.
pub fn live() -> isize {
    LIVE.load(Relaxed)
}
