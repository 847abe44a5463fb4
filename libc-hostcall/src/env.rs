//! The program's arguments and environment. The host passes them as two blocks of
//! NUL-terminated strings (`Environment.startup`); the first thread that asks fetches a
//! block into the launch's heap and builds the array std reads (`argv`, `environ`).
//! From then on the environment is the GPU's own, as a process's is: `getenv`, `setenv`
//! and `unsetenv` work on it without the host.

use core::ffi::{CStr, c_char, c_int};
use core::sync::atomic::{AtomicU64, Ordering};

use hostcall_abi::errno::{EINVAL, EIO, ENOENT, ENOMEM};
use hostcall_abi::typed::{Errno, Filled};
use hostcall_abi::{BULK_PER_LANE, STARTUP_ARGS, STARTUP_ENV};
use hostcall_client::Platform;
use hostcall_client::std_services::{Environment, Identity};

use crate::heap::{free, malloc};
use crate::{Nvptx, errno::set_errno, host, launch_state};

/// `state` while a thread fetches the block.
const FETCHING: u64 = 1;

/// The address `state` holds once `build` has run, fetching at most once per launch.
fn once(state: &AtomicU64, build: impl FnOnce() -> u64) -> u64 {
    match state.compare_exchange(0, FETCHING, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            let v = build();
            state.store(v, Ordering::Release);
            v
        }
        Err(_) => loop {
            let v = state.load(Ordering::Acquire);
            if v != FETCHING {
                return v;
            }
            Nvptx::nanosleep(200);
        },
    }
}

/// A NULL-terminated array of pointers to the strings of block `which`, in the heap.
/// Traps if the heap cannot hold it (std could not start either).
fn fetch(which: u64) -> *mut *mut c_char {
    let env = host::<dyn Environment>();
    let chunk = malloc(BULK_PER_LANE).cast::<u8>();
    if chunk.is_null() {
        Nvptx::trap();
    }
    // SAFETY: `chunk` holds BULK_PER_LANE bytes.
    let buf = unsafe { core::slice::from_raw_parts_mut(chunk, BULK_PER_LANE) };
    let total = env.startup(which, 0, buf).unwrap_or(0);
    let block = malloc(total + 1).cast::<u8>();
    if block.is_null() {
        Nvptx::trap();
    }
    let mut done = 0;
    while done < total {
        let n = (total - done).min(BULK_PER_LANE);
        if done > 0 {
            let _ = env.startup(which, done as u64, buf);
        }
        // SAFETY: `block` has `total + 1` bytes; `n` fit in both.
        unsafe { core::ptr::copy_nonoverlapping(chunk, block.add(done), n) };
        done += n;
    }
    // SAFETY: `chunk` came from malloc; `block` has `total + 1` bytes.
    unsafe {
        free(chunk.cast());
        block.add(total).write(0);
    }
    // SAFETY: `block` holds `total` initialized bytes.
    let bytes = unsafe { core::slice::from_raw_parts(block, total) };
    let count = bytes.iter().filter(|b| **b == 0).count();
    let array = malloc((count + 1) * size_of::<*mut c_char>()).cast::<*mut c_char>();
    if array.is_null() {
        Nvptx::trap();
    }
    let mut start = 0;
    for (i, end) in bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == 0)
        .map(|(i, _)| i)
        .enumerate()
    {
        // SAFETY: `i < count`: the array has `count + 1` slots.
        unsafe { array.add(i).write(block.add(start).cast()) };
        start = end + 1;
    }
    // SAFETY: slot `count` is the last.
    unsafe { array.add(count).write(core::ptr::null_mut()) };
    array
}

/// `argv` for std (see fixup 0005); `*argc` receives the count.
///
/// # Safety
/// `argc` must be valid for writing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __hostcall_argv(argc: *mut isize) -> *const *const c_char {
    let argv = once(&launch_state().argv, || fetch(STARTUP_ARGS) as u64) as *const *const c_char;
    let mut n = 0;
    // SAFETY: the array ends with NULL.
    while !unsafe { *argv.add(n) }.is_null() {
        n += 1;
    }
    // SAFETY: the caller's contract.
    unsafe { argc.write(n as isize) };
    argv
}

/// The address of the `environ` variable, for std (see fixup 0005) and this module.
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_environ() -> *mut *mut *mut c_char {
    once(&launch_state().environ, || {
        let cell = malloc(size_of::<*mut *mut c_char>()).cast::<*mut *mut c_char>();
        if cell.is_null() {
            Nvptx::trap();
        }
        // SAFETY: `cell` has room for one pointer.
        unsafe { cell.write(fetch(STARTUP_ENV)) };
        cell as u64
    }) as *mut *mut *mut c_char
}

/// The `NAME=value` entries of the environment.
fn entries() -> impl Iterator<Item = (usize, *mut c_char)> {
    // SAFETY: the variable holds a NULL-terminated array (built by `fetch` or `setenv`).
    let array = unsafe { *__hostcall_environ() };
    (0..)
        // SAFETY: read up to and including the NULL.
        .map(move |i| (i, unsafe { *array.add(i) }))
        .take_while(|(_, p)| !p.is_null())
}

/// The value of `name` in entry `e`, if `e` defines it.
fn value_of(e: *mut c_char, name: &[u8]) -> Option<*mut c_char> {
    // SAFETY: entries are C strings.
    let bytes = unsafe { CStr::from_ptr(e) }.to_bytes();
    (bytes.len() > name.len() && bytes.starts_with(name) && bytes[name.len()] == b'=')
        // SAFETY: within the entry, past `NAME=`.
        .then(|| unsafe { e.add(name.len() + 1) })
}

/// A valid variable name: not empty, no `=`.
///
/// # Safety
/// `name` must be null or a C string.
unsafe fn name_of<'a>(name: *const c_char) -> Option<&'a [u8]> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let n = unsafe { CStr::from_ptr(name) }.to_bytes();
    (!n.is_empty() && !n.contains(&b'=')).then_some(n)
}

/// # Safety
/// `name` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getenv(name: *const c_char) -> *mut c_char {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { name_of(name) }) else {
        return core::ptr::null_mut();
    };
    entries()
        .find_map(|(_, e)| value_of(e, name))
        .unwrap_or(core::ptr::null_mut())
}

/// Sets `name` to `value` (std holds its environment lock). Replaced entries are not
/// freed: a caller of `getenv` may still hold them, as glibc also assumes.
///
/// # Safety
/// `name` and `value` must be C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn setenv(
    name: *const c_char,
    value: *const c_char,
    overwrite: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(n), false) = (unsafe { name_of(name) }, value.is_null()) else {
        set_errno(EINVAL);
        return -1;
    };
    let existing = entries().find(|(_, e)| value_of(*e, n).is_some());
    if existing.is_some() && overwrite == 0 {
        return 0;
    }
    // SAFETY: the caller's contract.
    let v = unsafe { CStr::from_ptr(value) }.to_bytes();
    let entry = malloc(n.len() + v.len() + 2).cast::<u8>();
    if entry.is_null() {
        set_errno(ENOMEM);
        return -1;
    }
    // SAFETY: `entry` holds `NAME=value` and its NUL.
    unsafe {
        core::ptr::copy_nonoverlapping(n.as_ptr(), entry, n.len());
        entry.add(n.len()).write(b'=');
        core::ptr::copy_nonoverlapping(v.as_ptr(), entry.add(n.len() + 1), v.len());
        entry.add(n.len() + 1 + v.len()).write(0);
    }
    let var = __hostcall_environ();
    if let Some((i, _)) = existing {
        // SAFETY: `i` indexes a live entry of the array.
        unsafe { (*var).add(i).write(entry.cast()) };
        return 0;
    }
    let count = entries().count();
    let grown = malloc((count + 2) * size_of::<*mut c_char>()).cast::<*mut c_char>();
    if grown.is_null() {
        set_errno(ENOMEM);
        return -1;
    }
    // SAFETY: `grown` has `count + 2` slots: the old entries, the new one, the NULL.
    unsafe {
        core::ptr::copy_nonoverlapping(*var, grown, count);
        grown.add(count).write(entry.cast());
        grown.add(count + 1).write(core::ptr::null_mut());
        var.write(grown);
    }
    0
}

/// Removes `name` (std holds its environment lock).
///
/// # Safety
/// `name` must be a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unsetenv(name: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    let Some(n) = (unsafe { name_of(name) }) else {
        set_errno(EINVAL);
        return -1;
    };
    // SAFETY: the variable holds a NULL-terminated array; entries shift down in place.
    unsafe {
        let array = *__hostcall_environ();
        let mut keep = 0;
        let mut i = 0;
        loop {
            let e = *array.add(i);
            if e.is_null() || value_of(e, n).is_none() {
                *array.add(keep) = e;
                keep += 1;
            }
            if e.is_null() {
                break;
            }
            i += 1;
        }
    }
    0
}

/// The host process's id: the GPU program runs inside it.
#[unsafe(no_mangle)]
pub extern "C" fn getpid() -> c_int {
    host::<dyn Identity>().getpid()
}

/// The host process's parent's id.
#[unsafe(no_mangle)]
pub extern "C" fn getppid() -> c_int {
    host::<dyn Identity>().getppid()
}

/// The host process's user's id.
#[unsafe(no_mangle)]
pub extern "C" fn getuid() -> core::ffi::c_uint {
    host::<dyn Identity>().getuid()
}

/// C's `struct passwd` as std's Linux code is compiled against it.
#[repr(C)]
pub struct Passwd {
    pw_name: *mut c_char,
    pw_passwd: *mut c_char,
    pw_uid: core::ffi::c_uint,
    pw_gid: core::ffi::c_uint,
    pw_gecos: *mut c_char,
    pw_dir: *mut c_char,
    pw_shell: *mut c_char,
}

/// The host's user database entry for `uid` (`Identity::passwd`), its strings laid out
/// in `buf`: 0 with `*result` set, 0 with `*result` null when there is none, or an
/// errno (`ERANGE`: `buf` is too small; std then tries a larger one).
///
/// # Safety
/// `pwd` and `result` must be valid for writes, `buf` for `buflen` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getpwuid_r(
    uid: core::ffi::c_uint,
    pwd: *mut Passwd,
    buf: *mut c_char,
    buflen: usize,
    result: *mut *mut Passwd,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { *result = core::ptr::null_mut() };
    // SAFETY: the caller's contract.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), buflen) };
    let n = match host::<dyn Identity>().passwd(uid, out) {
        Ok(Filled(n)) => n,
        Err(Errno(ENOENT)) => return 0,
        Err(Errno(e)) => return e,
    };
    // The group id, then five NUL-terminated strings, each pointed at where it lies.
    let Some((gid, strings)) = out[..n.min(buflen)].split_first_chunk::<4>() else {
        return EIO;
    };
    let gid = u32::from_le_bytes(*gid);
    let mut fields = [core::ptr::null_mut(); 5];
    let mut at = 0;
    for f in &mut fields {
        let Some(len) = strings[at..].iter().position(|&b| b == 0) else {
            return EIO;
        };
        // SAFETY: `4 + at < n <= buflen`: inside `buf`.
        *f = unsafe { buf.add(4 + at) };
        at += len + 1;
    }
    let [name, passwd, gecos, dir, shell] = fields;
    // SAFETY: the caller's contract.
    unsafe {
        pwd.write(Passwd {
            pw_name: name,
            pw_passwd: passwd,
            pw_uid: uid,
            pw_gid: gid,
            pw_gecos: gecos,
            pw_dir: dir,
            pw_shell: shell,
        });
        *result = pwd;
    }
    0
}
