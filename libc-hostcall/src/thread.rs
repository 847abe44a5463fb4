//! Per-GPU-thread state (errno, pthread keys) and the futex std's locks are built on.
//!
//! Each GPU thread owns the `ThreadArea` at its global linear index, zeroed by the host
//! before the launch. Keys are process-wide numbers handed out by one counter.

use core::ffi::{c_int, c_long, c_uint, c_void};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use hostcall_abi::errno::{EAGAIN, EDEADLK, EINVAL, ENOSYS, ERANGE, ESRCH, ETIMEDOUT};
use hostcall_abi::{CACHED_CLASSES, MAX_KEYS};
use hostcall_client::Platform;
use hostcall_client::spawn::{Give, Slot};

use crate::area::{area, held_back, slot_at, thread_of, worker};
use crate::errno::set_errno;
use crate::{Nvptx, config, time};

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

/// Bit `k` set: key `k` (1..=MAX_KEYS) is allocated.
static KEYS_USED: AtomicU64 = AtomicU64::new(0);
/// Per key, bumped on every allocation so that values from a previous owner of a
/// recycled key read as NULL (POSIX: a new key is NULL in every thread).
static KEY_GENS: [AtomicU32; MAX_KEYS + 1] = [const { AtomicU32::new(0) }; MAX_KEYS + 1];

/// Per key, its destructor (a function address, 0 for none).
static KEY_DTORS: [AtomicU64; MAX_KEYS + 1] = [const { AtomicU64::new(0) }; MAX_KEYS + 1];

/// Bit `k` set: key `k` has a destructor, so a thread's end looks at its value. A
/// thread's end visits these keys only, not all `MAX_KEYS`: each look is a load from
/// global memory, and visiting every key cost each joined thread about 100 µs on an
/// H100 (the body's end to `join`'s return: 120 µs against 11 on the CPU).
static KEYS_WITH_DTORS: AtomicU64 = AtomicU64::new(0);

/// Takes a free key. std creates keys lazily and racing threads each create one, the
/// losers deleting theirs at once; so when all keys are taken this waits for one to be
/// freed rather than failing (std aborts on failure). Destructors run when the
/// thread's kernel ends ([`__hostcall_thread_exit`]).
///
/// # Safety
/// `key` must be valid for writing a `c_uint`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_key_create(
    key: *mut c_uint,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
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
    KEY_DTORS[k as usize].store(
        destructor.map_or(0, |d| d as usize as u64),
        Ordering::Relaxed,
    );
    if destructor.is_some() {
        // Release: a thread's end that sees the bit sees the destructor.
        KEYS_WITH_DTORS.fetch_or(1 << k, Ordering::Release);
    }
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
    KEYS_WITH_DTORS.fetch_and(!(1u64 << key), Ordering::Relaxed);
    KEY_DTORS[key as usize].store(0, Ordering::Relaxed);
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
            if !value.is_null() && KEY_DTORS[key as usize].load(Ordering::Relaxed) != 0 {
                crate::launch_state()
                    .tls_destructors
                    .store(1, Ordering::Relaxed);
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
    crate::ending::check_point();
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
const FUTEX_CLOCK_REALTIME: c_int = 256;

/// First and longest pause between two looks at a waited-on futex word: waiters poll
/// instead of being woken (there is no wait queue), so `FUTEX_WAKE` has nothing to do.
const WAIT_FIRST_NS: u32 = 500;
const WAIT_MAX_NS: u32 = 32_000;

/// Waits while `*word == val`, until `deadline` (nanoseconds on a clock) if given.
/// Returns 0 once the word changed (std's futex users change it before waking), or
/// `ETIMEDOUT` at the deadline, as Linux's `FUTEX_WAIT` does.
fn futex_wait(word: &AtomicI32, val: c_int, deadline: Option<(c_int, i64)>) -> c_long {
    let mut pause = WAIT_FIRST_NS;
    while word.load(Ordering::Acquire) == val {
        crate::ending::check_point();
        if deadline.is_some_and(|(clock, d)| time::now_ns(clock).is_none_or(|now| now >= d)) {
            set_errno(ETIMEDOUT);
            return -1;
        }
        Nvptx::nanosleep(pause);
        pause = (pause * 2).min(WAIT_MAX_NS);
    }
    0
}

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
            let word = unsafe { &*uaddr };
            if word.load(Ordering::Acquire) != val {
                set_errno(EAGAIN);
                return -1;
            }
            // SAFETY: a non-null timeout points to a timespec (the caller's contract).
            let deadline = (!timeout.is_null()).then(|| {
                let ns = unsafe { &*timeout }.ns();
                // WAIT_BITSET takes an absolute deadline (on CLOCK_REALTIME if asked),
                // WAIT a relative one.
                if op & FUTEX_CMD_MASK != FUTEX_WAIT_BITSET {
                    (
                        time::CLOCK_MONOTONIC,
                        (Nvptx::globaltimer_ns() as i64).saturating_add(ns),
                    )
                } else if op & FUTEX_CLOCK_REALTIME != 0 {
                    (time::CLOCK_REALTIME, ns)
                } else {
                    (time::CLOCK_MONOTONIC, ns)
                }
            });
            futex_wait(word, val, deadline)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => 0,
        _ => {
            set_errno(ENOSYS);
            -1
        }
    }
}

/// `pthread_t` of the calling GPU thread: its place in the grid, plus one (never 0).
#[unsafe(no_mangle)]
pub extern "C" fn pthread_self() -> u64 {
    Nvptx::global_thread() + 1
}

/// A GPU thread's name says where it runs: `block B thread T` (linear indices), after
/// `GPU G ` in a run over several GPUs (`DeviceConfig::gpu`). Only the calling thread
/// is known. In a binary (feature `start`), thread 0 is the process's main thread and
/// has no name here, so std calls it `main`, as on Linux; the threads it spawns take
/// the names std gives them.
///
/// # Safety
/// `buf` must be valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_getname_np(thread: u64, buf: *mut u8, len: usize) -> c_int {
    if thread != pthread_self() || (cfg!(feature = "start") && thread == 1) {
        return ESRCH;
    }
    let (block, t) = Nvptx::caller();
    let mut name = crate::misc::Text::default();
    let _ = match crate::config().gpu {
        0 => core::fmt::write(&mut name, format_args!("block {block} thread {t}")),
        g => core::fmt::write(
            &mut name,
            format_args!("GPU {} block {block} thread {t}", g - 1),
        ),
    };
    let name = name.as_bytes();
    if name.len() + 1 > len {
        return ERANGE;
    }
    // SAFETY: `name.len() + 1 <= len` bytes are written (the caller's contract).
    unsafe {
        core::ptr::copy_nonoverlapping(name.as_ptr(), buf, name.len());
        buf.add(name.len()).write(0);
    }
    0
}

/// Accepted, as Linux accepts a name of up to 15 bytes (std truncates to that), and
/// kept by std, which names its threads itself (`Thread::name`, panics, libtest's test
/// threads); the GPU has no kernel-visible name to set, so `pthread_getname_np` keeps
/// giving the thread's place.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_setname_np(_thread: u64, _name: *const u8) -> c_int {
    0
}

/// Attributes are accepted and mean nothing: every GPU thread has the stack the launch
/// set (`stack_bytes`), and threads are always joinable until detached.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_attr_init(_attr: *mut c_void) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_attr_destroy(_attr: *mut c_void) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn pthread_attr_setstacksize(_attr: *mut c_void, _size: usize) -> c_int {
    0
}

/// The processors a GPU program reports (`sched_getaffinity`, `sysconf`), which std's
/// `available_parallelism` reads: `hostcall_abi::spawn::processors` of its held-back
/// threads and the device's multiprocessors, so that a pool such as rayon's takes one
/// thread per multiprocessor and leaves threads for the program to spawn beside it.
pub(crate) fn processors() -> u32 {
    let workers = crate::launch_state().workers.load(Ordering::Acquire);
    hostcall_abi::spawn::processors(
        workers,
        crate::area::warps() as u32,
        config().multiprocessors,
    )
}

/// The calling process's CPU set: [`processors`] bits, set from bit 0.
///
/// # Safety
/// `set` must be valid for writing `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sched_getaffinity(_pid: c_int, size: usize, set: *mut u8) -> c_int {
    let n = processors() as usize;
    if set.is_null() || size < n.div_ceil(8) {
        set_errno(EINVAL);
        return -1;
    }
    for i in 0..size {
        let bits = n.saturating_sub(i * 8).min(8);
        // SAFETY: `i < size` (the caller's contract).
        unsafe { set.add(i).write(((1u16 << bits) - 1) as u8) };
    }
    0
}

/// The slot of `pthread_t` `thread`, if it names the main thread or a held-back one.
fn slot_of(thread: u64) -> Option<Slot<'static>> {
    let id = thread.checked_sub(1)?;
    let runs_threads = thread_of(id).is_some_and(|k| k <= held_back());
    (id < config().thread_capacity && runs_threads).then(|| slot_at(id))
}

/// How long `pthread_create` waits for held-back threads that have not parked yet (the
/// launch's first moments) before it reports none free.
const WORKERS_START_NS: u64 = 200_000_000;

/// Where the next search for an idle worker starts, so creators spread over the workers.
static NEXT_WORKER: AtomicU32 = AtomicU32::new(0);

/// The worker freed last (its global index + 1; 0 for none), which `pthread_create`
/// tries before searching: it still polls often (`hostcall_client::spawn`'s warm looks)
/// and its frame stack and thread-local words are in the caches. A spawn and join took
/// 108 µs on an H100 when each thread went to the next worker round the launch, one
/// parked long before.
static FREED_LAST: AtomicU64 = AtomicU64::new(0);

/// Offers the worker at global index `id`, just freed, to the next `pthread_create`.
fn freed(id: u64) {
    FREED_LAST.store(id + 1, Ordering::Relaxed);
}

/// Starts a thread on a GPU thread held back at launch (`cargo gpu run` holds back a
/// lane for each thread it allows, `--threads`, across the warps first): the thread runs
/// there, as a GPU thread of its own. With none idle (all busy, or retired by a panic, see
/// [`__hostcall_thread_unwound`]) it fails with `EAGAIN`, as Linux does at its thread
/// limit; a launch whose every thread runs the kernel holds none back.
///
/// # Safety
/// `thread` must be valid for writing; `start(arg)` must be sound to run on another
/// thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut u64,
    _attr: *const c_void,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    let state = crate::launch_state();
    let workers = state.workers.load(Ordering::Acquire);
    if workers == 0 {
        return EAGAIN;
    }
    let deadline = Nvptx::globaltimer_ns() + WORKERS_START_NS;
    let mut pause = WAIT_FIRST_NS;
    loop {
        let first = NEXT_WORKER.fetch_add(1, Ordering::Relaxed);
        let hint = FREED_LAST.swap(0, Ordering::Relaxed).checked_sub(1);
        let search = (0..workers).map(|k| worker(u64::from(first.wrapping_add(k) % workers + 1)));
        for id in hint.into_iter().chain(search) {
            match slot_at(id).try_give(start as usize as u64, arg as u64, || ready(id)) {
                Give::Given => {
                    // SAFETY: the caller's contract.
                    unsafe { thread.write(id + 1) };
                    return 0;
                }
                // No memory left for the worker's frame stack: as Linux without memory
                // for a thread's stack.
                Give::Refused => return EAGAIN,
                Give::NotIdle => {}
            }
        }
        let all_parked = state.workers_ready.load(Ordering::Acquire) >= workers;
        // A worker found closed has left for the program's end: leave rather than fail
        // (the fence pairs with its Release store of `CLOSED`, made after it saw the
        // announcement).
        core::sync::atomic::fence(Ordering::Acquire);
        crate::ending::check_point();
        if all_parked || Nvptx::globaltimer_ns() > deadline {
            return EAGAIN;
        }
        Nvptx::nanosleep(pause);
        pause = (pause * 2).min(WAIT_MAX_NS);
    }
}

/// Readies the claimed worker at global index `id` to run a thread: gives it a frame
/// stack if it has none (a binary's threads take their frames there), false if the heap
/// has no room left for one.
fn ready(id: u64) -> bool {
    #[cfg(feature = "start")]
    // SAFETY: a claimed worker's area, which nobody else writes until its thread is
    // published.
    return unsafe { crate::frames::give_stack(crate::area::area_of(id), true) };
    #[cfg(not(feature = "start"))]
    {
        let _ = id;
        true
    }
}

/// Waits for the thread to end. A thread never started, detached or already joined is
/// `ESRCH`; joining oneself is `EDEADLK`.
///
/// # Safety
/// `ret`, if not null, must be valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_join(thread: u64, ret: *mut *mut c_void) -> c_int {
    if thread == pthread_self() {
        return EDEADLK;
    }
    match slot_of(thread).map(|s| s.join::<Nvptx>(crate::ending::check_point)) {
        Some(Ok(())) => {
            freed(thread - 1);
            if !ret.is_null() {
                // SAFETY: the caller's contract. std's threads return nothing.
                unsafe { ret.write(core::ptr::null_mut()) };
            }
            0
        }
        _ => ESRCH,
    }
}

/// Nobody will join the thread: its GPU thread takes the next one when it ends.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_detach(thread: u64) -> c_int {
    match slot_of(thread).map(|s| s.detach()) {
        Some(Ok(())) => 0,
        _ => ESRCH,
    }
}

/// The life of a held-back GPU thread (`START_KERNEL`'s threads after the first, on the
/// first `thread_lanes` lanes of each warp): park, run each thread given to it, with its
/// own thread-local values, which are destroyed and cleared when it ends, and park
/// again, until the program ends (`ending`).
#[cfg(feature = "start")]
pub(crate) fn serve_spawned_threads() -> ! {
    let slot = slot_at(Nvptx::global_thread());
    slot.park();
    crate::launch_state()
        .workers_ready
        .fetch_add(1, Ordering::Release);
    loop {
        let Some((start, arg)) = slot.wait_for_thread::<Nvptx>(&crate::ending::END) else {
            Nvptx::exit_thread()
        };
        // SAFETY: `pthread_create` stored a `extern "C" fn(*mut c_void) -> *mut c_void`.
        let start: extern "C" fn(*mut c_void) -> *mut c_void =
            unsafe { core::mem::transmute(start as usize) };
        start(arg as *mut c_void);
        run_key_destructors();
        // The next thread on this GPU thread starts with no thread-local values.
        // SAFETY: the calling thread's own area.
        unsafe { (*area()).keys = [0; MAX_KEYS] };
        if slot.end_thread() {
            freed(Nvptx::global_thread());
        }
    }
}

/// Sets the calling thread's armed panic landing (`ThreadArea::panic_landing`, fixup
/// 0010) and returns the previous one.
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_panic_landing_swap(new: *const c_void) -> *const c_void {
    // SAFETY: a thread's area is touched only by that thread.
    unsafe { core::mem::replace(&mut (*area()).panic_landing, new as u64) as *const c_void }
}

/// Ends a spawned thread whose panic std has stored for its joiner (fixups 0010 and
/// 0011: the GPU cannot unwind, so std's thread start arms a landing that a panic outside
/// any `catch_unwind` takes). The thread's frames are not unwound: their destructors do
/// not run, and what they hold stays held. Its thread-local destructors run, as at any
/// thread's end; then its GPU thread retires and exits, since the frames it leaves behind
/// fill its stack: each panicking thread costs the program one of its threads.
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_thread_unwound() -> ! {
    let me = Nvptx::global_thread();
    if me == 0 || crate::launch_state().workers.load(Ordering::Relaxed) == 0 {
        // Not a spawned thread: std arms landings only in threads it spawned.
        Nvptx::trap();
    }
    run_key_destructors();
    slot_at(me).retire(&crate::ending::END);
    Nvptx::exit_thread()
}

/// Rounds of destructors, as glibc's `PTHREAD_DESTRUCTOR_ITERATIONS`: a destructor may
/// set values again, which the next round destroys.
const DESTRUCTOR_ROUNDS: usize = 4;

/// Runs the calling thread's key destructors, as Linux does when a thread ends. The host
/// launches this with the ended launch's geometry (`hostcall_abi::THREAD_EXIT_KERNEL`),
/// so a thread's destructors run on its own coordinates, with its own key values.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn __hostcall_thread_exit() {
    // In a launch that holds threads back (`START_KERNEL`), only the first
    // `thread_lanes` lanes of each warp ran threads; the other lanes have no values, and
    // no frame stack of their own.
    let held_back = crate::launch_state().workers.load(Ordering::Relaxed) > 0;
    if held_back && thread_of(Nvptx::global_thread()).is_none() {
        return;
    }
    run_key_destructors();
}

/// Each non-null value of a key with a destructor is cleared and passed to it, in rounds.
fn run_key_destructors() {
    if crate::launch_state()
        .tls_destructors
        .load(Ordering::Relaxed)
        == 0
    {
        return;
    }
    for _ in 0..DESTRUCTOR_ROUNDS {
        let mut ran = false;
        let mut keys = KEYS_WITH_DTORS.load(Ordering::Acquire);
        while keys != 0 {
            let key = keys.trailing_zeros();
            keys &= keys - 1;
            let dtor = KEY_DTORS[key as usize].load(Ordering::Relaxed);
            let value = pthread_getspecific(key);
            if dtor == 0 || value.is_null() {
                continue;
            }
            pthread_setspecific(key, core::ptr::null());
            // SAFETY: `dtor` was stored from a `unsafe extern "C" fn(*mut c_void)` by
            // `pthread_key_create`, and POSIX calls it with the thread's value.
            let dtor: unsafe extern "C" fn(*mut c_void) =
                unsafe { core::mem::transmute(dtor as usize) };
            // SAFETY: as above.
            unsafe { dtor(value) };
            ran = true;
        }
        if !ran {
            break;
        }
    }
}
