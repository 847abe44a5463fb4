//! Per-GPU-thread state (errno, pthread keys) and the futex std's locks are built on.
//!
//! Each GPU thread owns the `ThreadArea` at its global linear index, zeroed by the host
//! before the launch. Keys are process-wide numbers handed out by one counter.

use core::ffi::{c_int, c_long, c_uint, c_void};
use core::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use hostcall_abi::errno::{EAGAIN, EINVAL, ENOSYS, ETIMEDOUT};
use hostcall_abi::{MAX_KEYS, ThreadArea};
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

pub(crate) fn set_errno(e: i32) {
    // SAFETY: a thread's area is touched only by that thread.
    unsafe { (*area()).errno = e };
}

#[unsafe(no_mangle)]
pub extern "C" fn __errno_location() -> *mut c_int {
    // SAFETY: in bounds of this thread's own area.
    unsafe { &raw mut (*area()).errno }
}

/// Next key to hand out (keys start at 1, so 0 can mean "no key" to callers).
static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

/// Destructors are not run: GPU threads end with the kernel, and std only uses them to
/// free thread-local values, which the heap reclaims with the launch.
///
/// # Safety
/// `key` must be valid for writing a `c_uint`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_key_create(
    key: *mut c_uint,
    _destructor: Option<unsafe extern "C" fn(*mut c_void)>,
) -> c_int {
    let k = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    if k as usize > MAX_KEYS {
        return EAGAIN;
    }
    // SAFETY: the caller's contract.
    unsafe { key.write(k) };
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_key_delete(_key: c_uint) -> c_int {
    0
}

fn key_slot(key: c_uint) -> Option<*mut u64> {
    let i = (key as usize).checked_sub(1).filter(|&i| i < MAX_KEYS)?;
    // SAFETY: `i < MAX_KEYS`, in bounds of this thread's own area.
    Some(unsafe { (&raw mut (*area()).keys).cast::<u64>().add(i) })
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_getspecific(key: c_uint) -> *mut c_void {
    match key_slot(key) {
        // SAFETY: this thread's own slot.
        Some(slot) => unsafe { slot.read() as *mut c_void },
        None => core::ptr::null_mut(),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int {
    match key_slot(key) {
        Some(slot) => {
            // SAFETY: this thread's own slot.
            unsafe { slot.write(value as u64) };
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
