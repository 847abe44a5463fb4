//! Clocks from the GPU's `%globaltimer`; `CLOCK_REALTIME` adds an offset measured once
//! against the host's clock by hostcall.

use core::ffi::c_int;
use core::sync::atomic::{AtomicI64, Ordering::Relaxed};

use hostcall_abi::errno::EINVAL;
use hostcall_client::std_services::Time;

use crate::{Nvptx, errno::set_errno, host};

pub(crate) const CLOCK_REALTIME: c_int = 0;
pub(crate) const CLOCK_MONOTONIC: c_int = 1;
const CLOCK_PROCESS_CPUTIME_ID: c_int = 2;
const CLOCK_THREAD_CPUTIME_ID: c_int = 3;
const CLOCK_MONOTONIC_RAW: c_int = 4;
const CLOCK_REALTIME_COARSE: c_int = 5;
const CLOCK_MONOTONIC_COARSE: c_int = 6;
const CLOCK_BOOTTIME: c_int = 7;

/// x86_64 `struct timespec`.
#[repr(C)]
pub struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

impl Timespec {
    /// The time in nanoseconds (saturating).
    pub(crate) fn ns(&self) -> i64 {
        self.tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(self.tv_nsec)
    }
}

/// Realtime minus globaltimer, in ns; 0 until first measured.
static REALTIME_OFFSET: AtomicI64 = AtomicI64::new(0);

fn realtime_offset() -> i64 {
    let known = REALTIME_OFFSET.load(Relaxed);
    if known != 0 {
        return known;
    }
    let before = Nvptx::globaltimer_ns() as i64;
    let host = host::<dyn Time>().realtime();
    let after = Nvptx::globaltimer_ns() as i64;
    let offset = (host - before / 2 - after / 2) | 1;
    REALTIME_OFFSET.store(offset, Relaxed);
    offset
}

/// Nanoseconds on `clock`, or `None` for a clock the GPU does not have.
pub(crate) fn now_ns(clock: c_int) -> Option<i64> {
    let mono = Nvptx::globaltimer_ns() as i64;
    match clock {
        CLOCK_MONOTONIC
        | CLOCK_MONOTONIC_RAW
        | CLOCK_MONOTONIC_COARSE
        | CLOCK_BOOTTIME
        | CLOCK_PROCESS_CPUTIME_ID
        | CLOCK_THREAD_CPUTIME_ID => Some(mono),
        CLOCK_REALTIME | CLOCK_REALTIME_COARSE => Some(mono + realtime_offset()),
        _ => None,
    }
}

/// # Safety
/// `tp` must be valid for writing a `timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int {
    let Some(ns) = now_ns(clock) else {
        set_errno(EINVAL);
        return -1;
    };
    let ts = Timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000),
    };
    // SAFETY: the caller's contract.
    unsafe { tp.write(ts) };
    0
}

/// `TIMER_ABSTIME` of `clock_nanosleep`: `req` is a deadline, not a duration.
const TIMER_ABSTIME: c_int = 1;

/// Sleeps until `clock` reads `deadline_ns`, with the GPU's `nanosleep` (which may wake
/// early, so it loops on the clock).
fn sleep_until(clock: c_int, deadline_ns: i64) {
    while now_ns(clock).is_some_and(|now| now < deadline_ns) {
        crate::ending::check_point();
        <Nvptx as hostcall_client::Platform>::nanosleep(1_000_000);
    }
}

/// `*req` in nanoseconds, or `None` if it is not a valid `timespec`.
fn duration_ns(req: &Timespec) -> Option<i64> {
    let valid = (0..1_000_000_000).contains(&req.tv_nsec) && req.tv_sec >= 0;
    valid.then(|| {
        req.tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(req.tv_nsec)
    })
}

/// Sleeps for `*req` on `CLOCK_MONOTONIC`; never interrupted, so `rem` is not written.
///
/// # Safety
/// `req` must point to a valid `timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nanosleep(req: *const Timespec, _rem: *mut Timespec) -> c_int {
    // SAFETY: the caller's contract.
    let Some(ns) = duration_ns(unsafe { &*req }) else {
        set_errno(EINVAL);
        return -1;
    };
    // A sleep past the clock's end is one until its end (`Duration::MAX`, say).
    sleep_until(
        CLOCK_MONOTONIC,
        (Nvptx::globaltimer_ns() as i64).saturating_add(ns),
    );
    0
}

/// `std::thread::sleep`'s call: sleeps for `*req`, or until it as a deadline with
/// `TIMER_ABSTIME`, on `clock`. Returns an errno (0 on success), as POSIX says.
///
/// # Safety
/// `req` must point to a valid `timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_nanosleep(
    clock: c_int,
    flags: c_int,
    req: *const Timespec,
    _rem: *mut Timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(ns), Some(now)) = (duration_ns(unsafe { &*req }), now_ns(clock)) else {
        return EINVAL;
    };
    sleep_until(
        clock,
        if flags & TIMER_ABSTIME != 0 {
            ns
        } else {
            now.saturating_add(ns)
        },
    );
    0
}
