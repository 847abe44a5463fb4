//! Sockets, name resolution and `poll`: std's `TcpListener`, `TcpStream`, `UdpSocket`
//! and `ToSocketAddrs` through the host's `Net` services. Each function copies what std
//! passed (addresses are Linux `sockaddr` bytes already) and turns the answer's errno
//! into `errno`. Plain reads and writes of a connected socket are `Fs.read` and
//! `Fs.write` (`crate::io`), which move large buffers by DMA.

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

use hostcall_abi::BULK_PER_LANE;
use hostcall_abi::errno::{EFAULT, EINVAL, EMSGSIZE, ENOSYS};
use hostcall_abi::net::consts::*;
use hostcall_abi::net::{POLLFD_SIZE, RESOLVED_MAX, SOCKADDR_MAX, family_of, sockaddr_len};
use hostcall_abi::typed::Errno;
use hostcall_client::fd_io;
use hostcall_client::std_services::Net;
use hostcall_client::typed::Client;

use crate::cstr;
use crate::heap::{free, malloc};
use crate::{Nvptx, channel, errno::ret, errno::set_errno, host};

/// The largest datagram (or piece of a stream) one `Net.sendto` carries: what the lane's
/// bulk buffer holds beside the address.
const SEND_MAX: usize = BULK_PER_LANE - 2 * SOCKADDR_MAX;

/// The client of the host's socket services.
fn net() -> Client<Nvptx, dyn Net> {
    host()
}

/// `len` bytes of address at `addr`.
///
/// # Safety
/// `addr` must be null or valid for reading `len` bytes.
unsafe fn addr_in<'a>(addr: *const u8, len: c_uint) -> Result<&'a [u8], Errno> {
    if addr.is_null() {
        return Err(Errno(EFAULT));
    }
    let len = (len as usize).min(SOCKADDR_MAX);
    // SAFETY: the caller's contract (`len` is at most what it gave).
    Ok(unsafe { core::slice::from_raw_parts(addr, len) })
}

/// Copies an address answer (`SOCKADDR_MAX` bytes, its family first) to the caller's
/// `addr`, at most `*len` bytes, and sets `*len` to its whole length, as Linux does.
///
/// # Safety
/// `addr` and `len` must be null, or `len` valid and `addr` valid for `*len` bytes.
unsafe fn addr_out(answer: &[u8; SOCKADDR_MAX], addr: *mut u8, len: *mut c_uint) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let whole = family_of(answer).and_then(sockaddr_len).unwrap_or(0);
    // SAFETY: the caller's contract.
    unsafe {
        let n = whole.min(*len as usize);
        core::ptr::copy_nonoverlapping(answer.as_ptr(), addr, n);
        *len = whole as c_uint;
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    ret(net().socket(domain, ty, protocol)) as c_int
}

/// # Safety
/// `addr` must be valid for reading `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const u8, len: c_uint) -> c_int {
    // SAFETY: the caller's contract.
    ret(unsafe { addr_in(addr, len) }.and_then(|a| net().connect(fd, a))) as c_int
}

/// # Safety
/// `addr` must be valid for reading `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const u8, len: c_uint) -> c_int {
    // SAFETY: the caller's contract.
    ret(unsafe { addr_in(addr, len) }.and_then(|a| net().bind(fd, a))) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    ret(net().listen(fd, backlog)) as c_int
}

/// # Safety
/// As `accept(2)`: `addr` and `len` null, or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut u8,
    len: *mut c_uint,
    flags: c_int,
) -> c_int {
    let mut peer = [0; SOCKADDR_MAX];
    let r = ret(net().accept(fd, flags, &mut peer));
    if r >= 0 {
        // SAFETY: the caller's contract.
        unsafe { addr_out(&peer, addr, len) };
    }
    r as c_int
}

/// # Safety
/// As `accept(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut u8, len: *mut c_uint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { accept4(fd, addr, len, 0) }
}

/// # Safety
/// `buf` must be valid for reading `n` bytes; `addr` null or valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    addr: *const u8,
    len: c_uint,
) -> isize {
    // SAFETY: the caller's contract.
    let data = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), n) };
    if addr.is_null() {
        if flags & !MSG_NOSIGNAL == 0 && n > SEND_MAX {
            // A stream's large write: `Fs.write` takes all of it, a bulk buffer a call
            // (or by DMA from global memory).
            return crate::errno::check(fd_io::write::<Nvptx>(&channel(), fd, data)) as isize;
        }
        if n > SEND_MAX && datagram(fd) {
            // Sent in part, a datagram would arrive cut short.
            set_errno(EMSGSIZE);
            return -1;
        }
        // A stream takes what fits; the caller sends the rest, as after any short send.
        return ret(net().sendto(fd, &data[..n.min(SEND_MAX)], flags, &[])) as isize;
    }
    if n > SEND_MAX {
        set_errno(EMSGSIZE);
        return -1;
    }
    // SAFETY: the caller's contract.
    ret(unsafe { addr_in(addr, len) }.and_then(|a| net().sendto(fd, data, flags, a))) as isize
}

/// Whether `fd` is a datagram socket.
fn datagram(fd: c_int) -> bool {
    let mut ty = [0u8; 4];
    net().getsockopt(fd, SOL_SOCKET, SO_TYPE, &mut ty).is_ok()
        && i32::from_ne_bytes(ty) == SOCK_DGRAM
}

/// # Safety
/// `buf` must be valid for reading `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: the caller's contract.
    unsafe { sendto(fd, buf, n, flags, core::ptr::null(), 0) }
}

/// # Safety
/// `buf` must be valid for writing `n` bytes; `addr` and `len` null, or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    addr: *mut u8,
    len: *mut c_uint,
) -> isize {
    if flags == 0 && addr.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { crate::io::read(fd, buf, n) };
    }
    let mut out = [0u8; BULK_PER_LANE];
    let room = SOCKADDR_MAX + n.min(BULK_PER_LANE - SOCKADDR_MAX);
    let r = ret(net().recvfrom(fd, flags, &mut out[..room]));
    if r >= 0 {
        let (from, data) = out.split_at(SOCKADDR_MAX);
        // SAFETY: the caller's contract; `r` is at most `n` (the room given).
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), r as usize);
            addr_out(from.try_into().unwrap_or(&[0; SOCKADDR_MAX]), addr, len);
        }
    }
    r as isize
}

/// # Safety
/// `buf` must be valid for writing `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: the caller's contract.
    unsafe {
        recvfrom(
            fd,
            buf,
            n,
            flags,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    ret(net().shutdown(fd, how)) as c_int
}

/// # Safety
/// `value` must be valid for reading `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: c_uint,
) -> c_int {
    if value.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    // SAFETY: the caller's contract.
    let v = unsafe { core::slice::from_raw_parts(value.cast::<u8>(), (len as usize).min(64)) };
    ret(net().setsockopt(fd, level, name, v)) as c_int
}

/// # Safety
/// `len` must be valid, and `value` valid for writing `*len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut c_uint,
) -> c_int {
    if value.is_null() || len.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    let mut out = [0u8; 16];
    match net().getsockopt(fd, level, name, &mut out) {
        Ok(got) => {
            // SAFETY: the caller's contract.
            unsafe {
                let n = got.min(*len as usize);
                core::ptr::copy_nonoverlapping(out.as_ptr(), value.cast::<u8>(), n);
                *len = n as c_uint;
            }
            0
        }
        Err(e) => ret::<()>(Err(e)) as c_int,
    }
}

/// # Safety
/// As `getsockname(2)`.
unsafe fn name_of(fd: c_int, peer: u32, addr: *mut u8, len: *mut c_uint) -> c_int {
    if addr.is_null() || len.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    let mut out = [0; SOCKADDR_MAX];
    let r = ret(net().name(fd, peer, &mut out));
    if r == 0 {
        // SAFETY: the caller's contract.
        unsafe { addr_out(&out, addr, len) };
    }
    r as c_int
}

/// # Safety
/// As `getsockname(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut u8, len: *mut c_uint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { name_of(fd, 0, addr, len) }
}

/// # Safety
/// As `getpeername(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut u8, len: *mut c_uint) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { name_of(fd, 1, addr, len) }
}

/// `FIONBIO` (std's `set_nonblocking`) on a socket; any other request fails with
/// `ENOSYS`.
///
/// # Safety
/// For `FIONBIO`, the argument must point to an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, mut args: ...) -> c_int {
    if request != FIONBIO {
        set_errno(ENOSYS);
        return -1;
    }
    // SAFETY: FIONBIO passes a pointer to an int (the caller's contract).
    let on = unsafe { args.next_arg::<*const c_int>() };
    if on.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    // SAFETY: checked not null; the caller's contract.
    ret(net().set_nonblocking(fd, u32::from(unsafe { *on } != 0))) as c_int
}

/// A socket's non-blocking mode, as `fcntl`'s `F_GETFL` reports it (`O_RDWR` and
/// perhaps `O_NONBLOCK`), or `None` for a file.
pub(crate) fn socket_flags(fd: c_int) -> Option<c_int> {
    let nb = net().nonblocking(fd).ok()?;
    Some(hostcall_abi::fcntl::O_RDWR | if nb != 0 { O_NONBLOCK } else { 0 })
}

/// `fcntl`'s `F_SETFL` on a socket: `O_NONBLOCK` is the one flag it changes.
pub(crate) fn set_socket_flags(fd: c_int, flags: c_int) -> c_int {
    ret(net().set_nonblocking(fd, u32::from(flags & O_NONBLOCK != 0))) as c_int
}

/// Linux's `struct pollfd`.
#[repr(C)]
pub struct PollFd {
    fd: c_int,
    events: i16,
    revents: i16,
}

/// Waits on the host for sockets to become ready, at most `timeout_ms` (negative:
/// without limit). Files and stdio are always ready for what they ask, as Linux reports
/// regular files, and a closed fd gets `POLLNVAL`; so std's start-up check of fds 0 to
/// 2 passes as in a process. At most 512 fds at once (one bulk buffer's worth), else
/// `EINVAL`.
///
/// # Safety
/// `fds` must be valid for reading and writing `n` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn poll(fds: *mut PollFd, n: u64, timeout_ms: c_int) -> c_int {
    const MAX: usize = BULK_PER_LANE / POLLFD_SIZE;
    if fds.is_null() && n > 0 {
        set_errno(EFAULT);
        return -1;
    }
    if n as usize > MAX {
        set_errno(EINVAL);
        return -1;
    }
    // SAFETY: the caller's contract; `PollFd` is 8 plain bytes.
    let asked = unsafe { core::slice::from_raw_parts(fds.cast::<u8>(), n as usize * POLLFD_SIZE) };
    let mut revents = [0u8; 2 * MAX];
    let r = ret(net().poll(asked, timeout_ms, &mut revents[..2 * n as usize]));
    if r >= 0 {
        for i in 0..n as usize {
            // SAFETY: `i < n` (the caller's contract).
            unsafe {
                (*fds.add(i)).revents = i16::from_ne_bytes([revents[2 * i], revents[2 * i + 1]])
            };
        }
    }
    r as c_int
}

/// glibc's `struct addrinfo` on x86_64.
#[repr(C)]
pub struct AddrInfo {
    flags: c_int,
    family: c_int,
    socktype: c_int,
    protocol: c_int,
    addrlen: c_uint,
    addr: *mut u8,
    canonname: *mut c_char,
    next: *mut AddrInfo,
}

/// One entry of a `getaddrinfo` answer: the record, then its address.
#[repr(C)]
struct Entry {
    info: AddrInfo,
    addr: [u8; SOCKADDR_MAX],
}

/// Resolves a granted name (or an address written out) through the host; the port is
/// the numeric `service`, if any. Names the host was not told to grant answer
/// `EAI_NONAME`, as an unknown name does.
///
/// # Safety
/// As `getaddrinfo(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const AddrInfo,
    res: *mut *mut AddrInfo,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(node), service) = (unsafe { cstr(node) }, unsafe { cstr(service) }) else {
        return EAI_NONAME;
    };
    let port = match service.map(|s| {
        core::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
    }) {
        None => 0,
        Some(Some(p)) => p,
        Some(None) => return EAI_NONAME,
    };
    // SAFETY: the caller's contract.
    let (family, socktype, protocol) = match unsafe { hints.as_ref() } {
        Some(h) => (h.family, h.socktype, h.protocol),
        None => (0, 0, 0),
    };
    if ![0, AF_INET, AF_INET6].contains(&family) {
        return EAI_FAMILY;
    }
    let mut out = [0u8; RESOLVED_MAX * SOCKADDR_MAX];
    let Ok(len) = net().resolve(node, &mut out) else {
        return EAI_NONAME;
    };
    let mut head: *mut AddrInfo = core::ptr::null_mut();
    let mut tail: *mut *mut AddrInfo = &mut head;
    for rec in out[..len].chunks_exact(SOCKADDR_MAX) {
        let f = family_of(rec).unwrap_or(0);
        if family != 0 && f != family {
            continue;
        }
        let e = malloc(size_of::<Entry>()).cast::<Entry>();
        if e.is_null() {
            // SAFETY: `head` is a list this function built.
            unsafe { freeaddrinfo(head) };
            return EAI_MEMORY;
        }
        // SAFETY: `e` is a fresh allocation of an `Entry`; `tail` points at the list's
        // last `next` (or `head`).
        let mut addr = [0u8; SOCKADDR_MAX];
        addr.copy_from_slice(rec);
        addr[2..4].copy_from_slice(&port.to_be_bytes());
        unsafe {
            e.write(Entry {
                info: AddrInfo {
                    flags: 0,
                    family: f,
                    socktype,
                    protocol,
                    addrlen: sockaddr_len(f).unwrap_or(0) as c_uint,
                    addr: (&raw mut (*e).addr).cast(),
                    canonname: core::ptr::null_mut(),
                    next: core::ptr::null_mut(),
                },
                addr,
            });
            *tail = &raw mut (*e).info;
            tail = &raw mut (*e).info.next;
        }
    }
    if head.is_null() {
        return EAI_NONAME;
    }
    // SAFETY: the caller's contract.
    unsafe { *res = head };
    0
}

/// # Safety
/// `res` must be null or a list `getaddrinfo` returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freeaddrinfo(mut res: *mut AddrInfo) {
    while !res.is_null() {
        // SAFETY: each entry is an `Entry` from `malloc`, its `info` first.
        let next = unsafe { (*res).next };
        // SAFETY: as above.
        unsafe { free(res.cast()) };
        res = next;
    }
}

/// glibc's messages for the failures `getaddrinfo` returns.
#[unsafe(no_mangle)]
pub extern "C" fn gai_strerror(code: c_int) -> *const c_char {
    match code {
        EAI_NONAME => c"Name or service not known",
        EAI_FAMILY => c"ai_family not supported",
        EAI_MEMORY => c"Memory allocation failure",
        _ => c"System error",
    }
    .as_ptr()
}
