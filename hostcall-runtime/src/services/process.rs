//! Process-level services: exit and abort (`Lifecycle`), the realtime clock and
//! randomness (`Time`), the process's identity, and `Ping`.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use hostcall_abi::errno::{EIO, ENOENT, ERANGE};
use hostcall_abi::std_services::{Identity, Lifecycle, Time};
use hostcall_abi::typed::{Errno, Filled};

use super::{Call, Handler, Malformed, Reply};
use crate::guest_log::{GuestLog, Kind};

/// How the GPU program asked to end, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// `std::process::exit(code)` (or libc `exit`), with the status a Linux parent
    /// would see: `code & 0xff`.
    Exit(u8),
    /// A thread called `abort`, or panicked (std ends a panic in an abort on the GPU).
    Abort {
        /// The aborting thread's GPU, in a run over several.
        gpu: Option<u32>,
        /// The aborting thread's linear block index.
        block: u32,
        /// The aborting thread's index within its block.
        thread: u32,
        /// Whether the abort ends a panic.
        panicked: bool,
    },
}

/// State of the process services: the first termination request wins. The launches of
/// a run over several GPUs share it, each through its own handle (`on_gpu`). Once it is
/// set, each launch's host answers its calls that wait `Killed` (`Host::run`'s wait
/// loop), as a process's end stops its threads wherever they wait.
pub(crate) struct Process {
    termination: Arc<Mutex<Option<Termination>>>,
    gpu: Option<u32>,
    /// The run's GPU-caused log lines: each abort is one, within the launch's limit.
    log: Arc<GuestLog>,
}

impl Process {
    /// The process of a run whose GPU-caused lines go to `log`.
    pub fn new(log: Arc<GuestLog>) -> Process {
        Process {
            termination: Arc::default(),
            gpu: None,
            log,
        }
    }

    /// The handle the launch on the GPU at place `gpu` of a run serves with.
    pub fn on_gpu(&self, gpu: Option<u32>) -> Process {
        Process {
            termination: self.termination.clone(),
            gpu,
            log: self.log.clone(),
        }
    }

    /// Records the run's first termination.
    fn terminate(&self, t: Termination) {
        self.termination
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(t);
    }

    /// The calling GPU thread aborts, after a panic or not.
    fn aborted(&self, panicked: bool) {
        let (block, thread) = super::typed::caller();
        let who = crate::guest_log::Who {
            gpu: self.gpu,
            block,
            thread,
        };
        let what = if panicked { "panicked" } else { "aborted" };
        self.log
            .warn(Kind::Abort, format_args!("GPU thread ({who}) {what}"));
        self.terminate(Termination::Abort {
            gpu: self.gpu,
            block,
            thread,
            panicked,
        });
    }

    /// The first termination request of the run.
    pub fn termination(&self) -> Option<Termination> {
        *self.termination.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Handler for Process {
    /// `Ping`, the null call: the host echoes `a0`.
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        Ok(Reply::value(call.args[0] as i64))
    }

    /// The echo is the result alone.
    fn answer_len(&self, _: u32, _: &[u64; 6], _: &[u8], _: usize) -> usize {
        0
    }
}

impl Lifecycle for Process {
    fn exit(&self, code: i32) {
        self.terminate(Termination::Exit((code & 0xff) as u8));
    }

    fn abort(&self) {
        self.aborted(false);
    }

    fn panic_abort(&self) {
        self.aborted(true);
    }
}

/// std's `Time` services: the host's clock and its OS's randomness.
pub(crate) struct HostTime;

impl Time for HostTime {
    fn realtime(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        now.as_nanos() as i64
    }

    fn getrandom(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        getrandom::fill(buf).map_err(|e| {
            log::warn!("getrandom: {e}");
            Errno(EIO)
        })?;
        Ok(buf.len())
    }
}

/// std's `Identity` service: the GPU program's process is the host's.
pub(crate) struct HostIdentity;

impl Identity for HostIdentity {
    fn getpid(&self) -> i32 {
        std::process::id() as i32
    }

    fn getppid(&self) -> i32 {
        rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
    }

    fn getuid(&self) -> u32 {
        rustix::process::getuid().as_raw()
    }

    fn passwd(&self, uid: u32, out: &mut [u8]) -> Result<Filled, Errno> {
        let entry = user_entry(uid)?;
        let to = out.get_mut(..entry.len()).ok_or(Errno(ERANGE))?;
        to.copy_from_slice(&entry);
        Ok(Filled(entry.len()))
    }
}

/// `uid`'s entry in the user database, through the C library (so that every source it
/// is configured with answers, as for any program on this host), encoded as
/// `Identity::passwd` says.
fn user_entry(uid: u32) -> Result<Vec<u8>, Errno> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        let mut pwd = std::mem::MaybeUninit::<libc::passwd>::uninit();
        let mut found = std::ptr::null_mut();
        // SAFETY: `pwd` and `found` are valid for writes, and `buf` for `buf.len()` bytes.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                pwd.as_mut_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(Errno(rc));
        }
        if found.is_null() {
            return Err(Errno(ENOENT));
        }
        // SAFETY: `getpwuid_r` succeeded, so it filled `pwd`.
        let pwd = unsafe { pwd.assume_init() };
        let mut entry = pwd.pw_gid.to_le_bytes().to_vec();
        for field in [
            pwd.pw_name,
            pwd.pw_passwd,
            pwd.pw_gecos,
            pwd.pw_dir,
            pwd.pw_shell,
        ] {
            if !field.is_null() {
                // SAFETY: a non-null field of a filled entry is a C string in `buf`.
                entry.extend_from_slice(unsafe { std::ffi::CStr::from_ptr(field) }.to_bytes());
            }
            entry.push(0);
        }
        return Ok(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_entry_is_its_gid_then_five_strings() {
        let uid = rustix::process::getuid().as_raw();
        let mut out = [0u8; 4096];
        let Filled(n) = HostIdentity
            .passwd(uid, &mut out)
            .expect("this user has an entry");
        let gid = u32::from_le_bytes(out[..4].try_into().unwrap());
        assert_eq!(gid, rustix::process::getgid().as_raw());
        let fields: Vec<&[u8]> = out[4..n].split(|&b| b == 0).collect();
        // Five strings, each ending in a NUL: six pieces, the last empty.
        assert_eq!(fields.len(), 6, "{fields:?}");
        assert!(fields[3].starts_with(b"/"), "home {:?}", fields[3]);
    }

    #[test]
    fn no_entry_is_enoent_and_a_short_buffer_erange() {
        assert_eq!(
            HostIdentity.passwd(4_000_000_000, &mut [0; 4096]),
            Err(Errno(ENOENT))
        );
        let uid = rustix::process::getuid().as_raw();
        assert_eq!(HostIdentity.passwd(uid, &mut [0; 5]), Err(Errno(ERANGE)));
    }
}
