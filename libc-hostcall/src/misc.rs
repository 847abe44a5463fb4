//! What std references for backtraces, error strings and randomness.

use core::ffi::{c_char, c_int, c_uint, c_void};

use hostcall_abi::errno;
use hostcall_client::std_services::Time;

use crate::{errno::ret, host};

/// glibc's messages for errno 0..=40, by number (what `strerror` prints on Linux).
const MESSAGES: [&str; 41] = [
    "Success",
    "Operation not permitted",
    "No such file or directory",
    "No such process",
    "Interrupted system call",
    "Input/output error",
    "No such device or address",
    "Argument list too long",
    "Exec format error",
    "Bad file descriptor",
    "No child processes",
    "Resource temporarily unavailable",
    "Cannot allocate memory",
    "Permission denied",
    "Bad address",
    "Block device required",
    "Device or resource busy",
    "File exists",
    "Invalid cross-device link",
    "No such device",
    "Not a directory",
    "Is a directory",
    "Invalid argument",
    "Too many open files in system",
    "Too many open files",
    "Inappropriate ioctl for device",
    "Text file busy",
    "File too large",
    "No space left on device",
    "Illegal seek",
    "Read-only file system",
    "Too many links",
    "Broken pipe",
    "Numerical argument out of domain",
    "Numerical result out of range",
    "Resource deadlock avoided",
    "File name too long",
    "No locks available",
    "Function not implemented",
    "Directory not empty",
    "Too many levels of symbolic links",
];

/// glibc's messages for the socket errors, 88 to 115, by number (`None`: one a GPU
/// program's sockets never answer).
const NET_MESSAGES: [Option<&str>; 28] = [
    Some("Socket operation on non-socket"),
    Some("Destination address required"),
    Some("Message too long"),
    None,
    Some("Protocol not available"),
    Some("Protocol not supported"),
    None,
    Some("Operation not supported"),
    None,
    Some("Address family not supported by protocol"),
    Some("Address already in use"),
    Some("Cannot assign requested address"),
    Some("Network is down"),
    Some("Network is unreachable"),
    None,
    Some("Software caused connection abort"),
    Some("Connection reset by peer"),
    Some("No buffer space available"),
    Some("Transport endpoint is already connected"),
    Some("Transport endpoint is not connected"),
    None,
    None,
    Some("Connection timed out"),
    Some("Connection refused"),
    None,
    Some("No route to host"),
    Some("Operation already in progress"),
    Some("Operation now in progress"),
];

/// glibc's message for `e`, if it has one here.
fn message(e: c_int) -> Option<&'static str> {
    match usize::try_from(e).ok()? {
        e @ 88..=115 => NET_MESSAGES[e - 88],
        e => MESSAGES.get(e).copied(),
    }
}

/// # Safety
/// `buf` must be valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xpg_strerror_r(e: c_int, buf: *mut c_char, len: usize) -> c_int {
    if buf.is_null() || len == 0 {
        return errno::ERANGE;
    }
    let mut text = Text::default();
    let (msg, code) = match message(e) {
        Some(m) => (m.as_bytes(), 0),
        None => {
            // As glibc: the number in the text, and EINVAL.
            let _ = core::fmt::write(&mut text, format_args!("Unknown error {e}"));
            (text.as_bytes(), errno::EINVAL)
        }
    };
    let n = msg.len().min(len - 1);
    // SAFETY: `n + 1 <= len` bytes of `buf` are written.
    unsafe {
        core::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    if n < msg.len() { errno::ERANGE } else { code }
}

/// A small buffer `core::fmt` writes into, for messages and names built without the
/// heap.
pub(crate) struct Text {
    bytes: [u8; 64],
    len: usize,
}

impl Default for Text {
    fn default() -> Text {
        Text {
            bytes: [0; 64],
            len: 0,
        }
    }
}

impl Text {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl core::fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Random bytes from the host's OS (std seeds `HashMap` with them).
///
/// # Safety
/// `buf` must be valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: usize, _flags: c_uint) -> isize {
    // SAFETY: the caller's contract.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    ret(host::<dyn Time>().getrandom(out)) as isize
}

/// There are no loaded objects to list.
#[unsafe(no_mangle)]
pub extern "C" fn dl_iterate_phdr(_cb: *const c_void, _data: *mut c_void) -> c_int {
    0
}
