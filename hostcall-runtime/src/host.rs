//! [`Host`]: the capabilities granted to a GPU program and the loop that runs one
//! launch while serving its hostcalls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostcall_abi::{
    ABI_VERSION, DeviceConfig, Doorbell, FLAG_SINGLE_LANE, FaultKind, FaultRecord, HEAP_RESERVED,
    LaunchState, Port, PortState, ThreadArea,
};

use crate::module::{GpuModule, Launch, LaunchEnd};
use crate::server::{Ports, Server};
use crate::services::{
    EnvPolicy, FdTable, Files, Handler, Process, ServiceTable, Stdio, Termination,
};
use crate::{Error, Result};

/// Ports in the channel unless set: enough for 128 warps in flight at once.
pub const DEFAULT_PORTS: usize = 128;
/// Consumer threads unless set.
pub const DEFAULT_CONSUMERS: usize = 1;
/// Device heap unless set: 256 MiB.
pub const DEFAULT_HEAP_BYTES: u64 = 256 << 20;
/// Files the GPU may hold open at once unless set.
pub const DEFAULT_MAX_OPEN_FILES: usize = 1024;
/// How long a GPU thread waits for a port or an answer before it gives up and ends the
/// launch with a report, unless set: far beyond any queueing delay, so that only a host
/// that stopped serving (or a service that blocks) trips it.
pub const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// How often the host asks the backend whether the launch ended: at first often, so
/// short launches end promptly, then, for launches that run on, rarely enough that the
/// asking costs no noticeable CPU.
const POLL_INTERVAL: Duration = Duration::from_micros(200);
const POLL_INTERVAL_LONG: Duration = Duration::from_millis(5);
const LONG_RUN: Duration = Duration::from_millis(100);

/// Builds a [`Host`]. Everything the GPU could reach on the host is denied until granted.
#[must_use]
pub struct HostBuilder {
    ports: usize,
    consumers: usize,
    heap_bytes: u64,
    max_open_files: usize,
    timeout: Option<Duration>,
    wait_limit: Duration,
    roots: Vec<PathBuf>,
    env: EnvPolicy,
    capture: bool,
    echo: bool,
    stdin: bool,
    trace: bool,
    single_lane: bool,
    extra: Vec<(u32, Arc<dyn Handler>)>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            ports: DEFAULT_PORTS,
            consumers: DEFAULT_CONSUMERS,
            heap_bytes: DEFAULT_HEAP_BYTES,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            timeout: None,
            wait_limit: DEFAULT_WAIT_LIMIT,
            roots: Vec::new(),
            env: EnvPolicy::default(),
            capture: false,
            echo: true,
            stdin: false,
            trace: std::env::var_os("HOSTCALL_DEBUG").is_some_and(|v| v != "0"),
            single_lane: std::env::var_os("HOSTCALL_SINGLE_LANE").is_some_and(|v| v != "0"),
            extra: Vec::new(),
        }
    }
}

impl HostBuilder {
    /// Ports in the channel (warps that can have a call in flight at once).
    pub fn ports(mut self, n: usize) -> Self {
        self.ports = n;
        self
    }

    /// Host threads serving the ports.
    pub fn consumers(mut self, n: usize) -> Self {
        self.consumers = n;
        self
    }

    /// Bytes of device memory for the GPU's `malloc`.
    pub fn heap_bytes(mut self, n: u64) -> Self {
        self.heap_bytes = n;
        self
    }

    /// Files the GPU may hold open at once (beyond stdio).
    pub fn max_open_files(mut self, n: usize) -> Self {
        self.max_open_files = n;
        self
    }

    /// Give up on a launch that runs longer than this.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// How long a GPU thread may wait for a port or an answer before it gives up: it then
    /// records which port, sequence and thread, and ends the launch, which the run
    /// reports. Zero waits forever (for services that may block, like a granted stdin).
    pub fn wait_limit(mut self, limit: Duration) -> Self {
        self.wait_limit = limit;
        self
    }

    /// Lets the GPU open, create and stat files below `dir` (which must exist).
    pub fn preopen_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.roots.push(dir.as_ref().to_path_buf());
        self
    }

    /// Sets an environment variable for the GPU program.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env
            .vars
            .insert(name.as_bytes().to_vec(), value.as_bytes().to_vec());
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

    /// Whether GPU writes to fds 1 and 2 reach the host's stdout and stderr (default on).
    pub fn echo_output(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }

    /// Lets fd 0 read the host's stdin.
    pub fn stdin(mut self, allow: bool) -> Self {
        self.stdin = allow;
        self
    }

    /// Logs every hostcall (default: on when `HOSTCALL_DEBUG` is set and not `0`).
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// One-lane packets instead of one packet per warp (default: off, or on when
    /// `HOSTCALL_SINGLE_LANE` is set and not `0`).
    pub fn single_lane(mut self, on: bool) -> Self {
        self.single_lane = on;
        self
    }

    /// Serves service `id` with `handler` (ids of built-in services are replaced).
    pub fn service(mut self, id: u32, handler: Arc<dyn Handler>) -> Self {
        self.extra.push((id, handler));
        self
    }

    /// Checks the settings and resolves the pre-opened directories.
    pub fn build(self) -> Result<Host> {
        if self.ports == 0 || self.ports > u32::MAX as usize {
            return Err(Error::InvalidLaunch(format!("{} ports", self.ports)));
        }
        if self.heap_bytes < 2 * HEAP_RESERVED as u64 {
            return Err(Error::InvalidLaunch(format!(
                "a {}-byte heap is too small",
                self.heap_bytes
            )));
        }
        let roots = self
            .roots
            .iter()
            .map(|r| {
                r.canonicalize().map_err(|e| {
                    Error::Io(std::io::Error::new(
                        e.kind(),
                        format!("pre-opened dir {}: {e}", r.display()),
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Host {
            env: Arc::new(self.env),
            roots,
            b: HostBuilder {
                roots: Vec::new(),
                env: EnvPolicy::default(),
                ..self
            },
        })
    }
}

/// What the GPU program did, once its launch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every thread returned.
    Completed,
    /// The program called `exit(code)`.
    Exited(i32),
    /// A thread aborted (a panic ends that way); its message went to stderr.
    Aborted {
        /// Linear block index of the aborting thread.
        block: u32,
        /// Thread index within the block.
        thread: u32,
    },
    /// The launch failed without the program asking to end (illegal address, ...).
    Faulted(String),
}

impl Outcome {
    /// The process exit code that reflects this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Completed => 0,
            Outcome::Exited(c) => *c,
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
}

/// The host side of GPU programs: capabilities, channel sizing and the serving loop.
pub struct Host {
    b: HostBuilder,
    roots: Vec<PathBuf>,
    env: Arc<EnvPolicy>,
}

impl Host {
    /// A builder with everything denied.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Runs `launch` on `module`, serving hostcalls until it ends.
    pub fn run(&self, module: &mut dyn GpuModule, launch: &Launch) -> Result<RunReport> {
        let version = module.abi_version()?;
        if version != ABI_VERSION {
            return Err(Error::AbiMismatch {
                module: version,
                host: ABI_VERSION,
            });
        }
        let threads = launch.threads();
        if threads == 0 {
            return Err(Error::InvalidLaunch(
                "a launch needs at least one thread".into(),
            ));
        }

        let ports = module.alloc_host_mapped(self.b.ports * size_of::<Port>())?;
        let fault = module.alloc_host_mapped(size_of::<FaultRecord>())?;
        let doorbells = module.alloc_host_mapped(self.b.ports * size_of::<Doorbell>())?;
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
            reserved: 0,
            launch_state: module.alloc_device_zeroed(size_of::<LaunchState>())?,
            wait_limit_ns: self.b.wait_limit.as_nanos().min(u64::MAX as u128) as u64,
            fault: fault.device,
            doorbells: doorbells.device,
        };
        module.write_config(&config)?;

        let files = Arc::new(Files {
            table: Mutex::new(FdTable::new(self.b.max_open_files)),
            device: module.device_memory(),
            roots: self.roots.clone(),
            stdio: Stdio {
                echo: self.b.echo,
                stdin: self.b.stdin,
                captured: self.b.capture.then(Default::default),
                posted: Default::default(),
            },
        });
        let process = Arc::new(Process::default());
        let mut services = ServiceTable::builtin(files.clone(), self.env.clone(), process.clone());
        for (id, h) in &self.b.extra {
            services.register(*id, h.clone());
        }
        let ports = Ports {
            base: ports.host.cast::<Port>(),
            doorbells: doorbells.host.cast::<Doorbell>(),
            len: self.b.ports,
        };
        let server = Server::start(ports, Arc::new(services), self.b.consumers, self.b.trace)?;

        let started = Instant::now();
        let ended = module
            .launch(launch)
            .and_then(|()| self.wait(module, started));
        let services = server.services();
        let mut calls = server.stop();
        // Posted requests published just before the launch ended (or trapped) may not
        // have been served yet: serve every port once more, then write what waits.
        calls += crate::server::drain(ports, &services, self.b.trace);
        match files.stdio.flush_posted() {
            Ok(0) => {}
            Ok(n) => log::warn!(
                "{n} posted stdout/stderr writes never arrived (the launch stopped mid-write)"
            ),
            Err(e) => log::warn!("writing posted stdout/stderr: {e}"),
        }
        let ended = ended?;
        let elapsed = started.elapsed();

        let outcome = match (process.termination(), ended) {
            (Some(Termination::Exit(code)), _) => Outcome::Exited(code),
            (Some(Termination::Abort { block, thread }), _) => Outcome::Aborted { block, thread },
            (None, LaunchEnd::Completed) => Outcome::Completed,
            (None, LaunchEnd::Faulted(why)) => {
                // SAFETY: the record was allocated above, zeroed, and only GPU threads
                // write it; the launch has ended.
                let record = unsafe { &*fault.host.cast::<FaultRecord>() };
                match transport_fault(record) {
                    Some(what) => Outcome::Faulted(format!("{what} ({why})")),
                    None => Outcome::Faulted(why),
                }
            }
        };
        let (stdout, stderr) = files.stdio.take_captured();
        Ok(RunReport {
            outcome,
            stdout,
            stderr,
            calls,
            elapsed,
        })
    }

    fn wait(&self, module: &mut dyn GpuModule, started: Instant) -> Result<LaunchEnd> {
        loop {
            if let Some(end) = module.poll()? {
                return Ok(end);
            }
            if let Some(limit) = self.b.timeout
                && started.elapsed() > limit
            {
                return Err(Error::Timeout(limit));
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

/// What a GPU thread recorded before it gave up on the transport, in words.
fn transport_fault(f: &FaultRecord) -> Option<String> {
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
        None => format!("recorded an unknown transport fault {}", f.kind),
    };
    Some(format!(
        "GPU thread (block {}, thread {}) gave up: it {what}",
        f.block, f.thread
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_constants_and_deny_everything() {
        let b = HostBuilder::default();
        assert_eq!(b.ports, DEFAULT_PORTS);
        assert_eq!(b.consumers, DEFAULT_CONSUMERS);
        assert_eq!(b.heap_bytes, DEFAULT_HEAP_BYTES);
        assert_eq!(b.max_open_files, DEFAULT_MAX_OPEN_FILES);
        assert_eq!(b.wait_limit, DEFAULT_WAIT_LIMIT);
        assert!(b.roots.is_empty() && b.env.vars.is_empty() && !b.env.inherit_all);
        assert!(!b.stdin && !b.capture && b.echo && b.timeout.is_none());
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
        let missing = Host::builder().preopen_dir("/no/such/dir/anywhere").build();
        assert!(matches!(missing, Err(Error::Io(e)) if e.to_string().contains("/no/such/dir")));
    }
}
