//! Host services, one module per capability, reached by numeric id. Everything is denied
//! until granted through [`crate::HostBuilder`]: files only under pre-opened directories,
//! environment variables only as listed.

mod env;
mod fs;
mod process;
mod stdio;

use std::collections::HashMap;
use std::sync::Arc;

use hostcall_abi::Service;

pub(crate) use env::EnvPolicy;
pub(crate) use fs::{FdTable, Files};
pub(crate) use process::Process;
pub use process::Termination;
pub(crate) use stdio::Stdio;

/// One lane's request as a service sees it.
pub struct Call<'a> {
    /// The service id the lane asked for.
    pub service: u32,
    /// The caller's linear block index.
    pub block: u32,
    /// The caller's thread index within its block.
    pub thread: u32,
    /// The arguments (see `hostcall_abi::service` for each service's convention).
    pub args: [u64; 6],
    /// The lane's bulk buffer (`BULK_PER_LANE` bytes in a shared packet, `PORT_BULK` for
    /// a lone lane): input bytes on entry, output bytes on return.
    pub bulk: &'a mut [u8],
}

impl Call<'_> {
    /// Argument `i` as a length bounded by the bulk buffer.
    pub fn len_arg(&self, i: usize) -> Result<usize, Malformed> {
        let (n, cap) = (self.args[i], self.bulk.len());
        if n > cap as u64 {
            return Err(Malformed(format!(
                "length argument {i} is {n}, over the {cap}-byte bulk buffer"
            )));
        }
        Ok(n as usize)
    }

    /// Argument `i` as a GPU file descriptor.
    pub fn fd_arg(&self, i: usize) -> i32 {
        self.args[i] as i32
    }
}

/// A service's answer: the result (`-errno` on failure) and how many bulk bytes it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The value returned to the GPU caller.
    pub result: i64,
    /// Bytes of the bulk buffer that carry output.
    pub bulk_out: usize,
}

impl Reply {
    /// A result with no bulk output.
    pub fn value(result: i64) -> Reply {
        Reply {
            result,
            bulk_out: 0,
        }
    }

    /// A failure with this errno.
    pub fn errno(e: i32) -> Reply {
        Reply::value(-(e as i64))
    }

    /// A success that wrote `n` bulk bytes and returns `n`.
    pub fn bytes(n: usize) -> Reply {
        Reply {
            result: n as i64,
            bulk_out: n,
        }
    }
}

/// A request that breaks its service's rules; the server answers `Status::Malformed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// A host service. Called concurrently from the server's consumer threads.
pub trait Handler: Send + Sync {
    /// Serves one lane's call.
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed>;
}

/// Ids below this are looked up by index: every call of the hot path is one.
const DENSE_IDS: usize = 256;

/// Work a consumer thread does when it has found nothing to serve for a while.
pub type IdleHook = Arc<dyn Fn() + Send + Sync>;

/// Services by id: the built-in std services plus any the embedder registers.
#[derive(Clone)]
pub struct ServiceTable {
    dense: Vec<Option<Arc<dyn Handler>>>,
    sparse: HashMap<u32, Arc<dyn Handler>>,
    idle: Vec<IdleHook>,
}

impl Default for ServiceTable {
    fn default() -> Self {
        ServiceTable {
            dense: vec![None; DENSE_IDS],
            sparse: HashMap::new(),
            idle: Vec::new(),
        }
    }
}

impl ServiceTable {
    /// Registers (or replaces) the handler for `id`.
    pub fn register(&mut self, id: u32, handler: Arc<dyn Handler>) {
        match self.dense.get_mut(id as usize) {
            Some(slot) => *slot = Some(handler),
            None => {
                self.sparse.insert(id, handler);
            }
        }
    }

    /// The handler for `id`, if any.
    pub fn get(&self, id: u32) -> Option<&Arc<dyn Handler>> {
        match self.dense.get(id as usize) {
            Some(h) => h.as_ref(),
            None => self.sparse.get(&id),
        }
    }

    /// Runs `hook` whenever a consumer thread goes idle (to flush buffered output).
    pub fn on_idle(&mut self, hook: IdleHook) {
        self.idle.push(hook);
    }

    /// Runs the idle hooks.
    pub(crate) fn idle(&self) {
        for h in &self.idle {
            h();
        }
    }

    /// The built-in services over the given capabilities.
    pub(crate) fn builtin(files: Arc<Files>, env: Arc<EnvPolicy>, process: Arc<Process>) -> Self {
        let mut t = ServiceTable::default();
        let stdio = files.clone();
        t.on_idle(Arc::new(move || {
            if let Err(e) = stdio.stdio.flush() {
                log::warn!("writing GPU stdout/stderr: {e}");
            }
        }));
        for s in Service::ALL {
            let h: Arc<dyn Handler> = match s {
                Service::Ping | Service::Exit | Service::Abort => process.clone(),
                Service::ClockRealtime | Service::Getrandom => process.clone(),
                Service::Getenv => env.clone(),
                _ => files.clone(),
            };
            t.register(s as u32, h);
        }
        t
    }
}

/// The errno for a host I/O error, in the wire's numbering (Linux's).
pub(crate) fn errno_of(e: &std::io::Error) -> i32 {
    use hostcall_abi::errno::*;
    use std::io::ErrorKind as K;
    if cfg!(target_os = "linux")
        && let Some(raw) = e.raw_os_error()
    {
        return raw;
    }
    match e.kind() {
        K::NotFound => ENOENT,
        K::PermissionDenied => EACCES,
        K::AlreadyExists => EEXIST,
        K::InvalidInput => EINVAL,
        K::NotADirectory => ENOTDIR,
        K::IsADirectory => EISDIR,
        K::StorageFull => ENOSPC,
        _ => EIO,
    }
}
