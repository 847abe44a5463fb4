//! [`HostBuilder`]: what a [`Host`] grants and how it is sized, checked when built.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hostcall_abi::{HEAP_RESERVED, WARP_SIZE};

use hostcall_abi::typed::{Dispatch, Errno};

use super::Host;
use super::defaults::*;
use super::served::{Extra, declared_extras};
use crate::server::Tracing;
use crate::services::lifetime::{Life, Serving};
use crate::services::sandbox::Access;
use crate::services::typed::{Declared, DefaultHandler, UnservedCall};
use crate::services::{EnvPolicy, Handler, MountSpec, NetPolicy, Sandbox, Unserved};
use crate::stream::Registered;
use crate::{Error, Result};

/// Builds a [`Host`]. Everything the GPU could reach on the host is denied until granted.
#[must_use]
pub struct HostBuilder {
    pub(super) ports: usize,
    pub(super) consumers: usize,
    pub(super) heap_bytes: u64,
    pub(super) max_open_files: usize,
    pub(super) timeout: Option<Duration>,
    pub(super) wait_limit: Duration,
    pub(super) mounts: Vec<MountSpec>,
    pub(super) cwd: String,
    pub(super) executable: Option<PathBuf>,
    pub(super) env: EnvPolicy,
    pub(super) capture: bool,
    pub(crate) capture_limit: usize,
    pub(crate) blocking_threads: usize,
    pub(super) stream_readers: usize,
    pub(super) echo: bool,
    pub(super) group_other_write: bool,
    pub(super) mount_points_inside: bool,
    pub(crate) stdin: bool,
    pub(super) debug: Tracing,
    pub(super) single_lane: bool,
    pub(super) thread_lanes: u32,
    pub(super) held_back: u32,
    /// Embedder services.
    pub(super) extra: Vec<Extra>,
    pub(crate) declared: Declared,
    /// Streams kernels write to ([`Host::stream`]).
    pub(super) streams: Vec<Registered>,
    pub(super) unserved: Unserved,
    /// What the GPU's sockets may reach, and the grants that did not parse.
    pub(super) net: Arc<NetPolicy>,
    pub(super) net_errors: Vec<String>,
    pub(super) max_sockets: usize,
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
            executable: None,
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
            thread_lanes: 1,
            held_back: 0,
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
    /// `HOSTCALL_TIMEOUT_S`), counted from the call of [`Host::run`](crate::Host::run),
    /// set-up included: its threads that call the host trap, and the run returns
    /// [`Error::Timeout`] naming the kernel and the calls in flight, within a second of
    /// the limit (a reader of the host's stdout stalled that long loses the rest of the
    /// program's output).
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
    /// there, and `getcwd` returns it. Each run starts there; `chdir` moves it for the
    /// rest of that run, into a directory of a grant, back to this one, or to one on the
    /// way to a grant.
    pub fn cwd(mut self, guest: &str) -> Self {
        self.cwd = guest.to_owned();
        self
    }

    /// The file the program was loaded from (a packaged executable, say), a host path:
    /// where a grant holds it, `/proc/self/exe` links to its guest path there, so std's
    /// `env::current_exe` finds it; elsewhere that link is denied, as any path outside
    /// the grants (none by default).
    pub fn executable(mut self, host: impl Into<PathBuf>) -> Self {
        self.executable = Some(host.into());
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

    /// Keeps a copy of what the GPU writes to fds 1 and 2 in the [`RunReport`](crate::RunReport).
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

    /// In a launch of a binary's `main` ([`hostcall_abi::START_KERNEL`]), the threads
    /// `pthread_create` can start (`held_back`), on the first `lanes` lanes of each warp,
    /// 1 to 32. Default: every lane that runs threads, one lane a warp (each thread has
    /// its warp's issue slots to itself; 32 lanes put a thread on every lane, 32 times
    /// as many on the same warps, sharing them). Each thread takes a frame stack of
    /// [`hostcall_abi::FRAME_STACK_BYTES`] from the heap as it first runs; the launch
    /// must have room for `held_back` and the main thread.
    pub fn program_threads(mut self, held_back: u32, lanes: u32) -> Self {
        self.held_back = held_back;
        self.thread_lanes = lanes;
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
        if !(1..=WARP_SIZE as u32).contains(&self.thread_lanes) {
            return Err(Error::InvalidLaunch(format!(
                "{} lanes of a warp for threads: 1 to {WARP_SIZE}",
                self.thread_lanes
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
                self.executable.as_deref(),
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
        for lanes in [0, 33] {
            assert!(matches!(
                Host::builder().program_threads(8, lanes).build(),
                Err(Error::InvalidLaunch(m)) if m.contains("lanes of a warp")
            ));
        }
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
}
