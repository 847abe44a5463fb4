//! Per-GPU-thread state (errno, pthread keys) and the futex std's locks are built on.
//!
//! Each GPU thread owns the `ThreadArea` at its global linear index, zeroed by the host
//! before the launch. Keys are process-wide numbers handed out by one counter.

use core::ffi::{c_int, c_long, c_uint, c_void};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use hostcall_abi::errno::{EAGAIN, EINVAL, ENOSYS, ETIMEDOUT};
use hostcall_abi::{CACHED_CLASSES, MAX_KEYS, ThreadArea};
use hostcall_client::Platform;

use crate::{Nvptx, config, time};

/// This thread's area. Traps if the host sized the area for fewer threads (a runtime bug).
fn area() -> *mut ThreadArea {
    let c = config();
    let id = Nvptx::global_thread();
    if id >= c.thread_capacity {
        Nvptx::trap();
    }
    // SAFETY: `id < thread_capacity`, the number of areas the host allocated.
    unsafe { (c.thread_area as *mut ThreadArea).add(id as usize) }
}

/// This thread's cached free block of heap class `class`, if that class is cached.
pub(crate) fn heap_cache(class: usize) -> Option<ThreadSlot> {
    (class < CACHED_CLASSES).then(|| {
        // SAFETY: `class < CACHED_CLASSES`, in bounds of this thread's own area.
        ThreadSlot(unsafe { (&raw mut (*area()).heap_cache).cast::<u64>().add(class) })
    })
}

/// A word of the calling thread's own `ThreadArea`, which no other thread touches.
pub(crate) struct ThreadSlot(*mut u64);

impl ThreadSlot {
    pub(crate) fn get(&self) -> u64 {
        // SAFETY: the slot is this thread's alone (see `area`).
        unsafe { self.0.read() }
    }

    /// # Safety
    /// The value must be what the slot's owner (the heap) expects it to hold.
    pub(crate) unsafe fn set(&self, v: u64) {
        // SAFETY: the slot is this thread's alone (see `area`).
        unsafe { self.0.write(v) }
    }

    /// # Safety
    /// As for `set`.
    pub(crate) unsafe fn replace(&self, v: u64) -> u64 {
        let old = self.get();
        // SAFETY: the caller's contract.
        unsafe { self.set(v) };
        old
    }
}

pub(crate) fn set_errno(e: i32) {
    // SAFETY: a thread's area is touched only by that thread.
    unsafe { (*area()).errno = e };
}

#[unsafe(no_mangle)]
pub extern "C" fn __errno_location() -> *mut c_int {
    // SAFETY: in bounds of this thread's own area.
    unsafe { &raw mut (*area()).errno }
}

/// Bit `k` set: key `k` (1..=MAX_KEYS) is allocated.
static KEYS_USED: AtomicU64 = AtomicU64::new(0);
/// Per key, bumped on every allocation so that values from a previous owner of a
/// recycled key read as NULL (POSIX: a new key is NULL in every thread).
static KEY_GENS: [AtomicU32; MAX_KEYS + 1] = [const { AtomicU32::new(0) }; MAX_KEYS + 1];

/// Takes a free key. std creates keys lazily and racing threads each create one, the
/// losers deleting theirs at once; so when all keys are taken this waits for one to be
/// freed rather than failing (std aborts on failure). Destructors are not run: GPU
/// threads end with the kernel, and the heap is reclaimed with the launch.
///
/// # Safety
/// `key` must be valid for writing a `c_uint`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_key_create(
    key: *mut c_uint,
    _destructor: Option<unsafe extern "C" fn(*mut c_void)>,
) -> c_int {
    let all: u64 = ((1u64 << MAX_KEYS) - 1) << 1;
    let mut backoff = 64;
    let k = loop {
        let used = KEYS_USED.load(Ordering::Relaxed);
        let free = !used & all;
        if free == 0 {
            Nvptx::nanosleep(backoff);
            backoff = (backoff * 2).min(4096);
            continue;
        }
        let k = free.trailing_zeros();
        if KEYS_USED
            .compare_exchange_weak(used, used | 1 << k, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            break k;
        }
    };
    KEY_GENS[k as usize].fetch_add(1, Ordering::Release);
    // SAFETY: the caller's contract.
    unsafe { key.write(k) };
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_key_delete(key: c_uint) -> c_int {
    if key == 0 || key as usize > MAX_KEYS {
        return EINVAL;
    }
    KEYS_USED.fetch_and(!(1u64 << key), Ordering::AcqRel);
    0
}

/// This thread's value and generation slots for `key`.
fn key_slot(key: c_uint) -> Option<(*mut u64, *mut u32)> {
    let i = (key as usize).checked_sub(1).filter(|&i| i < MAX_KEYS)?;
    let a = area();
    // SAFETY: `i < MAX_KEYS`, in bounds of this thread's own area.
    Some(unsafe {
        (
            (&raw mut (*a).keys).cast::<u64>().add(i),
            (&raw mut (*a).key_gens).cast::<u32>().add(i),
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_getspecific(key: c_uint) -> *mut c_void {
    match key_slot(key) {
        // SAFETY: this thread's own slots.
        Some((value, generation))
            if unsafe { generation.read() } == KEY_GENS[key as usize].load(Ordering::Acquire) =>
        {
            // SAFETY: as above.
            unsafe { value.read() as *mut c_void }
        }
        _ => core::ptr::null_mut(),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int {
    match key_slot(key) {
        Some((slot, generation)) => {
            // SAFETY: this thread's own slots.
            unsafe {
                slot.write(value as u64);
                generation.write(KEY_GENS[key as usize].load(Ordering::Acquire));
            }
            0
        }
        None => EINVAL,
    }
}

/// A positive id unique to this GPU thread within the launch.
#[unsafe(no_mangle)]
pub extern "C" fn gettid() -> c_int {
    (Nvptx::global_thread() + 1) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn sched_yield() -> c_int {
    Nvptx::nanosleep(100);
    0
}

const SYS_FUTEX: c_long = 202;
const FUTEX_WAIT: c_int = 0;
const FUTEX_WAKE: c_int = 1;
const FUTEX_WAIT_BITSET: c_int = 9;
const FUTEX_WAKE_BITSET: c_int = 10;
/// Drops FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME.
const FUTEX_CMD_MASK: c_int = 0x7f;

/// How long one `FUTEX_WAIT` sleeps before returning (a spurious wake-up, which every
/// futex user must tolerate): waiters poll instead of being woken, so `FUTEX_WAKE` has
/// nothing to do.
const WAIT_SLICE_NS: u32 = 500;

/// Only `SYS_futex` is served; any other number fails with `ENOSYS`.
///
/// # Safety
/// For `SYS_futex`, the arguments must be those of the Linux system call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(num: c_long, mut args: ...) -> c_long {
    if num != SYS_FUTEX {
        set_errno(ENOSYS);
        return -1;
    }
    // SAFETY: SYS_futex's callers pass at least (uaddr, op, val, timeout).
    let (uaddr, op, val, timeout) = unsafe {
        (
            args.next_arg::<*const AtomicI32>(),
            args.next_arg::<c_int>(),
            args.next_arg::<c_int>(),
            args.next_arg::<*const time::Timespec>(),
        )
    };
    match op & FUTEX_CMD_MASK {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            // SAFETY: the caller passes a valid futex word.
            if unsafe { (*uaddr).load(Ordering::Acquire) } != val {
                set_errno(EAGAIN);
                return -1;
            }
            Nvptx::nanosleep(WAIT_SLICE_NS);
            // An absolute (WAIT_BITSET) or relative (WAIT) deadline: report expiry only
            // for the absolute form, where it is cheap to tell; early return is allowed.
            if op & FUTEX_CMD_MASK == FUTEX_WAIT_BITSET
                && !timeout.is_null()
                // SAFETY: non-null timeouts point to a timespec (the caller's contract).
                && unsafe { time::expired(&*timeout) }
            {
                set_errno(ETIMEDOUT);
                return -1;
            }
            0
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => 0,
        _ => {
            set_errno(ENOSYS);
            -1
        }
    }
}
