//! `hostcalls_bin`: runs the culinux kernel (real std: `println!`, `std::fs`, `HashMap`,
//! `Mutex`, `Instant`, `env::var`) on an NVIDIA GPU while serving its hostcalls, then
//! checks that every thread's line and the file arrived. Exits 0 only if all did.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use hostcall_demo::{check, mode};
use hostcall_runtime::cuda::{CudaModule, CudaOptions};
use hostcall_runtime::{Error, Host, KernelArg, Launch, Outcome, RunReport};

/// What the kernel is asked to do (its `mode` parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Every thread prints, one thread round-trips a file.
    Normal,
    /// Block 1 thread 3 panics: the run must end non-zero with the message. With
    /// several GPUs, only the last GPU's thread panics (the others run `normal`), and the
    /// panic ends them all.
    Panic,
    /// Block 0 thread 0 calls `std::process::exit(3)`.
    Exit,
    /// Every thread echoes 64 unique tokens through the host and checks each reply.
    Ping,
    /// Lanes of each warp mix posted lines and token-checked round trips at one call
    /// site; every line and every reply is checked.
    Mixed,
    /// Every thread makes 64 verified null round trips, without printing.
    Null,
    /// The same round trips as typed calls of the host closure `|x: u64| x`.
    Typed,
    /// Every thread spins forever without calling the host: the timeout must end it.
    Spin,
    /// Every thread calls the host in an endless loop: the timeout must end it.
    CallLoop,
    /// Thread 0 writes 300 MiB to stdout in one `write_all` while every other thread
    /// prints lines; all of it must arrive, each thread's lines in order.
    BigWrite,
    /// Every thread's allocation fails: std's runtime prints its message to stderr and
    /// aborts; each message must come out on a line of its own.
    AllocFail,
    /// Block 0 thread 0 recurses past its stack: the run must say so in one sentence.
    StackOverflow,
}

/// Runs the culinux real-std kernel on an NVIDIA GPU, serving its hostcalls.
#[derive(Parser)]
#[command(name = "hostcalls_bin", version)]
struct Args {
    /// Blocks in the launch.
    #[arg(long, default_value_t = 4)]
    blocks: u32,
    /// Threads per block.
    #[arg(long, default_value_t = 64)]
    threads: u32,
    /// Behaviour to demonstrate.
    #[arg(long, value_enum, default_value_t = Mode::Normal)]
    mode: Mode,
    /// JIT-compile the PTX even when a cubin for the device is embedded.
    #[arg(long)]
    jit: bool,
    /// Per-thread GPU stack in KiB (default: the module's need as its build computed it,
    /// at least `DEFAULT_STACK_BYTES`).
    #[arg(long)]
    stack_kib: Option<u32>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
    /// Directory the kernel writes its file in (default: a new temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// GPUs to run on at once, as one process: a count from device 0, or `all`.
    #[arg(long, default_value = "1")]
    devices: String,
    /// Host threads serving each GPU's ports (default: one per four CPUs, one to four).
    #[arg(long)]
    consumers: Option<usize>,
}

/// The device ordinals `--devices` names.
fn devices(a: &Args) -> Result<Vec<usize>, Error> {
    let present = hostcall_runtime::cuda::device_count()?;
    let n = match a.devices.as_str() {
        "all" => present,
        n => n.parse().map_err(|_| {
            Error::InvalidLaunch(format!("--devices takes a count or `all`, not {n:?}"))
        })?,
    };
    if n == 0 || n > present {
        return Err(Error::NoDevice(format!(
            "{n} GPUs asked for, {present} present"
        )));
    }
    Ok((0..n).collect())
}

fn main() -> ExitCode {
    hostcall_runtime::init_logging();
    let args = Args::parse();
    let started = std::time::Instant::now();
    match run(&args, started) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("hostcalls_bin: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(a: &Args, started: std::time::Instant) -> Result<u8, Error> {
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("hostcalls-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;

    let image = culinux_ptx::image();
    let mut options = CudaOptions::default().force_jit(a.jit);
    if let Some(kib) = a.stack_kib {
        options = options.stack_bytes((kib as usize) << 10);
    }
    let mut modules = Vec::new();
    for d in devices(a)? {
        let module = CudaModule::load(&image, &options.clone().device(d))?;
        eprintln!(
            "hostcalls_bin: module {} on device {d}, {}: loaded from {:?} in {:.1?}",
            &image.sha256[..12],
            hostcall_runtime::GpuModule::describe(&module),
            module.loaded_from(),
            module.load_time()
        );
        modules.push(module);
    }

    let mut host = Host::builder()
        .consumers(
            a.consumers
                .unwrap_or_else(hostcall_runtime::default_consumers),
        )
        .preopen_dir(&dir, hostcall_demo::GUEST_DIR)
        .env("CULINUX_DIR", hostcall_demo::GUEST_DIR)
        .capture_output(true)
        .timeout(Duration::from_secs(a.timeout_s));
    if a.mode == Mode::BigWrite {
        // The 300 MiB buffer on the device heap, and all of it in the capture.
        host = host.heap_bytes(1 << 30).capture_limit(512 << 20);
    }
    let mut host = host.build()?;
    let mode = match a.mode {
        Mode::Normal => mode::NORMAL,
        Mode::Panic => mode::PANIC,
        Mode::Exit => mode::EXIT,
        Mode::Ping => mode::PING,
        Mode::Mixed => mode::MIXED,
        Mode::Null => mode::NULL,
        Mode::Spin => mode::SPIN,
        Mode::CallLoop => mode::CALL_LOOP,
        Mode::BigWrite => mode::BIG_WRITE,
        Mode::Typed => mode::TYPED_NULL,
        Mode::AllocFail => mode::ALLOC_FAIL,
        Mode::StackOverflow => mode::STACK_OVERFLOW,
    };
    let launch = match a.mode {
        Mode::Typed => {
            let echo = host.hostcall(|x: u64| x);
            let args = vec![KernelArg::U32(mode), KernelArg::U64(echo.raw())];
            Launch::linear("ktyped", a.blocks, a.threads, args)
        }
        _ => Launch::linear("kmain", a.blocks, a.threads, vec![KernelArg::U32(mode)]),
    };
    // Lets a caller time the kernel apart from starting the driver and loading the module.
    eprintln!(
        "hostcalls_bin: launching {:.3} s after the process started",
        started.elapsed().as_secs_f64()
    );
    if let [module] = &mut modules[..] {
        let report = host.run(module, &launch)?;
        eprintln!(
            "hostcalls_bin: {} threads, {} hostcalls served, kernel ran {:.1?}",
            launch.threads(),
            report.calls,
            report.elapsed
        );
        return Ok(verdict(a, &dir, &report, ""));
    }
    let last = modules.len() - 1;
    let mut runs: Vec<_> = modules
        .into_iter()
        .enumerate()
        .map(|(gpu, m)| match a.mode {
            Mode::Panic if gpu < last => {
                let normal = vec![KernelArg::U32(mode::NORMAL)];
                (m, Launch::linear("kmain", a.blocks, a.threads, normal))
            }
            _ => (m, launch.clone()),
        })
        .collect();
    let wall = std::time::Instant::now();
    let reports = host.run_all(&mut runs);
    let wall = wall.elapsed();
    let mut code = 0;
    let mut spans = Vec::new();
    for (gpu, report) in reports.into_iter().enumerate() {
        let report = report?;
        eprintln!(
            "hostcalls_bin: GPU {gpu}: {} threads, {} hostcalls served, kernel ran {:.1?}",
            launch.threads(),
            report.calls,
            report.elapsed
        );
        let c = verdict(a, &dir, &report, &format!("GPU {gpu}: "));
        code = if code == 0 { c } else { code };
        if let (Mode::Null | Mode::Typed, Ok((0, ns))) = (
            a.mode,
            check::report(
                &String::from_utf8_lossy(&report.stdout),
                kernel_label(a.mode),
            ),
        ) {
            spans.push(ns);
        }
    }
    if spans.len() == runs.len() {
        let calls = launch_threads(a) * 64 * spans.len() as u64;
        let longest = spans.iter().copied().max().unwrap_or(1);
        eprintln!(
            "hostcalls_bin: {} GPUs: {calls} verified round trips in {:.3} ms, the longest GPU's span ({:.1} M/s; {:.1?} host wall time for the whole run)",
            spans.len(),
            longest as f64 / 1e6,
            calls as f64 / longest as f64 * 1e3,
            wall
        );
    }
    Ok(code)
}

/// What the kernel's report line of a throughput mode starts with.
fn kernel_label(mode: Mode) -> &'static str {
    if mode == Mode::Null { "null" } else { "typed" }
}

fn launch_threads(a: &Args) -> u64 {
    a.blocks as u64 * a.threads as u64
}

/// The exit code, after saying on stderr what was checked (of the GPU `who` names).
fn verdict(a: &Args, dir: &std::path::Path, report: &RunReport, who: &str) -> u8 {
    let code = report.outcome.exit_code().clamp(0, 255) as u8;
    match (&report.outcome, a.mode) {
        (Outcome::Completed, Mode::Normal) => {
            let mut problems = check::problems(
                &String::from_utf8_lossy(&report.stdout),
                a.blocks,
                a.threads,
            );
            let file = dir.join("culinux.txt");
            match std::fs::read_to_string(&file) {
                Ok(s) if s == "written by a GPU thread through std::fs\n" => {}
                Ok(s) => problems.push(format!("{} holds {s:?}", file.display())),
                Err(e) => problems.push(format!("{}: {e}", file.display())),
            }
            if problems.is_empty() {
                eprintln!(
                    "hostcalls_bin: {who}OK: {} lines, each thread's exactly once; file round-trip verified",
                    a.blocks * a.threads
                );
                0
            } else {
                for p in &problems {
                    eprintln!("hostcalls_bin: {who}FAILED: {p}");
                }
                1
            }
        }
        (Outcome::Completed, Mode::Ping) => {
            let problems =
                check::ping_problems(&String::from_utf8_lossy(&report.stdout), launch_threads(a));
            for p in &problems {
                eprintln!("hostcalls_bin: {who}FAILED: {p}");
            }
            if problems.is_empty() {
                eprintln!(
                    "hostcalls_bin: {who}OK: every thread's {} pings came back to it",
                    check::PINGS
                );
            }
            u8::from(!problems.is_empty())
        }
        (Outcome::Completed, Mode::Mixed) => {
            let problems = check::mixed_problems(
                &String::from_utf8_lossy(&report.stdout),
                a.blocks,
                a.threads,
            );
            for p in &problems {
                eprintln!("hostcalls_bin: {who}FAILED: {p}");
            }
            if problems.is_empty() {
                eprintln!(
                    "hostcalls_bin: {who}OK: every posted line arrived once and every round trip came back to its lane"
                );
            }
            u8::from(!problems.is_empty())
        }
        (Outcome::Completed, Mode::BigWrite) => {
            let mut problems = check::big_write_problems(
                &report.stdout,
                launch_threads(a),
                check::BIG_WRITE_BYTES,
            );
            match check::report(&String::from_utf8_lossy(&report.stdout), "big") {
                Ok((0, ns)) if problems.is_empty() => eprintln!(
                    "hostcalls_bin: {who}OK: {} MiB in one write in {:.3} s ({:.2} GB/s) and every other thread's lines, in order",
                    check::BIG_WRITE_BYTES >> 20,
                    ns as f64 / 1e9,
                    check::BIG_WRITE_BYTES as f64 / ns as f64
                ),
                Ok((0, _)) => {}
                Ok(_) => problems.push("the big write failed".into()),
                Err(e) => problems.push(e),
            }
            for p in &problems {
                eprintln!("hostcalls_bin: {who}FAILED: {p}");
            }
            u8::from(!problems.is_empty())
        }
        (Outcome::Completed, Mode::Null | Mode::Typed) => {
            let what = kernel_label(a.mode);
            match check::report(&String::from_utf8_lossy(&report.stdout), what) {
                Ok((0, ns)) => {
                    let calls = launch_threads(a) * 64;
                    eprintln!(
                        "hostcalls_bin: {who}OK: {calls} verified {what} round trips in {:.3} ms ({:.1} M/s)",
                        ns as f64 / 1e6,
                        calls as f64 / ns as f64 * 1e3
                    );
                    0
                }
                Ok((bad, _)) => {
                    eprintln!("hostcalls_bin: {who}FAILED: {bad} replies to the wrong lane");
                    1
                }
                Err(e) => {
                    eprintln!("hostcalls_bin: {who}FAILED: {e}");
                    1
                }
            }
        }
        (Outcome::Exited(c), _) => {
            eprintln!("hostcalls_bin: {who}the GPU program called exit({c})");
            code
        }
        (outcome @ (Outcome::Aborted { .. } | Outcome::Faulted(_)), _) => {
            let why = outcome.failure().unwrap_or_default();
            eprintln!("hostcalls_bin: {who}{why}");
            code
        }
        (Outcome::Completed, mode) => {
            eprintln!("hostcalls_bin: {who}FAILED: mode {mode:?} should not complete normally");
            1
        }
    }
}
