//! Host services, one module per capability, reached by numeric id. Everything is denied
//! until granted through [`crate::HostBuilder`]: files only beneath pre-opened directory
//! handles ([`sandbox`]), environment variables only as listed, sockets only to and on
//! the granted addresses (`net`).

mod env;
mod fd_table;
mod fs;
mod heap;
pub mod lifetime;
mod net;
mod open_flags;
mod process;
pub mod sandbox;
mod std_fs;
mod stdin;
mod stdio;
pub mod typed;
pub(crate) mod wait;

use std::collections::HashMap;
use std::sync::Arc;

use hostcall_abi::Service;
use hostcall_abi::std_services::{
    Environment, Fs, Identity, Lifecycle, Memory, Net, STD_DECLARED, StdHost, Time, serve_std,
};
use hostcall_abi::typed::Signature;

use crate::module::DeviceHeap;

pub(crate) use env::EnvPolicy;
pub(crate) use fd_table::FdTable;
pub(crate) use fs::{Files, MODES_DEFAULT};
pub(crate) use net::NetPolicy;
pub(crate) use process::Process;
pub use process::Termination;
pub(crate) use sandbox::{MountSpec, Sandbox, WorkingDir};
pub(crate) use stdin::Stdin;

#[cfg(feature = "fuzzing")]
pub(crate) use stdio::RETAINED_MAX;
pub(crate) use stdio::{Capture, Stdio};

/// One lane's request as a service sees it: copied out of the GPU-writable port before
/// the service runs, so what a service checks is what it uses.
pub struct Call<'a> {
    /// The service id the lane asked for.
    pub service: u32,
    /// The port the call came on: one consumer thread, or a blocking-pool job it handed
    /// the packet to, serves a port at a time.
    pub port: u32,
    /// The caller's linear block index.
    pub block: u32,
    /// The caller's thread index within its block.
    pub thread: u32,
    /// The arguments (see `hostcall_abi::service` for each service's convention).
    pub args: [u64; 6],
    /// The bytes the lane sent: as many as the argument [`Handler::input_len_arg`] names.
    pub input: &'a [u8],
    /// Room for the bytes the service sends back: the lane's bulk buffer
    /// (`BULK_PER_LANE` bytes in a shared packet, `PORT_BULK` for a lone lane), or, for a
    /// call served off its port, as much of it as [`Handler::answer_len`] says;
    /// [`Reply::bulk_out`] says how many it wrote.
    pub out: &'a mut [u8],
    /// While hostcalls are traced, room for the call's decoded arguments and result,
    /// which typed services write and the trace line shows instead of raw words.
    pub trace: Option<&'a mut String>,
    /// The launch's memory, which device pointers must lie in (none outside a launch).
    pub device: Option<&'a dyn hostcall_abi::typed::DeviceReader>,
    /// Words for the slot's `args[1..5]`, where a typed call's value of 5 to 32 bytes
    /// travels. Apart from [`Reply`], which stays two registers wide: the hot path of
    /// every call copies it (a larger one made each lane's serving 70% dearer). `None`
    /// when the handler is called; written only for a value that travels there.
    pub words: &'a mut Option<[u64; 4]>,
}

impl Call<'_> {
    /// Argument `i` as an output length bounded by the bulk buffer.
    pub fn len_arg(&self, i: usize) -> Result<usize, Malformed> {
        let (n, cap) = (self.args[i], self.out.len());
        if n > cap as u64 {
            return Err(Malformed(format!(
                "length argument {i} is {n}, over the {cap}-byte bulk buffer"
            )));
        }
        Ok(n as usize)
    }

    /// Argument `i` as a GPU file descriptor: a C `int`, so any value outside `i32`
    /// names no file (`EBADF`) rather than being truncated into one that does.
    pub fn fd_arg(&self, i: usize) -> Result<i32, i32> {
        i32::try_from(self.args[i] as i64).map_err(|_| hostcall_abi::errno::EBADF)
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

/// A host service. Called concurrently from the server's consumer threads and its
/// blocking pool; a panic is caught and answered `EIO`.
pub trait Handler: Send + Sync {
    /// Serves one lane's call.
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed>;

    /// The argument holding the length of the bytes the lane sends for `service`, which
    /// the server copies into [`Call::input`]; `None` when it sends none. By default the
    /// ABI's convention for built-in ids (`Service::input_len_arg`), none for others.
    fn input_len_arg(&self, service: u32) -> Option<usize> {
        Service::from_id(service).and_then(Service::input_len_arg)
    }

    /// Bytes of the bulk buffer this call's answer may fill, at most `cap` (the lane's
    /// bulk buffer): the room [`Call::out`] gets when the call is served off its port
    /// (on the blocking pool, or again after a wait), which host memory holds while the
    /// handler runs, a wait inside it included. A call that answers no bytes then keeps
    /// none, and a read keeps its length. Default: all `cap` bytes.
    fn answer_len(&self, service: u32, args: &[u64; 6], input: &[u8], cap: usize) -> usize {
        let _ = (service, args, input);
        cap
    }

    /// Whether some calls of `service` may block for long (a terminal, a FIFO, a slow
    /// file system): only for those does the server ask [`Handler::may_block`]. Asked
    /// once, when the handler is registered. Default: no.
    fn can_block(&self, service: u32) -> bool {
        let _ = service;
        false
    }

    /// Whether this call may block for long: such calls run on the server's blocking
    /// pool, never on a thread that polls other ports. Asked only where
    /// [`Handler::can_block`] said so. Default: yes.
    fn may_block(&self, service: u32, args: &[u64; 6]) -> bool {
        let _ = (service, args);
        true
    }

    /// Whether this call, which [`Handler::may_block`], may wait as long as another party
    /// likes (a socket's peer, which may be another GPU thread): the pool then starts a
    /// worker for it if none is idle, so that calls waiting on each other never starve
    /// the pool. Default: no.
    fn waits_on_peer(&self, service: u32, args: &[u64; 6]) -> bool {
        let _ = (service, args);
        false
    }

    /// Whether this call, which [`Handler::waits_on_peer`], is known to wait long (a
    /// write to a stdout that has no room): it is parked at once, rather than hold its
    /// port for `hostcall_abi::park::PARK_AFTER_NS` first. Default: no.
    fn parks_at_once(&self, service: u32, args: &[u64; 6]) -> bool {
        let _ = (service, args);
        false
    }

    /// Whether this call, which [`Handler::may_block`], only takes time and waits on
    /// nobody (a regular file's read or write, a copy from GPU memory into it): it then
    /// keeps its port until answered, or until it has waited
    /// `hostcall_abi::park::TAKES_TIME_PARK_AFTER_NS` (a hung mount). Any other is
    /// parked once it has waited `hostcall_abi::park::PARK_AFTER_NS`, its port freed for
    /// other calls; parking a call that only takes time that soon costs it a parked
    /// call's wake-up and collection (one GPU thread's 8 MiB file writes on the H100:
    /// 2.3 to 2.5 GB/s parked, 3.7 to 4.1 kept). Default: no.
    fn only_takes_time(&self, service: u32, args: &[u64; 6]) -> bool {
        let _ = (service, args);
        false
    }
}

/// A registered service: its handler and what the server needs to know before calling
/// it, settled at registration so that serving a lane costs one lookup.
#[derive(Clone)]
pub(crate) struct Entry {
    pub handler: Arc<dyn Handler>,
    /// [`Handler::input_len_arg`] for this id.
    pub input_arg: Option<usize>,
    /// [`Handler::can_block`] for this id.
    pub can_block: bool,
    /// Its name in traces, reports and the summary.
    pub name: Arc<str>,
    /// The calls it has left, for a service with a [`lifetime::Lifetime`]; `None` for
    /// one that always serves.
    pub life: Option<Arc<lifetime::Life>>,
}

/// Whether the consumer takes a packet now, or leaves it on its port for a later sweep
/// (the host has no room yet for a posted piece of it: the port waits, the piece is not
/// lost). Asked only of packets on ports that are not continuation ports.
pub(crate) trait Admission: Send + Sync {
    /// Whether the packet whose lanes' requests are `lanes` may be taken now.
    fn admits(&self, lanes: &mut dyn Iterator<Item = hostcall_abi::LaneSlot>) -> bool;
}

/// Ids of each range below this distance from its start are looked up by index: every
/// call of the hot path is one.
const DENSE_IDS: usize = 256;

/// Work a consumer thread does when it has found nothing to serve for a while.
pub type IdleHook = Arc<dyn Fn() + Send + Sync>;

/// What happens to a call whose id no handler serves and which no default handler
/// catches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unserved {
    /// The run halts: the host reports the GPU thread and the id, and the calling
    /// thread's launch ends (as with AMD's hostcall API). The default, because such a
    /// call is a mistake a program should not run past.
    #[default]
    Halt,
    /// The caller gets `ENOSYS` (a declared service that cannot fail then ends the
    /// launch with that errno), and the run goes on.
    Enosys,
}

/// Services by id: the built-in std services plus any the embedder registers.
#[derive(Clone)]
pub struct ServiceTable {
    /// Dense lookup of user ids from 0, by-name ids from `NAMED_IDS.start`, std's from
    /// `STD_IDS.start` ([`dense_index`]).
    dense: [Vec<Option<Entry>>; 3],
    sparse: HashMap<u32, Entry>,
    idle: Vec<IdleHook>,
    /// What a call nobody serves gets, when id 0 has no handler.
    pub(crate) unserved: Unserved,
    /// The launch's memory, for typed services' device pointers.
    pub(crate) device: Option<Arc<typed::DeviceAccess>>,
    /// What decides whether a posted packet is taken now.
    pub(crate) admission: Option<Arc<dyn Admission>>,
}

impl Default for ServiceTable {
    fn default() -> Self {
        ServiceTable {
            dense: [
                vec![None; DENSE_IDS],
                vec![None; DENSE_IDS],
                vec![None; DENSE_IDS],
            ],
            sparse: HashMap::new(),
            idle: Vec::new(),
            unserved: Unserved::default(),
            device: None,
            admission: None,
        }
    }
}

/// Which dense table serves `id`, and its index there: the ranges start at multiples
/// of 2^30 (user ids at 0, by-name ids at `NAMED_IDS`, std's at `STD_IDS`), so the top
/// bits pick the table. One shift and one compare: every call of the hot path looks up.
fn dense_index(id: u32) -> Option<(usize, usize)> {
    use hostcall_abi::typed::{NAMED_IDS, STD_IDS};
    const _: () = assert!(NAMED_IDS.start == 1 << 30 && STD_IDS.start == 2 << 30);
    let (table, i) = ((id >> 30) as usize, (id & ((1 << 30) - 1)) as usize);
    (table < 3 && i < DENSE_IDS).then_some((table, i))
}

impl ServiceTable {
    /// Registers (or replaces) the handler for `id`. Id 0 is the default handler: it
    /// serves every id nobody registered.
    pub fn register(&mut self, id: u32, handler: Arc<dyn Handler>) {
        let name =
            Service::from_id(id).map_or_else(|| format!("service {id}"), |s| s.name().into());
        self.register_named(id, handler, name.into());
    }

    /// [`ServiceTable::register`], with the name traces and reports give it.
    pub(crate) fn register_named(&mut self, id: u32, handler: Arc<dyn Handler>, name: Arc<str>) {
        let entry = Entry {
            input_arg: handler.input_len_arg(id),
            can_block: handler.can_block(id),
            handler,
            name,
            life: None,
        };
        match dense_index(id) {
            Some((t, i)) => self.dense[t][i] = Some(entry),
            None => {
                self.sparse.insert(id, entry);
            }
        }
    }

    /// Gives the service registered under `id` a lifetime: it serves while `life`
    /// has calls left.
    pub(crate) fn limit(&mut self, id: u32, life: Arc<lifetime::Life>) {
        let entry = match dense_index(id) {
            Some((t, i)) => self.dense[t][i].as_mut(),
            None => self.sparse.get_mut(&id),
        };
        if let Some(e) = entry {
            e.life = Some(life);
        }
    }

    /// The handler for `id`, if any.
    pub fn get(&self, id: u32) -> Option<&Arc<dyn Handler>> {
        self.entry(id).map(|e| &e.handler)
    }

    /// The registration of `id`, if any. Inlined into the consumer's loop: a dense id is
    /// an index; only ids outside the dense ranges pay a call and a hash.
    #[inline(always)]
    pub(crate) fn entry(&self, id: u32) -> Option<&Entry> {
        match dense_index(id) {
            Some((t, i)) => self.dense[t][i].as_ref(),
            None => self.sparse_entry(id),
        }
    }

    #[cold]
    #[inline(never)]
    fn sparse_entry(&self, id: u32) -> Option<&Entry> {
        self.sparse.get(&id)
    }

    /// The handler that serves `id`: its own, else the default handler (id 0).
    #[inline(always)]
    pub(crate) fn serving(&self, id: u32) -> Option<&Entry> {
        self.entry(id).or_else(|| self.dense[0][0].as_ref())
    }

    /// The name of `id` in traces and reports.
    pub(crate) fn name(&self, id: u32) -> String {
        self.entry(id)
            .map_or_else(|| format!("service {id}"), |e| e.name.to_string())
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
    pub(crate) fn builtin(
        files: Arc<Files>,
        env: Arc<EnvPolicy>,
        process: Arc<Process>,
        net: Arc<NetPolicy>,
        heap: Arc<dyn DeviceHeap>,
    ) -> Self {
        let startup_blocks = env.startup();
        let mut t = ServiceTable::default();
        let stdio = files.clone();
        t.on_idle(Arc::new(move || stdio.stdio.flush()));
        t.admission = Some(files.clone());
        let ping: Arc<dyn Handler> = process.clone();
        t.register(Service::Ping as u32, ping);
        for s in [Service::WritePosted, Service::OrderedFromDevice] {
            t.register(s as u32, files.clone());
        }
        let caps = StdCaps {
            net: Arc::new(net::Sockets {
                files: files.clone(),
                policy: net,
            }),
            files,
            env: Arc::new(env::HostEnvironment {
                policy: env,
                startup: startup_blocks,
            }),
            process,
            heap: Arc::new(heap::HeapService(heap)),
        };
        let mut each = typed::Collect {
            handlers: Vec::new(),
            fds: caps.files.clone(),
        };
        serve_std(&caps, &mut each);
        for (sig, h) in each.handlers {
            t.register_named(sig.id, h, sig.name.into());
        }
        t
    }
}

/// What serves std's declared traits in one run.
pub(crate) struct StdCaps {
    files: Arc<Files>,
    env: Arc<env::HostEnvironment>,
    process: Arc<Process>,
    net: Arc<net::Sockets>,
    heap: Arc<heap::HeapService>,
}

impl StdHost for StdCaps {
    fn identity(&self) -> Arc<impl Identity> {
        Arc::new(process::HostIdentity)
    }

    fn lifecycle(&self) -> Arc<impl Lifecycle> {
        self.process.clone()
    }

    fn memory(&self) -> Arc<impl Memory> {
        self.heap.clone()
    }

    fn time(&self) -> Arc<impl Time> {
        Arc::new(process::HostTime)
    }

    fn environment(&self) -> Arc<impl Environment> {
        self.env.clone()
    }

    fn fs(&self) -> Arc<impl Fs> {
        self.files.clone()
    }

    // Sockets never block a host thread: a call that is not ready waits in the reactor
    // (`wait`).
    fn net(&self) -> Arc<impl Net> {
        self.net.clone()
    }
}

/// Every service of std's declared traits, which every host serves.
pub fn std_declared() -> impl Iterator<Item = &'static Signature> {
    STD_DECLARED.iter().flat_map(|sigs| sigs.iter())
}

/// Whether an error says the fd is not ready (it is non-blocking on the host).
pub(crate) fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
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
