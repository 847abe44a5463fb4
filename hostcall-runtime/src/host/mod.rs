//! [`Host`]: the capabilities granted to a GPU program and the loop that runs one
//! launch while serving its hostcalls.

mod builder;
mod defaults;
mod outcome;
mod process;
mod scope;
mod served;

pub use builder::HostBuilder;
pub use defaults::{
    DEFAULT_BLOCKING_THREADS, DEFAULT_CAPTURE_LIMIT, DEFAULT_HEAP_BYTES, DEFAULT_MAX_OPEN_FILES,
    DEFAULT_PORTS, DEFAULT_TIMEOUT, DEFAULT_WAIT_LIMIT, MAX_DEFAULT_CONSUMERS,
    MAX_DEFAULT_STREAM_READERS, default_consumers, default_stream_readers,
};
pub use outcome::{Outcome, RunReport};
pub use scope::{Running, Scope};
pub use served::LaunchServices;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use hostcall_abi::{
    ABI_VERSION, DeviceConfig, Doorbell, FLAG_SINGLE_LANE, FRAME_STACK_BYTES, FaultKind,
    FaultRecord, HEAP_RESERVED, LaunchState, Port, PortState, START_KERNEL, THREAD_EXIT_KERNEL,
    ThreadArea, WARP_SIZE,
};

use hostcall_abi::typed::HostFn;
use hostcall_abi::typed::{Args, HostClosure, Ret};

use self::defaults::*;
use self::outcome::{outcome_of, transport_fault};
use self::process::ProcessState;
use self::served::closure_extra;
use crate::guest_log::GuestLog;
use crate::module::{DeviceHeap, DeviceMemory, GpuModule, KernelArg, Launch, LaunchEnd};
use crate::server::{Ports, Server, Tracing};
use crate::services::lifetime::{Life, Lifetime, Serving};
use crate::services::typed::DeviceAccess;
use crate::services::{
    Capture, EnvPolicy, FdTable, Files, MODES_DEFAULT, Process, Sandbox, ServiceTable, Stdin, Stdio,
};
use crate::stream::{Callbacks, LaunchStreams, Registered, StreamHandle, StreamSpec};
use crate::{Error, Result};

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
    /// Returns once the program has ended and the host's stdout and stderr have taken
    /// everything it printed, so a caller that exits right after loses none of it; the
    /// time limit ([`HostBuilder::timeout`]) counts from this call, set-up included, and
    /// the run returns within the limit and a second, a reader of the host's stdout that
    /// stalls past it included.
    pub fn run(&self, module: &mut dyn GpuModule, launch: &Launch) -> Result<RunReport> {
        let called = Instant::now();
        let process = self.process_state();
        let report = self.run_in(module, launch, &process, None, called);
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
                    s.launch_on(module, launch, self.launch_services().gpu(i as u32))
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
            cwd: Arc::new(self.sandbox.working_dir()),
            stdin: Arc::new(Stdin::new(self.b.stdin)),
            reactor: Arc::default(),
            process: Arc::new(Process::new(log.clone())),
            log,
        }
    }

    /// Runs `launch` on `module` as part of `process`: alone, or, with `own` services,
    /// beside other launches (whose exit ends it), as the GPU they name. Its time limit
    /// counts from `called`, when the launch was asked for.
    pub(crate) fn run_in(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        process: &ProcessState,
        own: Option<&LaunchServices>,
        called: Instant,
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
            .chain(own.iter().flat_map(|c| &c.extra))
            .any(|e| e.id == 0);
        own.map_or(&self.b.declared, |c| &c.declared)
            .bind(module, catch_all)?;
        let threads = launch.threads();
        if threads == 0 {
            return Err(Error::InvalidLaunch(
                "a launch needs at least one thread".into(),
            ));
        }

        let report = self.run_launch(module, launch, process, (own, called), threads);
        // After the drain, no thread reaches the launch's memory (a kernel still running
        // keeps it).
        module.end_launch();
        report
    }

    /// [`Host::run_in`] once the module is ready: allocates the launch's memory, runs
    /// it and serves it until it ends, and waits for its output to be written.
    fn run_launch(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        process: &ProcessState,
        (own, called): (Option<&LaunchServices>, Instant),
        threads: u64,
    ) -> Result<RunReport> {
        self.check_threads(launch, threads)?;
        let gpu = own.and_then(|c| c.gpu);
        let allocating = Instant::now();
        let ports = module.alloc_host_mapped(self.b.ports * size_of::<Port>())?;
        let fault = module.alloc_host_mapped(size_of::<FaultRecord>())?;
        let doorbells = module.alloc_host_mapped(self.b.ports * size_of::<Doorbell>())?;
        // A GPU thread has one call parked at most.
        let wake_words = threads.min(WAKE_WORDS_MAX) as usize;
        let wake = module.alloc_host_mapped(wake_words * size_of::<u64>())?;
        // libc-hostcall's allocator needs its state zeroed, not the blocks it hands out
        // (calloc zeroes its own).
        let heap = module.alloc_heap(self.b.heap_bytes as usize, HEAP_RESERVED)?;
        if launch.kernel == START_KERNEL {
            // The main thread takes its frame stack first, before it can ask for more.
            heap.grow(MAIN_STACK_HEAP).map_err(|e| {
                Error::InvalidLaunch(format!("backing the main thread's frame stack: {e}"))
            })?;
        }
        let config = DeviceConfig {
            abi_version: ABI_VERSION,
            num_ports: self.b.ports as u32,
            ports: ports.device,
            port_states: module.alloc_device_zeroed(self.b.ports * size_of::<PortState>())?,
            heap_base: heap.base(),
            heap_size: self.b.heap_bytes,
            thread_area: module.alloc_device_zeroed(threads as usize * size_of::<ThreadArea>())?,
            thread_capacity: threads,
            flags: if self.b.single_lane {
                FLAG_SINGLE_LANE
            } else {
                0
            },
            gpu: gpu.map_or(0, |g| g + 1),
            launch_state: module.alloc_device_copy(&launch_state(heap.mapped()))?,
            wait_limit_ns: self.b.wait_limit.as_nanos().min(u64::MAX as u128) as u64,
            fault: fault.device,
            doorbells: doorbells.device,
            wake: wake.device,
            wake_words: wake_words as u32,
            thread_lanes: self.b.thread_lanes,
            held_back: self.b.held_back,
            multiprocessors: module.multiprocessors(),
        };
        module.write_config(&config)?;
        let (streams, descs) = LaunchStreams::allocate(module, &self.b.streams)?;
        let launch = &with_streams(launch, &descs)?;

        let device = module.device_memory();
        let (files, mut services) = self.services_in(process, device.clone(), heap, own);
        let reactor = process.reactor.clone();
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
            reactor,
            Tracing {
                gpu,
                ..self.b.debug
            },
            files.log.clone(),
        )?;

        let draining = streams.start(self.b.stream_readers);
        log::info!(
            "launch memory ({} MiB of heap) and {} consumer thread(s) ready in {:.2?}",
            config.heap_size >> 20,
            self.b.consumers,
            allocating.elapsed()
        );
        let started = Instant::now();
        // Beside other launches, an exit in one ends the others.
        let exits_all = own.is_some();
        let ended = match module
            .launch(launch)
            .and_then(|()| self.wait(module, launch, called, &server, (process, exits_all)))
        {
            Ok(LaunchEnd::Completed) if process.termination().is_none() => self.thread_exit(
                module,
                launch,
                (config.launch_state, process),
                called,
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
            .map_or(DRAIN_LIMIT, |t| t.saturating_sub(called.elapsed()));
        log::info!(
            "the launch ended after {:.2?}: {ended:?}",
            started.elapsed()
        );
        let halted = server.halted();
        let summary = server.summary();
        if let Some(table) = &summary {
            eprint!("{table}");
        }
        let calls = server.finish(Instant::now() + left.clamp(DRAIN_MIN, DRAIN_LIMIT));
        let streams = draining.finish(&*device);
        // The host's streams take the program's output however slowly, up to the limit
        // and OUTPUT_GRACE: the caller may exit as soon as this returns.
        let output = self
            .b
            .timeout
            .and_then(|t| called.checked_add(t.saturating_add(OUTPUT_GRACE)));
        match files.stdio.finish(output) {
            0 => {}
            n => log::warn!(
                "{n} posted stdout/stderr writes never arrived (the launch stopped mid-write)"
            ),
        }
        log::info!(
            "calls and output drained {:.2?} after the launch began",
            started.elapsed()
        );
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

    /// The services of one launch of `process` over this host's grants: the file
    /// services (with this launch's stdio), and the table the server dispatches with,
    /// embedder services included.
    pub(crate) fn services_in(
        &self,
        process: &ProcessState,
        device: Arc<dyn DeviceMemory>,
        heap: Arc<dyn DeviceHeap>,
        own: Option<&LaunchServices>,
    ) -> (Arc<Files>, ServiceTable) {
        let log = process.log.clone();
        let files = Arc::new(Files {
            table: process.table.clone(),
            device,
            sandbox: self.sandbox.clone(),
            cwd: process.cwd.clone(),
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
            Arc::new(process.process.on_gpu(own.and_then(|c| c.gpu))),
            self.b.net.clone(),
            heap,
        );
        for e in self.b.extra.iter().chain(own.iter().flat_map(|c| &c.extra)) {
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

    /// Checks a binary's threads against its launch ([`hostcall_abi::spawn`]): the lanes
    /// that run threads hold the held-back ones and the main thread, and the heap holds
    /// the main thread's frame stack (each held-back thread takes its own from the heap
    /// when it is first given a thread, and a spawn fails with `EAGAIN` without one).
    /// Other kernels run no threads.
    fn check_threads(&self, launch: &Launch, threads: u64) -> Result<()> {
        if launch.kernel != START_KERNEL {
            return Ok(());
        }
        let lanes = u64::from(self.b.thread_lanes);
        let stacks = threads.div_ceil(WARP_SIZE as u64) * lanes;
        if u64::from(self.b.held_back) >= stacks {
            return Err(Error::InvalidLaunch(format!(
                "{} threads held back and the main thread need more than the launch's \
                 {stacks} lanes that run threads",
                self.b.held_back
            )));
        }
        let least = MAIN_STACK_HEAP;
        if self.b.heap_bytes < least {
            return Err(Error::InvalidLaunch(format!(
                "a heap of {} bytes has no room for the main thread's frame stack: a \
                 binary needs at least {least}",
                self.b.heap_bytes
            )));
        }
        Ok(())
    }

    /// Runs the thread-local destructors of a launch that ended normally, as Linux does
    /// when threads end: the module's `THREAD_EXIT_KERNEL` on the same geometry (each
    /// GPU thread finds its own values). Launched only when the GPU's libc recorded a
    /// value with a destructor (`LaunchState::tls_destructors`); a module without the
    /// kernel (built without libc-hostcall, or emulated) has none to run. The time
    /// limit still counts from `called`.
    fn thread_exit(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        (launch_state, process): (u64, &Process),
        called: Instant,
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
            Ok(()) => self.wait(module, &exit, called, server, (process, false)),
        }
    }

    /// Waits for the launch to end, or for the timeout (counted from `called`): then
    /// every call is answered `Killed` (the callers trap), the launch gets
    /// [`KILL_GRACE`] to end, and the run fails with what was in flight. Once `process`
    /// asks to end, every call that waits is answered `Killed`; with `exits_all` (beside
    /// other launches, whose `exit` ends this one too), every call from then on.
    fn wait(
        &self,
        module: &mut dyn GpuModule,
        launch: &Launch,
        called: Instant,
        server: &Server,
        (process, exits_all): (&Process, bool),
    ) -> Result<LaunchEnd> {
        let mut stopped_for_exit = false;
        let waiting = Instant::now();
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
                && called.elapsed() > limit
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
                    elapsed: called.elapsed(),
                    in_flight,
                    still_running: !ended,
                });
            }
            let run = waiting.elapsed();
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

/// The heap a binary's launch needs before its first allocation: the allocator's state
/// and the main thread's frame stack, the first cut from it (checked before the launch,
/// and backed before it, since the main thread takes it before it can ask for more).
const MAIN_STACK_HEAP: u64 = (HEAP_RESERVED + FRAME_STACK_BYTES) as u64;

/// A launch's `LaunchState` as the GPU first sees it: zero but for the bytes of the heap
/// that are mapped (`LaunchState::heap_mapped`).
fn launch_state(heap_mapped: u64) -> Vec<u8> {
    let mut state = vec![0u8; size_of::<LaunchState>()];
    let at = std::mem::offset_of!(LaunchState, heap_mapped);
    state[at..at + 8].copy_from_slice(&heap_mapped.to_le_bytes());
    state
}
