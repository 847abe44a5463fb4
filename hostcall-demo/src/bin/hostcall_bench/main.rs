//! `hostcall_bench`: measures the hostcall path with real-std kernels on the GPU and
//! writes the figures as JSON (hardware, commit, date), each beside the limit or peer it
//! is judged against, measured in the same run.
//!
//! Peers and limits come from `bench/limits.cu` (CUDA C, built with nvcc on the GPU
//! machine) passed with `--limits`; the host's own file-write speed is measured here.
//! `bench_plot` draws the sweep of the JSON as an SVG.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use hostcall_runtime::cuda::{CudaModule, CudaOptions};
use hostcall_runtime::stream::StreamSpec;
use hostcall_runtime::{GpuModule, RunReport};
use serde_json::{Value, json};

mod calls;
mod consumers;
mod gpus;
mod machine;
mod math;
mod programs;
mod runs;
mod streams;

use calls::*;
use consumers::*;
use gpus::*;
use machine::*;
use math::*;
use programs::*;
use runs::*;
use streams::*;

/// Measures hostcall throughput and latency on the GPU beside CUDA C references of the
/// same run, and writes them as JSON.
#[derive(Parser)]
#[command(name = "hostcall_bench", version)]
struct Args {
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results/latest.json")]
    out: PathBuf,
    /// JSON written by bench/limits.cu on the same machine.
    #[arg(long)]
    limits: Option<PathBuf>,
    /// Scratch directory for the file-write benchmark (default: a new temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Measure only these parts (and the module load); default: all of them.
    #[arg(long, value_enum)]
    only: Vec<Part>,
    /// Host threads emptying the stream rows' rings (default:
    /// `hostcall_runtime::default_stream_readers()`).
    #[arg(long)]
    stream_readers: Option<usize>,
    /// Rings of the stream rows' streams (default: `StreamSpec::default()`'s).
    #[arg(long)]
    stream_rings: Option<u32>,
    /// KiB of each of those rings (default: `StreamSpec::default()`'s).
    #[arg(long)]
    stream_ring_kib: Option<usize>,
    /// A folder with the benchmark programs packaged by `cargo gpu build` and built for
    /// the CPU (`startup.gpu`, `threads-bench.gpu`, `net-bench.gpu`, each beside its
    /// `-cpu` build): their start-up, thread, rayon and TCP figures are reported, the
    /// GPU's beside the CPU's, with CUDA's own start-up floor (part `programs`).
    #[arg(long)]
    programs: Option<PathBuf>,
    /// Only start CUDA, create the context and release it, printing each step's time as
    /// JSON: the floor the programs' rows measure in processes of their own.
    #[arg(long, hide = true)]
    cuda_start: bool,
}

/// The parts of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    /// Hostcalls: latency, the sweep, typed calls, consumers, files, malloc, idle CPU.
    Calls,
    /// Tagged streams' messages/s and GB/s.
    Streams,
    /// Null calls on every GPU at once against one (on a machine with several).
    Gpus,
    /// Null calls by the number of host consumer threads, and their idle CPU.
    Consumers,
    /// Ordinary std programs on the GPU and on the CPU (needs `--programs`).
    Programs,
    /// Float math functions' evaluations per second, beside CUDA's own.
    Math,
}

/// Launch shapes of the sweep, from one warp to 1056 x 256 threads.
const SWEEP: [(u32, u32); 8] = [
    (1, 32),
    (1, 256),
    (8, 256),
    (33, 256),
    (132, 256),
    (264, 256),
    (528, 256),
    (1056, 256),
];

/// Round trips per thread in null mode, lines per thread in println mode (culinux).
const NULL_PINGS: f64 = 64.0;
const LINES_PER_THREAD: f64 = 16.0;

fn main() -> ExitCode {
    hostcall_runtime::init_logging();
    let a = Args::parse();
    if a.cuda_start {
        return match cuda_start() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hostcall_bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match bench(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hostcall_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The numbers after `prefix` on the kernel's report line.
fn numbers(r: &RunReport, prefix: &str) -> Result<Vec<f64>, String> {
    let out = String::from_utf8_lossy(&r.stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .ok_or(format!("no {prefix:?} line"))?;
    line.split_whitespace()
        .map(|w| {
            w.parse::<f64>()
                .map_err(|_| format!("bad {prefix:?} line: {line:?}"))
        })
        .collect()
}

fn result(name: &str, value: f64, unit: &str, compare: Option<(&str, f64)>, note: &str) -> Value {
    let mut v = json!({ "name": name, "value": value, "unit": unit, "note": note });
    if let Some((what, reference)) = compare {
        v["compare_to"] = json!({ "name": what, "value": reference, "unit": unit });
        v["ratio"] = json!(value / reference);
    }
    v
}

fn bench(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let dir = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("hostcall-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir)?;
    let limits: Value = match &a.limits {
        Some(p) => serde_json::from_str(&std::fs::read_to_string(p)?)?,
        None => json!({}),
    };
    let limit = |k: &str| limits[k].as_f64();

    let image = culinux_ptx::image();
    let started = Instant::now();
    let mut module = CudaModule::load(&image, &CudaOptions::default())?;
    let init_ms = started.elapsed().as_secs_f64() * 1e3;
    let gpu = module.describe();
    let kernel = module.kernel_limit("kmain")?;
    let mut results = vec![
        result(
            "module_load_cubin",
            module.load_time().as_secs_f64() * 1e3,
            "ms",
            None,
            "cuModuleLoadData of the embedded sm_90 cubin alone (PTX JIT of the same module: hostcalls_bin --jit)",
        ),
        result(
            "cuda_init_and_module_load",
            init_ms,
            "ms",
            None,
            "cuInit, primary context, stack limit and module load",
        ),
    ];
    let mut sweep = Vec::new();
    let part = |p: Part| a.only.is_empty() || a.only.contains(&p);
    if part(Part::Calls) {
        measure_calls(&mut module, &dir, &limit, &mut results, &mut sweep, kernel)?;
    }
    if part(Part::Streams) {
        let d = StreamSpec::default();
        let spec = StreamSpec {
            rings: a.stream_rings.unwrap_or(d.rings),
            ring_bytes: a.stream_ring_kib.map_or(d.ring_bytes, |k| k << 10),
            ..d
        };
        let readers = a
            .stream_readers
            .unwrap_or_else(hostcall_runtime::default_stream_readers);
        results.extend(stream_rows(&mut module, &limit, readers, spec)?);
    }
    if part(Part::Consumers) {
        results.extend(consumer_rows(&mut module, &dir)?);
    }
    if part(Part::Math) {
        results.extend(math_rows(&mut module, &limit)?);
    }
    match (&a.programs, a.only.contains(&Part::Programs)) {
        (Some(dir), _) if part(Part::Programs) => results.extend(program_rows(dir)?),
        (None, true) => return Err("part `programs` needs --programs DIR".into()),
        _ => {}
    }
    // Last: it takes the module, to run it beside the other GPUs'.
    if part(Part::Gpus) {
        results.extend(gpu_rows(module, &image)?);
    }

    let doc = json!({
        "benchmark": "hostcall_bench",
        "hardware": { "gpu": gpu, "host_cpu": cpu_model() },
        "commit": hostcall_demo::COMMIT,
        "date": utc_now(),
        "module_sha256": image.sha256,
        "limits_source": a.limits.as_ref().map(|p| p.display().to_string()),
        "limits": limits,
        "results": results,
        "sweep": sweep,
    });
    if let Some(parent) = a.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&a.out, serde_json::to_string_pretty(&doc)? + "\n")?;
    let _ = std::fs::remove_dir(&dir);

    let mut table = String::new();
    for r in doc["results"].as_array().into_iter().flatten() {
        let cmp = r["compare_to"]["name"].as_str().map_or(String::new(), |c| {
            format!(
                "  vs {c} {:.4} ({:.2}x)",
                r["compare_to"]["value"].as_f64().unwrap_or(0.0),
                r["ratio"].as_f64().unwrap_or(0.0)
            )
        });
        let _ = writeln!(
            table,
            "{:<36} {:>14.4} {:<11}{cmp}",
            r["name"].as_str().unwrap_or(""),
            r["value"].as_f64().unwrap_or(0.0),
            r["unit"].as_str().unwrap_or("")
        );
    }
    print!("{table}");
    eprintln!("hostcall_bench: wrote {}", a.out.display());
    Ok(())
}
