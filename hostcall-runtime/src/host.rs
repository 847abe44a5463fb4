//! [`Host`]: the capabilities granted to a GPU program and the loop that runs one
//! launch while serving its hostcalls.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostcall_abi::{
    ABI_VERSION, DeviceConfig, Doorbell, FLAG_SINGLE_LANE, FaultKind, FaultRecord, HEAP_RESERVED,
    LaunchState, Port, PortState, THREAD_EXIT_KERNEL, ThreadArea,
};

use hostcall_abi::typed::{Args, Dispatch, Errno, HostClosure, NAMED_IDS, Ret};
use hostcall_client::typed::HostFn;

use crate::guest_log::GuestLog;
use crate::module::{DeviceMemory, GpuModule, KernelArg, Launch, LaunchEnd};
use crate::scope::Channel;
use crate::server::{Debug, Ports, Reactor, Server, Who};
use crate::services::lifetime::{Life, Lifetime, Serving};
use crate::services::sandbox::Access;
use crate::services::typed::{
    Closure, Declared, DefaultHandler, DeviceAccess, UnservedCall, methods,
};
use crate::services::{
    Capture, EnvPolicy, FdTable, Files, Handler, MODES_DEFAULT, MountSpec, NetPolicy, Process,
    Sandbox, ServiceTable, Stdin, Stdio, Termination, Unserved,
};
use crate::stream::{Callbacks, LaunchStreams, Registered, StreamHandle, StreamReport, StreamSpec};
use crate::{Error, Result};

/// Ports in the channel unless set: enough for 128 warps in flight at once.
pub const DEFAULT_PORTS: usize = 128;
/// The most consumer threads [`default_consumers`] gives.
pub const MAX_DEFAULT_CONSUMERS: usize = 4;

/// Consumer threads unless set: one per four of this machine's CPUs, from one to
/// [`MAX_DEFAULT_CONSUMERS`]. Each spins while its ports are busy, so a small machine
/// keeps its CPUs for the rest of the program; on the H100's hosts (16 and 32 CPUs) it
/// gives four (measured in `hostcall_bench --only consumers`; see
/// `bench-results/gpu-issue16.md`).
pub fn default_consumers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (cpus / 4).clamp(1, MAX_DEFAULT_CONSUMERS)
}
/// Device heap unless set: 256 MiB.
pub const DEFAULT_HEAP_BYTES: u64 = 256 << 20;
/// Files the GPU may hold open at once unless set; never more than the process's
/// open-file limit allows with room to spare for the host (see [`HostBuilder::build`]).
pub const DEFAULT_MAX_OPEN_FILES: usize = 1024;
/// How long a launch may run unless set (or `HOSTCALL_TIMEOUT_S` says otherwise; 0 there
/// means no limit): long for a GPU program, short against a hung CI job.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Bytes of each of stdout and stderr a capture keeps unless set.
pub const DEFAULT_CAPTURE_LIMIT: usize = 64 << 20;
/// Threads serving calls that may block (file system, stdin) unless set.
pub const DEFAULT_BLOCKING_THREADS: usize = 4;
/// The most stream reader threads [`default_stream_readers`] gives.
pub const MAX_DEFAULT_STREAM_READERS: usize = 16;

/// Threads emptying a launch's stream rings unless set (only a launch given a stream
/// starts them): one per two of this machine's CPUs, from one to
/// [`MAX_DEFAULT_STREAM_READERS`]. Taking messages is the host's work per message, so
/// a stream's rate grows with its readers (on the H200s' 32-CPU host, 64-byte messages:
/// 23.6 GB/s with 8, 41.5 with 16; `bench-results/gpu-issue16.md`); each spins only
/// while messages come and sleeps when its rings are empty.
pub fn default_stream_readers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (cpus / 2).clamp(1, MAX_DEFAULT_STREAM_READERS)
}
/// How long a killed launch gets to end before the run reports anyway: its threads that
/// call the host trap within a round trip; one that never calls keeps running until the
/// process exits.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// Longest the end-of-run drain of published requests may take (unless the timeout
/// leaves less), and the least it gets even when the timeout has passed: answering a
/// killed launch's requests takes microseconds.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
const DRAIN_MIN: Duration = Duration::from_millis(100);
/// Longest the end of a run waits for the host's stdout and stderr to take the GPU's
/// output (what they have not taken by then follows as they do).
const OUTPUT_WAIT: Duration = Duration::from_millis(500);
/// How long a GPU thread waits for a port or an answer before it gives up and ends the
/// launch with a report, unless set: far beyond any queueing delay, so that only a host
/// that stopped serving (or a service that blocks) trips it.
pub const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// Wake words of parked calls a launch gets at most (one per GPU thread below it):
/// 8 MiB of host-pinned memory.
const WAKE_WORDS_MAX: u64 = 1 << 20;
/// How often the host asks the backend whether the launch ended: at first often, so
/// short launches end promptly, then, for launches that run on, rarely enough that the
/// asking costs no noticeable CPU.
const POLL_INTERVAL: Duration = Duration::from_micros(200);
const POLL_INTERVAL_LONG: Duration = Duration::from_millis(5);
const LONG_RUN: Duration = Duration::from_millis(100);

/// An embedder's service: its id, handler, and the name traces give it (by default the
/// std service's, or `service <id>`).
pub(crate) struct Extra {
    id: u32,
    handler: Arc<dyn Handler>,
    name: Option<Arc<str>>,
    /// Its calls left, for a closure served with a [`Lifetime`].
    life: Option<Arc<Life>>,
}

/// The entries that serve the declared trait `S` with `imp`, under the ids `declared`
/// gives their names.
pub(crate) fn declared_extras<S, T>(
    declared: &mut Declared,
    imp: T,
    life: Option<Arc<Life>>,
) -> Vec<Extra>
where
    S: ?Sized + Dispatch<T> + 'static,
    T: Send + Sync + 'static,
{
    methods::<S, T>(Arc::new(imp))
        .into_iter()
        .map(|(sig, handler)| Extra {
            id: declared.id_for(sig),
            handler,
            name: Some(sig.name.into()),
            life: life.clone(),
        })
        .collect()
}

/// The entry that serves the host closure `f` under the next id of `declared`, and its
/// handle.
pub(crate) fn closure_extra<A, R, F>(
    declared: &mut Declared,
    f: F,
    life: Option<Arc<Life>>,
) -> (Extra, HostFn<A, R>)
where
    A: Args + 'static,
    R: Ret + 'static,
    F: HostClosure<A, R>,
{
    let id = declared.next_id();
    let handler = Arc::new(Closure {
        f,
        _types: PhantomData,
    });
    let name = format!("closure#{}", id - NAMED_IDS.start);
    let extra = Extra {
        id,
        handler,
        name: Some(name.into()),
        life,
    };
    (extra, HostFn::new(id))
}

/// Builds a [`Host`]. Everything the GPU could reach on the host is denied until granted.
#[must_use]
pub struct HostBuilder {
    ports: usize,
    consumers: usize,
    heap_bytes: u64,
    max_open_files: usize,
    timeout: Option<Duration>,
    wait_limit: Duration,
    mounts: Vec<MountSpec>,
    cwd: String,
    env: EnvPolicy,
    capture: bool,
    pub(crate) capture_limit: usize,
    pub(crate) blocking_threads: usize,
    stream_readers: usize,
    echo: bool,
    group_other_write: bool,
    mount_points_inside: bool,
    pub(crate) stdin: bool,
    debug: Debug,
    single_lane: bool,
    /// Embedder services.
    extra: Vec<Extra>,
    pub(crate) declared: Declared,
    /// Streams kernels write to ([`Host::stream`]).
    streams: Vec<Registered>,
    unserved: Unserved,
    /// What the GPU's sockets may reach, and the grants that did not parse.
    net: Arc<NetPolicy>,
    net_errors: Vec<String>,
    max_sockets: usize,
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            ports: DEFAULT_PORTS,
            consumers: consumers_from_env(),
            heap_bytes: DEFAULT_HEAP_BYTES,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            timeout: timeout_from_env(),
            wait_limit: DEFAULT_WAIT_LIMIT,
            mounts: Vec::new(),
            cwd: "/".into(),
            env: EnvPolicy::default(),
            capture: false,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            blocking_threads: DEFAULT_BLOCKING_THREADS,
            stream_readers: default_stream_readers(),
            echo: true,
            group_other_write: false,
            mount_points_inside: false,
            stdin: false,
            debug: debug_from_env(),
            single_lane: std::env::var_os("HOSTCALL_SINGLE_LANE").is_some_and(|v| v != "0"),
            extra: Vec::new(),
            streams: Vec::new(),
            declared: Declared::default(),
            unserved: Unserved::default(),
            net: Arc::default(),
            net_errors: Vec::new(),
            max_sockets: hostcall_abi::net::DEFAULT_MAX_SOCKETS,
        }
    }
}

impl HostBuilder {
    /// Ports in the channel (warps that can have a call in flight at once).
    pub fn ports(mut self, n: usize) -> Self {
        self.ports = n;
        self
    }

    /// Host threads serving the ports (default: `HOSTCALL_CONSUMERS`, else
    /// [`default_consumers`]); port `p` is served by thread `p % n` alone.
    pub fn consumers(mut self, n: usize) -> Self {
        self.consumers = n;
        self
    }

    /// Bytes of device memory for the GPU's `malloc`, at most
    /// [`hostcall_abi::HEAP_MAX_BYTES`] (just under 64 GiB).
    pub fn heap_bytes(mut self, n: u64) -> Self {
        self.heap_bytes = n;
        self
    }

    /// Files the GPU may hold open at once (beyond stdio).
    pub fn max_open_files(mut self, n: usize) -> Self {
        self.max_open_files = n;
        self
    }

    /// Stops a launch that runs longer than this (default [`DEFAULT_TIMEOUT`], or
    /// `HOSTCALL_TIMEOUT_S`): its threads that call the host trap, and the run returns
    /// [`Error::Timeout`] naming the kernel and the calls in flight.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// Lets a launch run as long as it likes.
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }

    /// How long a GPU thread may wait for a port or an answer before it gives up: it then
    /// records which port, sequence and thread, and ends the launch, which the run
    /// reports. Zero waits forever (for services that may block, like a granted stdin).
    pub fn wait_limit(mut self, limit: Duration) -> Self {
        self.wait_limit = limit;
        self
    }

    /// Lets the GPU open, create and stat files below the host directory `dir`, which
    /// it sees at the absolute guest path `guest` (it never learns `dir`). `/`, /proc,
    /// /sys and /dev are refused.
    pub fn preopen_dir(self, dir: impl AsRef<Path>, guest: &str) -> Self {
        self.mount(dir, guest, Access::ReadWrite)
    }

    /// As [`HostBuilder::preopen_dir`], for reading only: opening to write, create,
    /// truncate or append answers `EROFS`.
    pub fn preopen_dir_readonly(self, dir: impl AsRef<Path>, guest: &str) -> Self {
        self.mount(dir, guest, Access::ReadOnly)
    }

    fn mount(mut self, dir: impl AsRef<Path>, guest: &str, access: Access) -> Self {
        self.mounts.push(MountSpec {
            host: dir.as_ref().to_path_buf(),
            guest: guest.to_owned(),
            access,
        });
        self
    }

    /// Lets the GPU connect (TCP) and send (UDP) to `spec`, `HOST:PORTS`: an IPv4
    /// address, an IPv6 one in brackets, or a name (resolved now, on the host; the GPU
    /// resolves only granted names), then a port, a range `A-B`, or `*`. With no grant
    /// at all, no socket opens (`EACCES`).
    pub fn allow_connect(mut self, spec: &str) -> Self {
        self.grant_net(spec, false);
        self
    }

    /// Lets the GPU listen (TCP) and bind (UDP) on `spec`, written as for
    /// [`HostBuilder::allow_connect`]. Binding port 0 (the system picks one) needs only
    /// some grant of the address.
    pub fn allow_listen(mut self, spec: &str) -> Self {
        self.grant_net(spec, true);
        self
    }

    fn grant_net(&mut self, spec: &str, listen: bool) {
        if let Err(e) = Arc::make_mut(&mut self.net).grant(spec, listen) {
            self.net_errors.push(format!("`{spec}`: {e}"));
        }
    }

    /// Sockets the GPU may hold open at once (default
    /// [`hostcall_abi::net::DEFAULT_MAX_SOCKETS`]); each also counts as an open file.
    pub fn max_sockets(mut self, n: usize) -> Self {
        self.max_sockets = n;
        self
    }

    /// The GPU's working directory, a guest path (default `/`): relative paths start
    /// there, and `getcwd` returns it.
    pub fn cwd(mut self, guest: &str) -> Self {
        self.cwd = guest.to_owned();
        self
    }

    /// Sets an environment variable for the GPU program. `env::vars()` on the GPU lists
    /// inherited variables in the host's order, then set ones in the order first set.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.set(name.as_bytes(), value.as_bytes());
        self
    }

    /// The program's arguments, its name first: what `env::args()` returns on the GPU
    /// (empty unless set).
    pub fn args<S: AsRef<[u8]>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.env.args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
        self
    }

    /// Lets the GPU read the host's value of `name`.
    pub fn inherit_env(mut self, name: &str) -> Self {
        self.env.inherit.push(name.as_bytes().to_vec());
        self
    }

    /// Lets the GPU read every host environment variable.
    pub fn inherit_all_env(mut self) -> Self {
        self.env.inherit_all = true;
        self
    }

    /// Keeps a copy of what the GPU writes to fds 1 and 2 in the [`RunReport`].
    pub fn capture_output(mut self, capture: bool) -> Self {
        self.capture = capture;
        self
    }

    /// Bytes of each of stdout and stderr a capture keeps (default
    /// [`DEFAULT_CAPTURE_LIMIT`]); the rest is counted, and a note ends the capture.
    pub fn capture_limit(mut self, bytes: usize) -> Self {
        self.capture_limit = bytes;
        self
    }

    /// Threads that serve calls which may block (default [`DEFAULT_BLOCKING_THREADS`]):
    /// file system calls and stdin, kept off the threads that poll the ports.
    pub fn blocking_threads(mut self, n: usize) -> Self {
        self.blocking_threads = n.max(1);
        self
    }

    /// Threads that empty a launch's stream rings (default [`default_stream_readers`]),
    /// each ring read by one of them, in order.
    pub fn stream_readers(mut self, n: usize) -> Self {
        self.stream_readers = n.max(1);
        self
    }

    /// Whether GPU writes to fds 1 and 2 reach the host's stdout and stderr (default on).
    pub fn echo_output(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }

    /// Lets the GPU give files and directories group and other write permission
    /// (default off: `chmod`, `fchmod`, `open` and `mkdir` drop those bits, whatever the
    /// process's umask).
    pub fn allow_group_other_write(mut self, allow: bool) -> Self {
        self.group_other_write = allow;
        self
    }

    /// Lets a pre-opened directory have file systems mounted below it, which paths then
    /// cross (default off: such a grant is refused when the host is built and before
    /// each run, naming the mount point, since a bind mount can bring any host
    /// directory inside it).
    pub fn allow_mount_points_inside(mut self, allow: bool) -> Self {
        self.mount_points_inside = allow;
        self
    }

    /// Lets fd 0 read the host's stdin.
    pub fn stdin(mut self, allow: bool) -> Self {
        self.stdin = allow;
        self
    }

    /// Logs every hostcall (default: on when `HOSTCALL_DEBUG` is set, and not `0` or
    /// `summary`).
    pub fn trace(mut self, on: bool) -> Self {
        self.debug.trace = on;
        self
    }

    /// Prints a table at the end of each run: calls, errors, and total and mean host
    /// time per service (default: on when `HOSTCALL_DEBUG=summary`).
    pub fn summary(mut self, on: bool) -> Self {
        self.debug.summary = on;
        self
    }

    /// One-lane packets instead of one packet per warp (default: off, or on when
    /// `HOSTCALL_SINGLE_LANE` is set and not `0`).
    pub fn single_lane(mut self, on: bool) -> Self {
        self.single_lane = on;
        self
    }

    /// Serves service `id` with `handler`, a raw handler of positional arguments (ids of
    /// built-in services are replaced, and a second registration of an id replaces the
    /// first). Id 0 is the default handler. Declared services ([`HostBuilder::serve`])
    /// are the typed way.
    pub fn service(mut self, id: u32, handler: Arc<dyn Handler>) -> Self {
        self.extra.push(Extra {
            id,
            handler,
            name: None,
            life: None,
        });
        self
    }

    /// Serves the declared trait `S` (written `dyn Trait`) with `imp`: each method under
    /// its fixed id, or under an id the host assigns to its name and writes into every
    /// module that calls it. Serving a trait again replaces the earlier implementation.
    ///
    /// ```ignore
    /// let host = Host::builder().serve::<dyn Kv, _>(MyKv::default()).build()?;
    /// ```
    pub fn serve<S, T>(self, imp: T) -> Self
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static,
    {
        self.add_declared::<S, T>(imp, None)
    }

    /// [`HostBuilder::serve`] for as long as `serving` allows: every method's calls
    /// count against it, and once it has ended each gets `EPIPE` (a method that cannot
    /// fail ends its launch with it).
    pub fn serve_for<S, T>(self, serving: &Serving, imp: T) -> Self
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static,
    {
        self.add_declared::<S, T>(imp, Some(serving.life.clone()))
    }

    fn add_declared<S, T>(mut self, imp: T, life: Option<Arc<Life>>) -> Self
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static,
    {
        let extras = declared_extras::<S, T>(&mut self.declared, imp, life);
        self.extra.extend(extras);
        self
    }

    /// Answers every call of an id nobody serves with `f` (AMD's default handler, id 0):
    /// its value is the call's result, its errno the call's failure. A module's
    /// declared service with a fixed id that this host does not serve is then loaded,
    /// its calls going to `f`.
    pub fn default_handler(
        mut self,
        f: impl Fn(&UnservedCall) -> std::result::Result<i64, Errno> + Send + Sync + 'static,
    ) -> Self {
        self.extra.push(Extra {
            id: 0,
            handler: Arc::new(DefaultHandler(f)),
            name: Some("default handler".into()),
            life: None,
        });
        self
    }

    /// What a call of an id nobody serves gets when there is no default handler
    /// (default [`Unserved::Halt`]: the run halts, naming the GPU thread and the id).
    pub fn unserved(mut self, policy: Unserved) -> Self {
        self.unserved = policy;
        self
    }

    /// Checks the settings and opens the pre-opened directories. The open-file limit is
    /// lowered to leave the host a quarter of the process's `RLIMIT_NOFILE` (at least 64
    /// descriptors) for its own files, the driver's and the pre-opens.
    pub fn build(self) -> Result<Host> {
        if self.debug.trace {
            // Tracing must not depend on the embedder remembering to set up a logger; one
            // it set up already is kept (`init_logging` only fills an empty slot).
            crate::start_logging(true);
        }
        if self.ports == 0 || self.ports > u32::MAX as usize {
            return Err(Error::InvalidLaunch(format!("{} ports", self.ports)));
        }
        if self.heap_bytes < 2 * HEAP_RESERVED as u64 {
            return Err(Error::InvalidLaunch(format!(
                "a {}-byte heap is too small",
                self.heap_bytes
            )));
        }
        if self.heap_bytes > hostcall_abi::HEAP_MAX_BYTES {
            return Err(Error::InvalidLaunch(format!(
                "a {}-byte heap is more than the device allocator addresses \
                 (hostcall_abi::HEAP_MAX_BYTES, {} bytes)",
                self.heap_bytes,
                hostcall_abi::HEAP_MAX_BYTES
            )));
        }
        if !self.net_errors.is_empty() {
            return Err(Error::NetGrant(self.net_errors.join("; ")));
        }
        let files_allowed = open_files_allowed(self.max_open_files, nofile_limit());
        if files_allowed < self.max_open_files {
            log::info!(
                "the GPU may hold {files_allowed} files open, not {}: the process's open-file limit leaves room for the host",
                self.max_open_files
            );
        }
        Ok(Host {
            env: Arc::new(self.env),
            files_allowed,
            sandbox: Arc::new(Sandbox::open(
                &self.mounts,
                &self.cwd,
                self.mount_points_inside,
            )?),
            b: HostBuilder {
                mounts: Vec::new(),
                env: EnvPolicy::default(),
                ..self
            },
        })
    }
}

/// What `HOSTCALL_DEBUG` asks for: unset or `0` nothing, `summary` the table, anything
/// else a trace line per call.
fn debug_from_env() -> Debug {
    match std::env::var("HOSTCALL_DEBUG").as_deref() {
        Err(_) | Ok("0") => Debug::default(),
        Ok("summary") => Debug {
            summary: true,
            ..Debug::default()
        },
        Ok(_) => Debug {
            trace: true,
            ..Debug::default()
        },
    }
}

/// `HOSTCALL_TIMEOUT_S` as a timeout (`0`: none), else [`DEFAULT_TIMEOUT`].
/// `HOSTCALL_CONSUMERS` (a count of at least one), else [`default_consumers`].
fn consumers_from_env() -> usize {
    match std::env::var("HOSTCALL_CONSUMERS").map(|v| v.parse::<usize>()) {
        Ok(Ok(n)) if n > 0 => n,
        Ok(_) => {
            log::warn!("HOSTCALL_CONSUMERS is not a count of threads; using the default");
            default_consumers()
        }
        Err(_) => default_consumers(),
    }
}

fn timeout_from_env() -> Option<Duration> {
    match std::env::var("HOSTCALL_TIMEOUT_S")
        .ok()
        .map(|v| v.parse::<f64>())
    {
        Some(Ok(0.0)) => None,
        Some(Ok(s)) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
        Some(_) => {
            log::warn!("HOSTCALL_TIMEOUT_S is not a number of seconds; using the default");
            Some(DEFAULT_TIMEOUT)
        }
        None => Some(DEFAULT_TIMEOUT),
    }
}

/// The process's soft limit on open files, if it has one.
fn nofile_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Files the GPU may hold open: what was asked, less what the host keeps for itself out
/// of a `soft` process limit.
fn open_files_allowed(asked: usize, soft: Option<u64>) -> usize {
    match soft {
        None => asked,
        Some(soft) => {
            let spare = (soft / 4).max(64);
            asked.min(soft.saturating_sub(spare).try_into().unwrap_or(usize::MAX))
        }
    }
}

/// What the GPU program did, once its launch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every thread returned.
    Completed,
    /// The program called `exit(code)`; this is `code & 0xff`, as a Linux parent sees it.
    Exited(u8),
    /// A thread aborted, or panicked (std ends a panic in an abort on the GPU); its
    /// message went to stderr.
    Aborted {
        /// The aborting thread's GPU, by its place in a run over several
        /// ([`Host::run_all`]); `None` in a run on one.
        gpu: Option<u32>,
        /// Linear block index of the aborting thread.
        block: u32,
        /// Thread index within the block.
        thread: u32,
        /// Whether it panicked: the run then ends with 101, as a Rust program's panic
        /// does, and with 134 (SIGABRT's status) for a plain `abort`.
        panicked: bool,
    },
    /// The launch failed without the program asking to end (illegal address, ...).
    Faulted(String),
}

impl Outcome {
    /// What went wrong, in one sentence naming the GPU thread, when the program did not
    /// end by returning or calling `exit` (std has printed a panic's own message).
    pub fn failure(&self) -> Option<String> {
        match self {
            Outcome::Completed | Outcome::Exited(_) => None,
            &Outcome::Aborted {
                gpu,
                block,
                thread,
                panicked,
            } => Some(format!(
                "GPU thread ({}) {}; the run ends with {}",
                Who { gpu, block, thread },
                if panicked { "panicked" } else { "aborted" },
                self.exit_code()
            )),
            Outcome::Faulted(why) => Some(format!("the GPU program faulted: {why}")),
        }
    }

    /// The process exit code that reflects this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Completed => 0,
            Outcome::Exited(c) => *c as i32,
            Outcome::Aborted { panicked: true, .. } => 101,
            Outcome::Aborted { .. } => 134,
            Outcome::Faulted(_) => 70,
        }
    }
}

/// The result of [`Host::run`].
#[derive(Clone, Debug)]
pub struct RunReport {
    /// How the program ended.
    pub outcome: Outcome,
    /// What the GPU wrote to fd 1, if capturing.
    pub stdout: Vec<u8>,
    /// What the GPU wrote to fd 2, if capturing.
    pub stderr: Vec<u8>,
    /// Lane calls served.
    pub calls: u64,
    /// From launch until it ended and every hostcall it made was served, posted output
    /// included.
    pub elapsed: Duration,
    /// With [`HostBuilder::summary`] (`HOSTCALL_DEBUG=summary`): the table printed to
    /// stderr at the end of the run, of calls, errors and host time per service.
    pub summary: Option<String>,
    /// Each stream's account of the launch, in the order of [`Host::stream`].
    pub streams: Vec<StreamReport>,
}

/// What the launches of one run share, as the threads of one process do: the open
/// files and stdin, the reactor their calls wait in, how the program asked to end, and
/// the log of what the GPU caused.
#[derive(Clone)]
pub(crate) struct ProcessState {
    table: Arc<Mutex<FdTable>>,
    stdin: Arc<Stdin>,
    reactor: Arc<Reactor>,
    process: Arc<Process>,
    log: Arc<GuestLog>,
}

impl ProcessState {
    /// The run is over: the reactor lets every call still waiting go, and the files
    /// close now, outside the table's lock (a pool worker still inside a service holds
    /// the one file it is using, if any).
    pub(crate) fn end(&self) {
        self.reactor.stop();
        let (files, opens) = {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            (t.take_all(), t.release_opens())
        };
        drop(files);
        for (dir, rel) in opens {
            // The other end of a FIFO a pool thread still waits to open; its open then
            // returns, and its answer is dropped.
            let mut o = cap_std::fs::OpenOptions::new();
            o.read(true).write(true);
            cap_std::fs::OpenOptionsExt::custom_flags(&mut o, hostcall_abi::fcntl::O_NONBLOCK);
            drop(dir.open_with(&rel, &o));
        }
        self.log.finish();
    }
}

/// The host side of GPU programs: capabilities, channel sizing and the serving loop.
pub struct Host {
    pub(crate) b: HostBuilder,
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) files_allowed: usize,
    pub(crate) env: Arc<EnvPolicy>,
}

impl Host {
    /// A builder with everything denied.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Serves `f` to kernels as a host closure (AMDGPU.jl's `HostCallHolder`): pass the
    /// handle's [`HostFn::raw`] as a kernel argument, and the kernel calls it with
    /// typed arguments (`HostFn::call`). Its arguments are up to four plain values of at
    /// most 36 bytes together (they travel in the request's argument words).
    /// It serves every call, for as long as the host lives ([`Lifetime::Continuous`]).
    pub fn hostcall<A, R, F>(&mut self, f: F) -> HostFn<A, R>
    where
        A: Args + 'static,
        R: Ret + 'static,
        F: HostClosure<A, R>,
    {
        self.add_closure(f, None)
    }

    /// [`Host::hostcall`] for a number of calls (AMDGPU.jl's hostcall lifetimes): the
    /// handle, and the host's hold on the lifetime, with which any thread can finish
    /// the service or allow one more call while kernels run. A call past the lifetime
    /// gets `EPIPE`; one of a closure that cannot fail ends its launch with it.
    pub fn hostcall_for<A, R, F>(&mut self, lifetime: Lifetime, f: F) -> (HostFn<A, R>, Serving)
    where
        A: Args + 'static,
        R: Ret + 'static,
        F: HostClosure<A, R>,
    {
        let serving = Serving::new(lifetime);
        (self.add_closure(f, Some(serving.life.clone())), serving)
    }

    fn add_closure<A, R, F>(&mut self, f: F, life: Option<Arc<Life>>) -> HostFn<A, R>
    where
        A: Args + 'static,
        R: Ret + 'static,
        F: HostClosure<A, R>,
    {
        let (extra, handle) = closure_extra(&mut self.b.declared, f, life);
        self.b.extra.push(extra);
        handle
    }

    /// Serves a tagged stream (dh_comms's messages): pass `KernelArg::Stream(handle)` to
    /// a kernel, which opens it with `hostcall_client::stream::Stream::from_raw` and
    /// submits messages without waiting for the host. While a launch runs, the reader
    /// threads ([`HostBuilder::stream_readers`]) empty its rings into `callbacks`, each
    /// writer's messages in its order; the launch's [`RunReport::streams`] accounts for
    /// them.
    pub fn stream(&mut self, spec: StreamSpec, callbacks: Callbacks) -> StreamHandle {
        self.b.streams.push(Registered {
            spec,
            callbacks: Arc::new(callbacks),
        });
        StreamHandle(self.b.streams.len() as u32 - 1)
    }

    /// Runs `launch` on `module`, serving hostcalls until it ends. The module's declared
    /// services are checked against what this host serves first, and bound to their ids.
    pub fn run(&self, module: &mut dyn GpuModule, launch: &Launch) -> Result<RunReport> {
        let process = self.process_state();
        let report = self.run_in(module, launch, &process, None);
        process.end();
        report
    }

    /// Runs each launch on its module at once (a module on each GPU of the machine, say)
    /// as one process: one file table, one sandbox, one stdout and one exit. Each GPU
    /// has its own ports and consumer threads; each GPU thread's lines stay whole and in
    /// its order. Thread names and the host's lines name the GPU by its place in `runs`
    /// (`GPU 1 block 0 thread 3`). An `exit` or `abort` on one GPU ends the others' next
    /// hostcalls. The reports come in the order of `runs`; each captures its own GPU's
    /// output. ([`Host::scope`] starts and ends launches one by one.)
    pub fn run_all<M: GpuModule + Send>(&self, runs: &mut [(M, Launch)]) -> Vec<Result<RunReport>> {
        self.scope(|s| {
            let running: Vec<_> = runs
                .iter_mut()
                .enumerate()
                .map(|(i, (module, launch))| {
                    s.launch_on(module, launch, self.channel().gpu(i as u32))
                })
                .collect();
            running
                .into_iter()
                .map(|r| r.and_then(|r| r.wait()))
                .collect()
        })
    }

    /// What the launches of one run share.
    pub(crate) fn process_state(&self) -> ProcessState {
        let table = Arc::new(Mutex::new(FdTable::new(
            self.files_allowed,
            self.b.max_sockets,
        )));
        let log = Arc::<GuestLog>::default();
        ProcessState {
            table,
            stdin: Arc::new(Stdin::new(self.b.stdin)),
            reactor: Arc::default(),
            process: Arc::new(Process::new(log.clone())),
            log,
        }
    }

    /// Runs `launch` on `module` as part of `process`: alone, or, with `channel`, beside
    /// other launches (whose exit ends it), with the channel's own services and as the
    /// GPU it names.
    pub(crate) fn run_in(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        process: &ProcessState,
        channel: Option<&Channel>,
    ) -> Result<RunReport> {
        module.bind_to_thread()?;
        if let Some(kernel) = module.still_running()? {
            return Err(Error::StillRunning { kernel });
        }
        self.sandbox.check_mount_points()?;
        let version = module.abi_version()?;
        if version != ABI_VERSION {
            return Err(Error::AbiMismatch {
                module: version,
                host: ABI_VERSION,
            });
        }
        let catch_all = (self.b.extra.iter())
            .chain(channel.iter().flat_map(|c| &c.extra))
            .any(|e| e.id == 0);
        channel
            .map_or(&self.b.declared, |c| &c.declared)
            .bind(module, catch_all)?;
        let threads = launch.threads();
        if threads == 0 {
            return Err(Error::InvalidLaunch(
                "a launch needs at least one thread".into(),
            ));
        }

        let report = self.run_launch(module, launch, process, channel, threads);
        // After the drain, no thread reaches the launch's memory (a kernel still running
        // keeps it).
        module.end_launch();
        report
    }

    /// [`Host::run_in`] once the module is ready: allocates the launch's memory, runs
    /// it and serves it until it ends.
    fn run_launch(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        process: &ProcessState,
        channel: Option<&Channel>,
        threads: u64,
    ) -> Result<RunReport> {
        let gpu = channel.and_then(|c| c.gpu);
        let ports = module.alloc_host_mapped(self.b.ports * size_of::<Port>())?;
        let fault = module.alloc_host_mapped(size_of::<FaultRecord>())?;
        let doorbells = module.alloc_host_mapped(self.b.ports * size_of::<Doorbell>())?;
        // A GPU thread has one call parked at most.
        let wake_words = threads.min(WAKE_WORDS_MAX) as usize;
        let wake = module.alloc_host_mapped(wake_words * size_of::<u64>())?;
        let config = DeviceConfig {
            abi_version: ABI_VERSION,
            num_ports: self.b.ports as u32,
            ports: ports.device,
            port_states: module.alloc_device_zeroed(self.b.ports * size_of::<PortState>())?,
            heap_base: module.alloc_device_zeroed(self.b.heap_bytes as usize)?,
            heap_size: self.b.heap_bytes,
            thread_area: module.alloc_device_zeroed(threads as usize * size_of::<ThreadArea>())?,
            thread_capacity: threads,
            flags: if self.b.single_lane {
                FLAG_SINGLE_LANE
            } else {
                0
            },
            gpu: gpu.map_or(0, |g| g + 1),
            launch_state: module.alloc_device_zeroed(size_of::<LaunchState>())?,
            wait_limit_ns: self.b.wait_limit.as_nanos().min(u64::MAX as u128) as u64,
            fault: fault.device,
            doorbells: doorbells.device,
            wake: wake.device,
            wake_words: wake_words as u32,
            reserved: 0,
        };
        module.write_config(&config)?;
        let (streams, descs) = LaunchStreams::allocate(module, &self.b.streams)?;
        let launch = &with_streams(launch, &descs)?;

        let device = module.device_memory();
        let (files, mut services) = self.services_in(process, device.clone(), channel);
        let process = &process.process;
        services.device = Some(Arc::new(DeviceAccess {
            memory: device.clone(),
            heap: config.heap_base..config.heap_base + config.heap_size,
        }));
        let services = Arc::new(services);
        let ports = Ports {
            base: ports.host.cast::<Port>(),
            doorbells: doorbells.host.cast::<Doorbell>(),
            len: self.b.ports,
            wake: wake.host.cast(),
            wake_words,
        };
        let server = Server::start(
            ports,
            services.clone(),
            (self.b.consumers, self.b.blocking_threads),
            files.reactor.clone(),
            Debug {
                gpu,
                ..self.b.debug
            },
            files.log.clone(),
        )?;

        let draining = streams.start(self.b.stream_readers);
        let started = Instant::now();
        // Beside other launches, an exit in one ends the others.
        let exits_all = channel.is_some();
        let ended = match module
            .launch(launch)
            .and_then(|()| self.wait(module, launch, started, &server, (process, exits_all)))
        {
            Ok(LaunchEnd::Completed) if process.termination().is_none() => self.thread_exit(
                module,
                launch,
                (config.launch_state, process),
                started,
                &server,
            ),
            other => other,
        };
        // Serves what was posted just before the launch ended, and after this no thread
        // writes the ports, which the module may free once this returns. The drain is
        // bounded by what is left of the timeout, and by DRAIN_LIMIT.
        let left = self
            .b
            .timeout
            .map_or(DRAIN_LIMIT, |t| t.saturating_sub(started.elapsed()));
        let halted = server.halted();
        let summary = server.summary();
        if let Some(table) = &summary {
            eprint!("{table}");
        }
        let calls = server.finish(Instant::now() + left.clamp(DRAIN_MIN, DRAIN_LIMIT));
        let streams = draining.finish(&*device);
        let output = Instant::now() + left.clamp(DRAIN_MIN, OUTPUT_WAIT);
        match files.stdio.finish(output) {
            0 => {}
            n => log::warn!(
                "{n} posted stdout/stderr writes never arrived (the launch stopped mid-write)"
            ),
        }
        let ended = ended?;
        let elapsed = started.elapsed();
        // SAFETY: the record was allocated above, zeroed, and only GPU threads write it;
        // the launch has ended.
        let fault = unsafe { &*fault.host.cast::<FaultRecord>() };
        // A thread stopped because another GPU's thread ended the process has nothing
        // to report.
        let stopped_by_exit = process.termination().is_some()
            && FaultKind::from_code(fault.kind) == Some(FaultKind::Killed);
        let record = transport_fault(fault, &services, gpu).filter(|_| !stopped_by_exit);
        let outcome = match halted {
            Some(why) => Outcome::Faulted(why),
            None => {
                let stack = module.stack_bytes().map(|b| (launch.kernel.as_str(), b));
                outcome_of(process.termination(), ended, record, stack)
            }
        };
        let (stdout, stderr) = files.stdio.take_captured();
        Ok(RunReport {
            outcome,
            stdout,
            stderr,
            calls,
            elapsed,
            summary,
            streams,
        })
    }

    /// The services of one launch alone over this host's grants (the fuzzer's).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn services(&self, device: Arc<dyn DeviceMemory>) -> (Arc<Files>, ServiceTable) {
        self.services_in(&self.process_state(), device, None)
    }

    /// The services of one launch of `process` over this host's grants: the file
    /// services (with this launch's stdio), and the table the server dispatches with,
    /// embedder services included.
    fn services_in(
        &self,
        process: &ProcessState,
        device: Arc<dyn DeviceMemory>,
        channel: Option<&Channel>,
    ) -> (Arc<Files>, ServiceTable) {
        let log = process.log.clone();
        let files = Arc::new(Files {
            table: process.table.clone(),
            device,
            sandbox: self.sandbox.clone(),
            stdio: Stdio::new(
                self.b.echo,
                self.b.capture.then(|| Capture::new(self.b.capture_limit)),
                log.clone(),
            ),
            stdin: process.stdin.clone(),
            reactor: process.reactor.clone(),
            log,
            modes: if self.b.group_other_write {
                0o777
            } else {
                MODES_DEFAULT
            },
        });
        let mut table = ServiceTable::builtin(
            files.clone(),
            self.env.clone(),
            Arc::new(process.process.on_gpu(channel.and_then(|c| c.gpu))),
            self.b.net.clone(),
        );
        for e in self
            .b
            .extra
            .iter()
            .chain(channel.iter().flat_map(|c| &c.extra))
        {
            match &e.name {
                Some(n) => table.register_named(e.id, e.handler.clone(), n.clone()),
                None => table.register(e.id, e.handler.clone()),
            }
            if let Some(life) = &e.life {
                table.limit(e.id, life.clone());
            }
        }
        table.unserved = self.b.unserved;
        (files, table)
    }

    /// Runs the thread-local destructors of a launch that ended normally, as Linux does
    /// when threads end: the module's `THREAD_EXIT_KERNEL` on the same geometry (each
    /// GPU thread finds its own values). Launched only when the GPU's libc recorded a
    /// value with a destructor (`LaunchState::tls_destructors`); a module without the
    /// kernel (built without libc-hostcall, or emulated) has none to run.
    fn thread_exit(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        (launch_state, process): (u64, &Process),
        started: Instant,
        server: &Server,
    ) -> Result<LaunchEnd> {
        let flag = launch_state + std::mem::offset_of!(LaunchState, tls_destructors) as u64;
        let mut set = false;
        let (_, stop) = module.device_memory().stream(flag, 4, &mut |b| {
            set |= b.iter().any(|&x| x != 0);
            Ok(())
        });
        if stop.is_none() && !set {
            return Ok(LaunchEnd::Completed);
        }
        let exit = Launch {
            kernel: THREAD_EXIT_KERNEL.to_owned(),
            grid: launch.grid,
            block: launch.block,
            args: Vec::new(),
        };
        match module.launch(&exit) {
            Err(Error::MissingSymbol(_)) => Ok(LaunchEnd::Completed),
            Err(e) => Err(e),
            Ok(()) => self.wait(module, &exit, started, server, (process, false)),
        }
    }

    /// Waits for the launch to end, or for the timeout: then every call is answered
    /// `Killed` (the callers trap), the launch gets [`KILL_GRACE`] to end, and the run
    /// fails with what was in flight. Once `process` asks to end, every call that waits
    /// is answered `Killed`; with `exits_all` (beside other launches, whose `exit` ends
    /// this one too), every call from then on.
    fn wait(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        started: Instant,
        server: &Server,
        (process, exits_all): (&Process, bool),
    ) -> Result<LaunchEnd> {
        let mut stopped_for_exit = false;
        loop {
            if let Some(end) = module.poll()? {
                return Ok(end);
            }
            if !stopped_for_exit && process.termination().is_some() {
                // A thread ended the process: its threads that wait are stopped now; on
                // another GPU, its threads trap at their next hostcall as well.
                if exits_all {
                    server.kill();
                } else {
                    server.end_waits();
                }
                stopped_for_exit = true;
            }
            if let Some(limit) = self.b.timeout
                && started.elapsed() > limit
            {
                let in_flight = server.in_flight();
                server.kill();
                let killed = Instant::now();
                let mut ended = false;
                while killed.elapsed() < KILL_GRACE {
                    if module.poll()?.is_some() {
                        ended = true;
                        break;
                    }
                    std::thread::sleep(POLL_INTERVAL);
                }
                return Err(Error::Timeout {
                    kernel: launch.kernel.clone(),
                    limit,
                    elapsed: started.elapsed(),
                    in_flight,
                    still_running: !ended,
                });
            }
            let run = started.elapsed();
            std::thread::sleep(if run < LONG_RUN {
                POLL_INTERVAL
            } else {
                POLL_INTERVAL_LONG
            });
        }
    }
}

/// `launch` with each stream argument replaced by the address of that stream's
/// descriptor in this launch (`descs`, in the order of [`Host::stream`]).
fn with_streams(launch: &Launch, descs: &[u64]) -> Result<Launch> {
    let mut resolved = launch.clone();
    for a in &mut resolved.args {
        if let KernelArg::Stream(h) = *a {
            let desc = descs.get(h.0 as usize).ok_or_else(|| {
                Error::InvalidLaunch(format!(
                    "{} is given stream {}, which this host does not serve",
                    launch.kernel, h.0
                ))
            })?;
            *a = KernelArg::U64(*desc);
        }
    }
    Ok(resolved)
}

/// How the program ended, from what it asked for and how the launch ended. An `exit` or
/// `abort` ends the launch with its caller's trap; any other fault after it (an illegal
/// address, a thread that gave up on the transport) is reported, not hidden. A thread
/// that gave up ends the launch with a trap of its own, which its record explains. A
/// trap that nothing explains is, on a GPU, most often a thread's stack overflowing:
/// with `stack`, the kernel's name and its stack bytes, the run says so.
fn outcome_of(
    asked: Option<Termination>,
    ended: LaunchEnd,
    transport: Option<String>,
    stack: Option<(&str, usize)>,
) -> Outcome {
    let fault = |why: String| match &transport {
        Some(what) => Outcome::Faulted(format!("{what}; then the launch faulted: {why}")),
        None => Outcome::Faulted(why),
    };
    match (asked, ended) {
        (_, LaunchEnd::Trapped(_)) if let Some(what) = &transport => Outcome::Faulted(what.clone()),
        (_, LaunchEnd::Faulted(why) | LaunchEnd::IllegalAddress(why)) if transport.is_some() => {
            fault(why)
        }
        (Some(Termination::Exit(code)), LaunchEnd::Completed | LaunchEnd::Trapped(_)) => {
            Outcome::Exited(code)
        }
        (
            Some(Termination::Abort {
                gpu,
                block,
                thread,
                panicked,
            }),
            LaunchEnd::Completed | LaunchEnd::Trapped(_),
        ) => Outcome::Aborted {
            gpu,
            block,
            thread,
            panicked,
        },
        (Some(t), LaunchEnd::Faulted(why) | LaunchEnd::IllegalAddress(why)) => {
            let asked = match t {
                Termination::Exit(code) => format!("exit({code})"),
                Termination::Abort {
                    gpu, block, thread, ..
                } => format!("an abort by {:#}", Who { gpu, block, thread }),
            };
            fault(format!("{why}, after {asked}"))
        }
        (None, LaunchEnd::Completed) => Outcome::Completed,
        (None, LaunchEnd::Trapped(why)) => match stack {
            Some((kernel, bytes)) => Outcome::Faulted(format!(
                "kernel `{kernel}` ended with {why} though no GPU thread asked to end: most \
                 likely a thread overflowed its stack of {bytes} bytes (stack_bytes; raise \
                 it with CudaOptions::stack_bytes)"
            )),
            None => fault(why),
        },
        // An overflowing stack is also seen as an illegal address (a kernel recursing
        // past 16 KiB on the H200), which safe Rust does not otherwise make.
        (None, LaunchEnd::IllegalAddress(why)) => match stack {
            Some((kernel, bytes)) => Outcome::Faulted(format!(
                "kernel `{kernel}` ended with {why}: unless unsafe code went out of bounds, \
                 a thread overflowed its stack of {bytes} bytes (stack_bytes; raise it with \
                 CudaOptions::stack_bytes)"
            )),
            None => fault(why),
        },
        (None, LaunchEnd::Faulted(why)) => fault(why),
    }
}

/// What a GPU thread recorded before it gave up on the transport, in words; `services`
/// names the service of a failed call.
fn transport_fault(f: &FaultRecord, services: &ServiceTable, gpu: Option<u32>) -> Option<String> {
    if f.valid.load(std::sync::atomic::Ordering::Acquire) != 1 {
        return None;
    }
    let waited = Duration::from_nanos(f.waited_ns);
    let what = match FaultKind::from_code(f.kind) {
        Some(FaultKind::NoPort) => format!("found no free port in {waited:.1?}"),
        Some(FaultKind::NoAnswer) => format!(
            "had no answer on port {} for sequence {} in {waited:.1?}",
            f.port, f.seq
        ),
        Some(FaultKind::NoPostedAnswer) => format!(
            "waited {waited:.1?} on port {} for the host to finish posted sequence {}",
            f.port, f.seq
        ),
        Some(FaultKind::ForeignAnswer) => format!(
            "found an answer for another sequence on port {} (waiting for {}, word {:#x}): the host broke the protocol",
            f.port, f.seq, f.detail
        ),
        Some(FaultKind::Killed) => format!(
            "was stopped by the host's timeout during its call on port {}",
            f.port
        ),
        Some(FaultKind::ServiceFailed) => format!(
            "called `{}`, which cannot return an error, and it failed with {:?}",
            services.name(f.port),
            Errno(f.detail as i32)
        ),
        None => format!("recorded an unknown transport fault {}", f.kind),
    };
    Some(format!(
        "GPU thread ({}) gave up: it {what}",
        Who {
            gpu,
            block: f.block,
            thread: f.thread
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_constants_and_deny_everything() {
        let b = HostBuilder::default();
        assert_eq!(b.ports, DEFAULT_PORTS);
        if std::env::var_os("HOSTCALL_CONSUMERS").is_none() {
            assert_eq!(b.consumers, default_consumers());
            assert!((1..=MAX_DEFAULT_CONSUMERS).contains(&b.consumers));
        }
        assert_eq!(b.stream_readers, default_stream_readers());
        assert!((1..=MAX_DEFAULT_STREAM_READERS).contains(&b.stream_readers));
        assert_eq!(b.heap_bytes, DEFAULT_HEAP_BYTES);
        assert_eq!(b.max_open_files, DEFAULT_MAX_OPEN_FILES);
        assert_eq!(b.wait_limit, DEFAULT_WAIT_LIMIT);
        assert!(b.mounts.is_empty() && b.env.vars.is_empty() && !b.env.inherit_all);
        assert!(!b.stdin && !b.capture && b.echo);
        assert_eq!(b.capture_limit, DEFAULT_CAPTURE_LIMIT);
        assert_eq!(b.cwd, "/");
        if std::env::var_os("HOSTCALL_TIMEOUT_S").is_none() {
            assert_eq!(
                b.timeout,
                Some(DEFAULT_TIMEOUT),
                "a launch is limited by default"
            );
        }
        assert_eq!(Host::builder().no_timeout().timeout, None);
    }

    #[test]
    fn build_rejects_bad_settings_with_a_reason() {
        assert!(matches!(
            Host::builder().ports(0).build(),
            Err(Error::InvalidLaunch(_))
        ));
        assert!(matches!(
            Host::builder().heap_bytes(100).build(),
            Err(Error::InvalidLaunch(_))
        ));
        // The device allocator names blocks in 32 bits of 16-byte units: a larger heap
        // would wrap its free lists onto the wrong blocks.
        assert!(
            Host::builder()
                .heap_bytes(hostcall_abi::HEAP_MAX_BYTES)
                .build()
                .is_ok()
        );
        let over = Host::builder()
            .heap_bytes(hostcall_abi::HEAP_MAX_BYTES + 16)
            .build();
        assert!(
            matches!(&over, Err(Error::InvalidLaunch(m)) if m.contains("HEAP_MAX_BYTES")),
            "{:?}",
            over.err()
        );
        let missing = Host::builder()
            .preopen_dir("/no/such/dir/anywhere", "/x")
            .build();
        assert!(
            matches!(&missing, Err(Error::Sandbox(e)) if e.to_string().contains("/no/such/dir"))
        );
        let root = Host::builder().preopen_dir("/", "/host").build();
        assert!(
            matches!(&root, Err(Error::Sandbox(_))),
            "the whole file system is refused"
        );
    }

    #[test]
    fn open_files_leave_the_host_room_under_the_process_limit() {
        assert_eq!(open_files_allowed(1024, Some(1024)), 768);
        assert_eq!(open_files_allowed(1024, Some(100)), 36);
        assert_eq!(open_files_allowed(1024, Some(10)), 0);
        assert_eq!(open_files_allowed(1024, Some(1 << 20)), 1024);
        assert_eq!(open_files_allowed(1024, None), 1024);
    }

    #[test]
    fn exit_and_abort_do_not_hide_a_later_fault() {
        let trap = || LaunchEnd::Trapped("trap".into());
        let illegal = || LaunchEnd::Faulted("illegal address".into());
        let exit = Some(Termination::Exit(3));
        assert_eq!(outcome_of(exit, trap(), None, None), Outcome::Exited(3));
        let hidden = outcome_of(exit, illegal(), None, None);
        assert!(
            matches!(&hidden, Outcome::Faulted(m) if m.contains("illegal address, after exit(3)")),
            "{hidden:?}"
        );
        let abort = Some(Termination::Abort {
            gpu: None,
            block: 1,
            thread: 2,
            panicked: true,
        });
        assert!(matches!(
            outcome_of(abort, illegal(), None, None),
            Outcome::Faulted(_)
        ));
        let gave_up = outcome_of(exit, trap(), Some("GPU thread gave up".into()), None);
        assert!(matches!(&gave_up, Outcome::Faulted(m) if m.starts_with("GPU thread gave up")));
        // A thread that gave up ends the launch with its own trap: the record says it
        // all, and the driver's "unspecified launch failure" would only blur it.
        assert_eq!(
            outcome_of(None, trap(), Some("GPU thread gave up: why".into()), None),
            Outcome::Faulted("GPU thread gave up: why".into())
        );
        assert_eq!(
            outcome_of(
                None,
                illegal(),
                Some("GPU thread gave up: why".into()),
                None
            ),
            Outcome::Faulted(
                "GPU thread gave up: why; then the launch faulted: illegal address".into()
            )
        );
        assert_eq!(
            outcome_of(None, LaunchEnd::Completed, None, None),
            Outcome::Completed
        );
    }

    /// Issue 17: a kernel at the default 16 KiB stack died with `CUDA_ERROR_LAUNCH_FAILED
    /// "unspecified launch failure"`, with no word about the stack.
    #[test]
    fn a_trap_no_thread_asked_for_names_the_kernel_and_its_stack() {
        let trap =
            || LaunchEnd::Trapped("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure".into());
        let Outcome::Faulted(why) = outcome_of(None, trap(), None, Some(("kmain", 16384))) else {
            panic!("a fault")
        };
        assert!(
            why.starts_with("kernel `kmain` ended with CUDA_ERROR_LAUNCH_FAILED")
                && why.contains("overflowed its stack of 16384 bytes (stack_bytes;"),
            "{why}"
        );
        // What a thread asked for, or a fault of another kind, says nothing of the stack.
        let stack = Some(("kmain", 16384));
        assert_eq!(
            outcome_of(Some(Termination::Exit(3)), trap(), None, stack),
            Outcome::Exited(3)
        );
        let illegal = || {
            LaunchEnd::IllegalAddress("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access".into())
        };
        let Outcome::Faulted(why) = outcome_of(None, illegal(), None, stack) else {
            panic!("a fault")
        };
        assert!(
            why.starts_with("kernel `kmain` ended with CUDA_ERROR_ILLEGAL_ADDRESS")
                && why.contains("overflowed its stack of 16384 bytes"),
            "{why}"
        );
        let misaligned = LaunchEnd::Faulted("CUDA_ERROR_MISALIGNED_ADDRESS".into());
        assert_eq!(
            outcome_of(None, misaligned, None, stack),
            Outcome::Faulted("CUDA_ERROR_MISALIGNED_ADDRESS".into())
        );
        assert_eq!(
            outcome_of(None, illegal(), None, None),
            Outcome::Faulted("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access".into())
        );
    }
}
