//! The child processes: one program run on the CPU or on the GPU, in the working
//! directory, with the arguments, environment and stdin the parent set up. The parent
//! names the program in `CONFORMANCE_EXEC`, which the child removes before the program
//! starts, so the program sees exactly the environment of the suite.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hostcall_abi::{START_KERNEL, WARP_SIZE};
use hostcall_runtime::cuda::{CudaModule, CudaOptions};
use hostcall_runtime::{Host, KernelArg, Launch, Outcome, module_image};

use crate::suite::{self, Kind, Program, SPAWN_WORKERS};

/// The variable that makes this binary a child: `cpu|gpu NAME BLOCKS THREADS STACK_KIB`
/// (`-`: the module's own stack).
pub const VAR: &str = "CONFORMANCE_EXEC";

/// Stack of each CPU thread of a threaded program (33,792 of them at 132×256).
const CPU_STACK: usize = 256 << 10;

/// Longest a GPU run may take before the runtime's kill switch ends it.
const GPU_TIMEOUT: Duration = Duration::from_secs(120);

/// The GPU module of the single, unsupported and threaded programs (`conformance/kernels`).
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/conformance_module.rs"));
}

/// The registry programs' GPU module (`conformance/registry`).
mod registry {
    include!(env!("CONFORMANCE_REGISTRY"));
}

/// The spawning programs' GPU binary (`conformance/spawning`).
mod spawning {
    include!(env!("CONFORMANCE_SPAWNING"));
}

/// Which side, which program, which geometry.
pub struct Request {
    /// Run on the GPU (else the CPU).
    pub gpu: bool,
    /// The program.
    pub program: Program,
    /// Blocks and threads per block (1×1 for single programs).
    pub geometry: (u32, u32),
    /// Each GPU thread's stack in KiB, if not the module's computed one.
    pub stack_kib: Option<usize>,
    /// Lanes of each warp that run a spawning program's threads: 1 gives each a warp,
    /// as `cargo gpu run` gives its first threads; more pack them on the lanes, as its
    /// later threads share them.
    pub thread_lanes: u32,
}

impl Request {
    /// The value of [`VAR`] that asks a child for this run.
    pub fn encode(&self) -> String {
        let side = if self.gpu { "gpu" } else { "cpu" };
        let (b, t) = self.geometry;
        let stack = self.stack_kib.map_or("-".to_owned(), |k| k.to_string());
        let lanes = self.thread_lanes;
        format!("{side} {} {b} {t} {stack} {lanes}", self.program.name)
    }

    fn decode(s: &str) -> Result<Request, String> {
        let bad = || format!("{VAR}={s:?}: expected `cpu|gpu NAME BLOCKS THREADS STACK_KIB LANES`");
        let parts: Vec<&str> = s.split(' ').collect();
        let [side, name, b, t, stack, lanes] = parts[..] else {
            return Err(bad());
        };
        let gpu = match side {
            "gpu" => true,
            "cpu" => false,
            _ => return Err(bad()),
        };
        let program = suite::find(name).ok_or_else(|| format!("no program named {name:?}"))?;
        let geometry = (b.parse().map_err(|_| bad())?, t.parse().map_err(|_| bad())?);
        let stack_kib = match stack {
            "-" => None,
            k => Some(k.parse().map_err(|_| bad())?),
        };
        Ok(Request {
            gpu,
            program,
            geometry,
            stack_kib,
            thread_lanes: lanes.parse().map_err(|_| bad())?,
        })
    }
}

/// When this process is a child: runs the program it names and returns the exit code.
pub fn child() -> Option<ExitCode> {
    let spec = std::env::var(VAR).ok()?;
    // SAFETY: no other thread exists yet (the child has done nothing else).
    unsafe { std::env::remove_var(VAR) };
    Some(match Request::decode(&spec) {
        Ok(r) if r.gpu => on_gpu(&r),
        Ok(Request {
            program:
                Program {
                    kind: Kind::Spawning(main, _),
                    ..
                },
            ..
        }) => as_process(main),
        Ok(r) => on_cpu(&r),
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::from(2)
        }
    })
}

/// The name the GPU gives the thread at linear index `i` of a launch of `per_block`-thread
/// blocks: the CPU threads take the same names, so panic messages compare as they are.
fn gpu_thread_name(i: usize, per_block: usize) -> String {
    format!("block {} thread {}", i / per_block, i % per_block)
}

/// Runs the program on OS threads named as the GPU names its threads. A panic prints
/// its message and ends the process with 101, as a panic ends a Rust program, and as the
/// GPU's run ends, whose panics abort (`panic = "abort"`, its only strategy) and say so.
fn on_cpu(r: &Request) -> ExitCode {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        hook(info);
        std::process::exit(101);
    }));
    let (blocks, per_block) = (r.geometry.0 as usize, r.geometry.1 as usize);
    let count = blocks * per_block;
    let spawn = |i: usize, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(gpu_thread_name(i, per_block))
            .stack_size(CPU_STACK)
            .spawn(f)
    };
    let done = std::sync::Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::with_capacity(count);
    for i in 0..count {
        let body: Box<dyn FnOnce() + Send> = match r.program.kind {
            Kind::Single(main) | Kind::Unsupported(main, _) => Box::new(main),
            Kind::Spawning(..) => unreachable!("a spawning program runs as the process"),
            Kind::Threaded(worker, finish) | Kind::Registry(worker, finish) => {
                let done = done.clone();
                Box::new(move || {
                    worker(i, count);
                    if done.fetch_add(1, Ordering::AcqRel) + 1 == count {
                        finish(count);
                    }
                })
            }
        };
        match spawn(i, body) {
            Ok(t) => threads.push(t),
            Err(e) => {
                eprintln!("conformance: starting CPU thread {i} of {count}: {e}");
                return ExitCode::from(70);
            }
        }
    }
    for t in threads {
        // A panic has ended the process already: join only waits.
        let _ = t.join();
    }
    ExitCode::SUCCESS
}

/// Runs a spawning program as this process's `main`, as on the GPU: its threads' panics
/// reach their joiners, and its own ends the process with 101.
fn as_process(main: fn()) -> ExitCode {
    main();
    ExitCode::SUCCESS
}

/// Runs the program on the GPU: the working directory is mounted at its own host path
/// (so paths read the same on both sides), as is, for reading, the folder of this
/// binary, which holds the module and is the program's executable (so `current_exe`
/// reads the same too), stdin is granted, the environment is the
/// suite's, the heap a process's (as `cargo gpu run` gives), and a spawning program may
/// use loopback sockets.
fn on_gpu(r: &Request) -> ExitCode {
    match run_gpu(r) {
        Ok(Outcome::Faulted(why)) => {
            eprintln!("conformance: the GPU run faulted: {why}");
            ExitCode::from(hostcall_runtime::EXIT_RUN_FAILED)
        }
        Ok(outcome) => ExitCode::from(outcome.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run_gpu(r: &Request) -> hostcall_runtime::Result<Outcome> {
    let spawning = matches!(r.program.kind, Kind::Spawning(..));
    let image = match r.program.kind {
        Kind::Spawning(..) => module_image!(spawning),
        Kind::Registry(..) => module_image!(registry),
        _ => module_image!(embedded),
    };
    let mut options = CudaOptions::default();
    if let Some(kib) = r.stack_kib {
        options = options.stack_bytes(kib << 10);
    }
    let mut module = CudaModule::load(&image, &options)?;
    let cwd = std::env::current_dir()?;
    let guest = cwd.to_string_lossy().into_owned();
    let exe = std::env::current_exe()?.canonicalize()?;
    let exe_dir = exe.parent().expect("a file has a folder");
    let mut host = Host::builder()
        .heap_bytes(module.process_heap_bytes()?)
        .preopen_dir(&cwd, &guest)
        .preopen_dir_readonly(exe_dir, &exe_dir.to_string_lossy())
        .executable(&exe)
        .cwd(&guest)
        .args(std::iter::once(r.program.name).chain(suite::ARGS))
        .stdin(true)
        .timeout(GPU_TIMEOUT);
    for (k, v) in suite::ENV {
        host = host.env(k, v);
    }
    if spawning {
        // The socket programs talk to themselves over loopback, by address and by name.
        for spec in suite::LOOPBACK {
            host = host.allow_connect(spec).allow_listen(spec);
        }
    }
    let host = host
        .program_threads(SPAWN_WORKERS, r.thread_lanes)
        .build()?;
    let kernel = match r.program.kind {
        Kind::Threaded(..) => "conformance_threaded",
        Kind::Registry(..) => "conformance_registry",
        Kind::Single(_) | Kind::Unsupported(..) => "conformance_single",
        // As `cargo gpu run` launches a binary: thread 0 runs `main`, the first
        // `thread_lanes` lanes of each warp are held back for threads.
        Kind::Spawning(..) => START_KERNEL,
    };
    let launch = if spawning {
        let warps = (SPAWN_WORKERS + 1).div_ceil(r.thread_lanes);
        Launch::linear(kernel, warps, WARP_SIZE as u32, Vec::new())
    } else {
        Launch::linear(
            kernel,
            r.geometry.0,
            r.geometry.1,
            vec![KernelArg::U32(r.program.gpu_index)],
        )
    };
    Ok(host.run(&mut module, &launch)?.outcome)
}
