//! What a GPU program cannot do: processes, signals, Unix-domain socket pairs, dynamic
//! loading. Each call fails as Linux reports an operation the system does not provide
//! (`ENOSYS`), so std returns `io::ErrorKind::Unsupported` and never traps. A few
//! queries that cannot fail answer what is true on the GPU.

#![allow(clippy::missing_safety_doc)] // none of these reads or writes its arguments

use core::ffi::{c_char, c_int, c_long, c_short, c_uint, c_ulong, c_void};

use hostcall_abi::errno::ENOSYS;

use crate::errno::set_errno;

/// Fails with `ENOSYS` the way most of libc does: -1 and errno.
fn nosys() -> c_int {
    set_errno(ENOSYS);
    -1
}

/// Defines functions that fail with `nosys()`.
macro_rules! nosys {
    ($($name:ident($($arg:ty),*) -> $ret:ty;)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($(_: $arg),*) -> $ret {
            nosys() as $ret
        }
    )*};
}

/// Defines functions that return `ENOSYS` itself (the `posix_spawn` family's convention).
macro_rules! returns_enosys {
    ($($name:ident($($arg:ty),*);)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($(_: $arg),*) -> c_int {
            ENOSYS
        }
    )*};
}

type Ptr = *mut c_void;
type CPtr = *const c_void;

nosys! {
    // Sockets: pairs, and messages with ancillary data (std uses them for Unix sockets).
    socketpair(c_int, c_int, c_int, *mut c_int) -> c_int;
    recvmsg(c_int, Ptr, c_int) -> isize;
    sendmsg(c_int, CPtr, c_int) -> isize;
    __res_init() -> c_int;
    // Processes.
    fork() -> c_int;
    execvp(*const c_char, CPtr) -> c_int;
    waitpid(c_int, *mut c_int, c_int) -> c_int;
    waitid(c_uint, c_uint, Ptr, c_int) -> c_int;
    pidfd_getpid(c_int) -> c_int;
    setuid(c_uint) -> c_int;
    setgid(c_uint) -> c_int;
    setgroups(usize, CPtr) -> c_int;
    setpgid(c_int, c_int) -> c_int;
    setsid() -> c_int;
    chroot(*const c_char) -> c_int;
    pipe2(*mut c_int, c_int) -> c_int;
    dup2(c_int, c_int) -> c_int;
    // Zero-copy transfers: std falls back to read and write.
    copy_file_range(c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> isize;
    sendfile64(c_int, c_int, *mut i64, usize) -> isize;
    splice(c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> isize;
    // Signals.
    sigaltstack(CPtr, Ptr) -> c_int;
}

returns_enosys! {
    posix_spawnp(*mut c_int, *const c_char, CPtr, CPtr, CPtr, CPtr);
    pidfd_spawnp(*mut c_int, *const c_char, CPtr, CPtr, CPtr, CPtr);
    posix_spawn_file_actions_init(Ptr);
    posix_spawn_file_actions_destroy(Ptr);
    posix_spawn_file_actions_adddup2(Ptr, c_int, c_int);
    posix_spawn_file_actions_addchdir(Ptr, *const c_char);
    posix_spawn_file_actions_addchdir_np(Ptr, *const c_char);
    posix_spawnattr_init(Ptr);
    posix_spawnattr_destroy(Ptr);
    posix_spawnattr_setflags(Ptr, c_short);
    posix_spawnattr_setpgroup(Ptr, c_int);
    posix_spawnattr_setsigdefault(Ptr, CPtr);
}

/// Accepts any disposition for a valid signal and returns the default one as the
/// previous (std's start-up ignores `SIGPIPE` so): no signal ever reaches a GPU thread,
/// so no handler runs. An invalid signal number is `SIG_ERR` with `EINVAL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, _handler: usize) -> usize {
    const SIG_DFL: usize = 0;
    const SIG_ERR: usize = usize::MAX;
    if !(1..=64).contains(&sig) {
        set_errno(hostcall_abi::errno::EINVAL);
        return SIG_ERR;
    }
    SIG_DFL
}

/// Size of x86_64 Linux's `struct sigaction`: the handler, a 128-byte mask, the flags
/// and the restorer.
const SIGACTION_SIZE: usize = 152;

/// Every disposition reads as `SIG_IGN` and setting one succeeds: no signal ever reaches
/// a GPU thread. So std installs no stack-overflow handler of its own (it does only over
/// `SIG_DFL`); the host reports a GPU thread's stack overflow instead.
///
/// # Safety
/// `old`, if not null, must be valid for writing a `struct sigaction`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(sig: c_int, _new: CPtr, old: *mut u8) -> c_int {
    const SIG_IGN: u64 = 1;
    if !(1..=64).contains(&sig) {
        set_errno(hostcall_abi::errno::EINVAL);
        return -1;
    }
    if !old.is_null() {
        // SAFETY: the caller's contract; the handler is the first field.
        unsafe {
            old.write_bytes(0, SIGACTION_SIZE);
            old.cast::<u64>().write_unaligned(SIG_IGN);
        }
    }
    0
}

/// A GPU thread's stack is not memory std could guard or inspect (it lives in the
/// driver's local memory): attributes of a running thread are not served.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_getattr_np(_thread: u64, _attr: Ptr) -> c_int {
    ENOSYS
}

/// No shared objects: every lookup misses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(_handle: Ptr, _name: *const c_char) -> Ptr {
    core::ptr::null_mut()
}

/// No auxiliary vector.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getauxval(_kind: c_ulong) -> c_ulong {
    0
}

/// The glibc whose ABI the GPU's libc follows (std asks to pick workarounds).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gnu_get_libc_version() -> *const c_char {
    c"2.39".as_ptr()
}

/// # Safety
/// `set` must point to a `sigset_t` (128 bytes on x86_64).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigemptyset(set: *mut [u64; 16]) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { set.write([0; 16]) };
    0
}

/// # Safety
/// `set` must point to a `sigset_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaddset(set: *mut [u64; 16], sig: c_int) -> c_int {
    let Some(bit) = (sig as usize).checked_sub(1).filter(|b| *b < 1024) else {
        set_errno(hostcall_abi::errno::EINVAL);
        return -1;
    };
    // SAFETY: the caller's contract; `bit / 64 < 16`.
    unsafe { (*set)[bit / 64] |= 1 << (bit % 64) };
    0
}

/// The page size, and as processors the threads the program can start at once
/// (`crate::thread::processors`); other names are not known (-1, errno untouched, as
/// for an indeterminate limit).
#[unsafe(no_mangle)]
pub extern "C" fn sysconf(name: c_int) -> c_long {
    const SC_PAGESIZE: c_int = 30;
    const SC_NPROCESSORS_CONF: c_int = 83;
    const SC_NPROCESSORS_ONLN: c_int = 84;
    match name {
        SC_PAGESIZE => 4096,
        SC_NPROCESSORS_CONF | SC_NPROCESSORS_ONLN => crate::thread::processors() as c_long,
        _ => -1,
    }
}
