//! The device heap: `malloc` and friends without any hostcall.
//!
//! Blocks come in power-of-two size classes (16 B .. 2^39 B). A GPU thread keeps the last
//! block it freed of each small class in its own `ThreadArea` and takes it back on its
//! next allocation of that class, so the common allocate/free pair touches no shared
//! state. Beyond that, each class has `SHARDS` lock-free free lists (Treiber stacks whose
//! heads carry a 32-bit tag against ABA); a thread uses the shard of its warp, so
//! thousands of threads do not all contend for one head. New blocks are cut from the heap
//! with one atomic add. A 16-byte header before each user pointer
//! records the block's class and where the block starts (so `posix_memalign` can hand out
//! a pointer past the block's start). Memory never leaves the heap, so a racing reader of
//! a stale list link reads heap bytes, and the tag makes its compare-exchange fail.

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{
    AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};

use hostcall_abi::errno::{EINVAL, ENOMEM, ENOSYS};
use hostcall_abi::std_services::Memory;
use hostcall_abi::{CACHED_CLASSES, HEAP_RESERVED, LaunchState};

use crate::{config, errno::set_errno, thread};

const UNIT: usize = 16;
const CLASSES: usize = 36;
const HEADER: usize = 16;
/// Free-list shards per class (a block freed by one warp is reused by warps of its shard).
const SHARDS: usize = 192;

/// The allocator's state, at the start of the heap (zeroed by the host).
#[repr(C)]
struct Control {
    /// Bytes handed out from the data region (which starts after `HEAP_RESERVED`).
    bump: AtomicU64,
    /// Per shard and class: `(tag << 32) | (block unit index + 1)`, or `tag << 32` when
    /// empty.
    free: [[AtomicU64; CLASSES]; SHARDS],
}

/// The calling thread's shard: by warp, so the lanes of a warp share one.
fn shard() -> usize {
    (crate::Nvptx::global_thread() / 32) as usize % SHARDS
}

const _: () = assert!(size_of::<Control>() <= HEAP_RESERVED);

struct Heap {
    control: &'static Control,
    data: *mut u8,
    capacity: u64,
    /// Bytes of the heap backed by memory, from its base (`LaunchState::heap_mapped`).
    backed: &'static AtomicU64,
}

#[inline(always)] // take_for_good calls it where no frame may be taken
fn heap() -> Heap {
    let c = config();
    Heap {
        // SAFETY: the host reserved and zeroed HEAP_RESERVED bytes at heap_base for this
        // struct, which is made of atomics only.
        control: unsafe { &*(c.heap_base as *const Control) },
        data: (c.heap_base as usize + HEAP_RESERVED) as *mut u8,
        capacity: c.heap_size.saturating_sub(HEAP_RESERVED as u64),
        // SAFETY: the host allocated the launch's LaunchState (atomics only) and set its
        // word to the bytes backed before the launch.
        backed: unsafe { &(*(c.launch_state as *const LaunchState)).heap_mapped },
    }
}

/// Smallest class whose blocks hold `bytes`.
fn class_for(bytes: usize) -> Option<usize> {
    let c = bytes.max(UNIT).next_power_of_two().trailing_zeros() as usize - 4;
    (c < CLASSES).then_some(c)
}

impl Heap {
    fn link(&self, unit: u64) -> &AtomicU64 {
        // SAFETY: `unit` indexes a block of the data region; its first word is its link
        // while it is free, and only ever accessed atomically as such.
        unsafe { &*(self.data.add(unit as usize * UNIT) as *const AtomicU64) }
    }

    fn pop(&self, class: usize) -> Option<*mut u8> {
        let head = &self.control.free[shard()][class];
        let mut cur = head.load(Acquire);
        loop {
            let unit = (cur & 0xffff_ffff).checked_sub(1)?;
            let next = self.link(unit).load(Relaxed) & 0xffff_ffff;
            let new = ((cur >> 32).wrapping_add(1) << 32) | next;
            match head.compare_exchange_weak(cur, new, AcqRel, Acquire) {
                // SAFETY: the unit lies in the data region (it came from `push`).
                Ok(_) => return Some(unsafe { self.data.add(unit as usize * UNIT) }),
                Err(now) => cur = now,
            }
        }
    }

    fn push(&self, class: usize, block: *mut u8) {
        let unit = (block as usize - self.data as usize) / UNIT;
        let head = &self.control.free[shard()][class];
        let mut cur = head.load(Relaxed);
        loop {
            self.link(unit as u64).store(cur & 0xffff_ffff, Relaxed);
            let new = ((cur >> 32).wrapping_add(1) << 32) | (unit as u64 + 1);
            match head.compare_exchange_weak(cur, new, AcqRel, Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    fn carve(&self, class: usize) -> Option<*mut u8> {
        self.cut((UNIT as u64) << class, true)
    }

    /// `bytes` (a multiple of [`UNIT`]) cut from the untouched end of the data region
    /// with one atomic add, or `None` past its end, or past what is backed by memory
    /// unless `grow` lets it ask the host for more ([`Heap::grow`]; a caller without a
    /// frame stack cannot call the host).
    #[inline(always)] // take_for_good calls it where no frame may be taken
    fn cut(&self, bytes: u64, grow: bool) -> Option<*mut u8> {
        let start = self.control.bump.fetch_add(bytes, Relaxed);
        let end = HEAP_RESERVED as u64 + start + bytes;
        let usable = start + bytes <= self.capacity
            && (end <= self.backed.load(Acquire) || grow && self.grow(end));
        // SAFETY: checked to lie within the data region.
        usable.then(|| unsafe { self.data.add(start as usize) })
    }

    /// Asks the host to back the heap's first `end` bytes (it maps them before it
    /// answers, so they are usable once the answer is read) and raises the word every
    /// thread looks at to what it says; false if the GPU has no memory left for them.
    #[cold]
    #[inline(never)]
    fn grow(&self, end: u64) -> bool {
        match crate::host::<dyn Memory>().grow_heap(end) {
            Ok(backed) => {
                self.backed.fetch_max(backed, Release);
                end <= backed
            }
            Err(_) => false,
        }
    }

    /// A pointer to `size` bytes aligned to `align` (a power of two), or null.
    fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        let slack = if align > UNIT { align } else { 0 };
        let Some(need) = size.checked_add(HEADER + slack) else {
            return null_mut();
        };
        let Some(class) = class_for(need) else {
            return null_mut();
        };
        let cached = thread::heap_cache(class).and_then(|c| {
            // SAFETY: this thread's own cache slot.
            let block = unsafe { c.replace(0) };
            (block != 0).then_some(block as *mut u8)
        });
        let Some(block) = cached
            .or_else(|| self.pop(class))
            .or_else(|| self.carve(class))
        else {
            return null_mut();
        };
        let user = (block as usize + HEADER).next_multiple_of(align.max(UNIT));
        let header = (user - HEADER) as *mut u32;
        // SAFETY: the header lies inside the block, before `user` (HEADER <= user - block).
        unsafe {
            header.write(class as u32);
            header.add(1).write((user - block as usize) as u32);
        }
        user as *mut u8
    }

    /// The class and block start of a pointer `alloc` returned.
    ///
    /// # Safety
    /// `p` must come from `alloc` and not have been freed.
    unsafe fn block_of(&self, p: *mut u8) -> (usize, *mut u8) {
        let header = (p as usize - HEADER) as *const u32;
        // SAFETY: `alloc` wrote the header there.
        let (class, offset) = unsafe { (header.read() as usize, header.add(1).read() as usize) };
        (class, (p as usize - offset) as *mut u8)
    }
}

/// `bytes` (a multiple of 16) cut from the heap for good, never freed: a GPU thread's
/// frame stack (`frames`). No free list, no thread cache, no frame of its own; only a
/// caller with a frame stack may `grow` the heap (see [`Heap::cut`]).
#[cfg(feature = "start")]
#[inline(always)] // frames.rs calls it where no frame may be taken
pub(crate) fn take_for_good(bytes: u64, grow: bool) -> Option<u64> {
    heap().cut(bytes, grow).map(|p| p as u64)
}

#[unsafe(no_mangle)]
pub extern "C" fn malloc(size: usize) -> *mut c_void {
    let p = heap().alloc(size, UNIT);
    if p.is_null() {
        set_errno(ENOMEM);
    }
    p.cast()
}

#[unsafe(no_mangle)]
pub extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        set_errno(ENOMEM);
        return null_mut();
    };
    let p = malloc(total);
    if !p.is_null() {
        // SAFETY: `p` has room for `total` bytes.
        unsafe { core::ptr::write_bytes(p.cast::<u8>(), 0, total) };
    }
    p
}

/// # Safety
/// `p` must be null or a live pointer from this heap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let h = heap();
    // SAFETY: the caller's contract.
    let (class, block) = unsafe { h.block_of(p.cast()) };
    if let Some(c) = thread::heap_cache(class)
        && c.get() == 0
    {
        // SAFETY: this thread's own cache slot.
        unsafe { c.set(block as u64) };
        return;
    }
    h.push(class, block);
}

const _: () = assert!(CACHED_CLASSES <= CLASSES);

/// # Safety
/// `p` must be null or a live pointer from this heap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return malloc(size);
    }
    let h = heap();
    // SAFETY: the caller's contract.
    let (class, block) = unsafe { h.block_of(p.cast()) };
    let room = (UNIT << class) - (p as usize - block as usize);
    if size <= room {
        return p;
    }
    let q = malloc(size);
    if !q.is_null() {
        // SAFETY: both blocks hold at least `room` bytes and are distinct.
        unsafe {
            core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), room);
            free(p);
        }
    }
    q
}

/// # Safety
/// `out` must be valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || align < size_of::<usize>() {
        return EINVAL;
    }
    let p = heap().alloc(size, align);
    if p.is_null() {
        return ENOMEM;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(p.cast()) };
    0
}

/// There is no virtual memory to map on the GPU: fails with `ENOSYS`.
#[unsafe(no_mangle)]
pub extern "C" fn mmap64(
    _addr: *mut c_void,
    _len: usize,
    _prot: c_int,
    _flags: c_int,
    _fd: c_int,
    _off: i64,
) -> *mut c_void {
    set_errno(ENOSYS);
    usize::MAX as *mut c_void
}

#[unsafe(no_mangle)]
pub extern "C" fn munmap(_addr: *mut c_void, _len: usize) -> c_int {
    set_errno(ENOSYS);
    -1
}
