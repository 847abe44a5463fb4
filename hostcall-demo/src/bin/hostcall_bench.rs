//! `hostcall_bench`: measures the hostcall path with real-std kernels on the GPU and
//! writes the figures as JSON (hardware, commit, date), each beside the limit or peer it
//! is judged against, measured in the same run.
//!
//! Peers and limits come from `bench/limits.cu` (CUDA C, built with nvcc on the GPU
//! machine) passed with `--limits`; the host's own file-write speed is measured here.
//! `bench_plot` draws the sweep of the JSON as an SVG.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use hostcall_demo::{check, mode};
use hostcall_runtime::cuda::{CudaModule, CudaOptions, KernelLimit, ModuleImage};
use hostcall_runtime::stream::{Callbacks, StreamSpec, TagCounter};
use hostcall_runtime::{GpuModule, Host, KernelArg, Launch, Outcome, RunReport};
use serde_json::{Value, json};

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
    /// the CPU (`threads-bench.gpu`, `threads-bench-cpu`, `net-bench.gpu`,
    /// `net-bench-cpu`): their thread, rayon and TCP figures are reported, the GPU's
    /// beside the CPU's (part `programs`).
    #[arg(long)]
    programs: Option<PathBuf>,
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
    match bench(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hostcall_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `mode` as `blocks` x `threads` and insists it completed.
fn run(
    module: &mut CudaModule,
    dir: &Path,
    kernel_mode: u32,
    blocks: u32,
    threads: u32,
) -> Result<RunReport, String> {
    run_with(module, dir, kernel_mode, blocks, threads, 1)
}

/// `run` with `consumers` host threads serving the ports.
fn run_with(
    module: &mut CudaModule,
    dir: &Path,
    kernel_mode: u32,
    blocks: u32,
    threads: u32,
    consumers: usize,
) -> Result<RunReport, String> {
    let host = Host::builder()
        .consumers(consumers)
        .preopen_dir(dir, hostcall_demo::GUEST_DIR)
        .env("CULINUX_DIR", hostcall_demo::GUEST_DIR)
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let launch = Launch::linear("kmain", blocks, threads, vec![KernelArg::U32(kernel_mode)]);
    let r = host.run(module, &launch).map_err(|e| e.to_string())?;
    if r.outcome != Outcome::Completed {
        return Err(format!(
            "mode {kernel_mode} at {blocks}x{threads} ended with {:?}",
            r.outcome
        ));
    }
    Ok(r)
}

/// Runs culinux's `ktyped` in `kernel_mode` as `blocks` x `threads`, serving it the host
/// closure `|x: u64| x` with one consumer thread (as the null calls it is compared
/// with), and insists it completed.
fn run_typed(
    module: &mut CudaModule,
    kernel_mode: u32,
    blocks: u32,
    threads: u32,
) -> Result<RunReport, String> {
    let mut host = Host::builder()
        .consumers(1)
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let echo = host.hostcall(|x: u64| x);
    let args = vec![KernelArg::U32(kernel_mode), KernelArg::U64(echo.raw())];
    let r = host
        .run(module, &Launch::linear("ktyped", blocks, threads, args))
        .map_err(|e| e.to_string())?;
    if r.outcome != Outcome::Completed {
        return Err(format!(
            "ktyped mode {kernel_mode} at {blocks}x{threads} ended with {:?}",
            r.outcome
        ));
    }
    Ok(r)
}

/// Messages each thread submits in a stream row.
const STREAM_MESSAGES: u32 = 64;

/// One stream row's figures.
struct StreamRate {
    /// Messages per second from the first thread's first submit to the last one's last.
    gpu: f64,
    /// Messages per second from the launch until the host had taken every one.
    end_to_end: f64,
}

/// Runs culinux's `kstream` as `blocks` x 256 threads, each submitting
/// `STREAM_MESSAGES` messages of `words` words to a default stream (rings that wait)
/// emptied by `readers` host threads and counted per tag; insists that every message
/// arrived, once.
fn run_stream(
    module: &mut CudaModule,
    spec: StreamSpec,
    words: u32,
    blocks: u32,
    readers: usize,
    count: bool,
) -> Result<StreamRate, String> {
    let mut host = Host::builder()
        .stream_readers(readers)
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let counter = TagCounter::new();
    let callbacks = if count {
        Callbacks::new().on_every(counter.callback())
    } else {
        Callbacks::new()
    };
    let stream = host.stream(spec, callbacks);
    let args = vec![
        KernelArg::Stream(stream),
        KernelArg::U32(words),
        KernelArg::U32(STREAM_MESSAGES),
    ];
    let r = host
        .run(module, &Launch::linear("kstream", blocks, 256, args))
        .map_err(|e| e.to_string())?;
    if r.outcome != Outcome::Completed {
        return Err(format!(
            "kstream of {words} words at {blocks}x256 ended with {:?}",
            r.outcome
        ));
    }
    let (dropped, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "stream")?;
    let sent = u64::from(blocks) * 256 * u64::from(STREAM_MESSAGES);
    let taken = match count {
        true => counter.counts().get(&words).copied().unwrap_or(0),
        false => sent,
    };
    if dropped != 0 || taken != sent || r.streams[0].messages != sent {
        return Err(format!(
            "kstream of {words} words at {blocks}x256: {sent} sent, {taken} counted, {dropped} dropped"
        ));
    }
    Ok(StreamRate {
        gpu: sent as f64 / (ns as f64 / 1e9),
        end_to_end: sent as f64 / r.elapsed.as_secs_f64(),
    })
}

/// The stream rows: messages/s and GB/s of 8-, 16- and 64-byte messages at 132 x 256
/// and 1056 x 256, against the device-to-pinned-host copy bandwidth and CUDA printf.
fn stream_rows(
    module: &mut CudaModule,
    limit: &dyn Fn(&str) -> Option<f64>,
    readers: usize,
    spec: StreamSpec,
) -> Result<Vec<Value>, String> {
    let mut rows = Vec::new();
    let shape = format!(
        "{} rings of {} KiB that wait",
        spec.rings,
        spec.ring_bytes >> 10
    );
    for words in [1, 2, 8] {
        for blocks in [132, 1056] {
            let rate = run_stream(module, spec, words, blocks, readers, true)?;
            let one = run_stream(module, spec, words, blocks, 1, true)?;
            let bare = run_stream(module, spec, words, blocks, readers, false)?;
            let bytes = 8.0 * f64::from(words);
            eprintln!(
                "hostcall_bench: {blocks}x256: {:.2} M stream messages/s of {bytes} bytes ({:.2} GB/s; {:.2} M/s end to end; {:.2} M/s with one host reader, {:.2} M/s with no callback)",
                rate.gpu / 1e6,
                rate.gpu * bytes / 1e9,
                rate.end_to_end / 1e6,
                one.gpu / 1e6,
                bare.gpu / 1e6
            );
            let name = format!("stream_{bytes}_byte_messages_per_s_{blocks}x256");
            let note = format!(
                "{STREAM_MESSAGES} messages of {bytes} bytes per thread, {shape}, emptied by {readers} host threads and counted per tag; GPU time from the first submit to the last; end_to_end_per_s: launch until the host took the last; one_reader_per_s: the same with one host thread; no_callback_per_s: with no callback (messages only counted by the stream)"
            );
            let printf_key = if blocks == 132 {
                "cuda_printf_lines_per_s"
            } else {
                "cuda_printf_lines_per_s_1056x256"
            };
            let mut row = result(
                &name,
                rate.gpu,
                "messages/s",
                limit(printf_key).map(|l| (printf_key, l)),
                &note,
            );
            row["end_to_end_per_s"] = json!(rate.end_to_end);
            row["one_reader_per_s"] = json!(one.gpu);
            row["no_callback_per_s"] = json!(bare.gpu);
            rows.push(row);
            rows.push(result(
                &format!("stream_{bytes}_byte_payload_gb_per_s_{blocks}x256"),
                rate.gpu * bytes / 1e9,
                "GB/s",
                limit("d2h_pinned_copy_gb_per_s").map(|l| ("d2h_pinned_copy_gb_per_s", l)),
                &format!(
                    "the payload of {name} (each message adds an 8-byte header, each batch of a warp's messages an 8-byte commit word)"
                ),
            ));
        }
    }
    Ok(rows)
}

/// Consumer thread counts of the consumer rows, measured round-robin `CONSUMER_ROUNDS`
/// times.
const CONSUMER_COUNTS: [usize; 6] = [1, 2, 3, 4, 6, 8];
const CONSUMER_ROUNDS: usize = 3;

/// Null calls at 132 x 256 and 1056 x 256 by the number of consumer threads (medians of
/// `CONSUMER_ROUNDS`, round-robin), beside one consumer; and the host CPU the default
/// number uses while the GPU computes without calling.
fn consumer_rows(
    module: &mut CudaModule,
    dir: &Path,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for blocks in [132u32, 1056] {
        let mut rates = vec![Vec::new(); CONSUMER_COUNTS.len()];
        for _ in 0..CONSUMER_ROUNDS {
            for (i, &c) in CONSUMER_COUNTS.iter().enumerate() {
                let r = run_with(module, dir, mode::NULL, blocks, 256, c)?;
                let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
                if bad != 0 {
                    return Err(format!("{bad} null replies reached the wrong lane").into());
                }
                rates[i].push(f64::from(blocks) * 256.0 * NULL_PINGS / (ns as f64 / 1e9));
            }
        }
        let medians: Vec<f64> = rates
            .iter_mut()
            .map(|v| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect();
        eprintln!(
            "hostcall_bench: {blocks}x256 null calls by consumers {CONSUMER_COUNTS:?}: {:.1?} M/s",
            medians.iter().map(|m| m / 1e6).collect::<Vec<_>>()
        );
        for (&c, &m) in CONSUMER_COUNTS.iter().zip(&medians).skip(1) {
            rows.push(result(
                &format!("null_calls_per_s_{blocks}x256_{c}_consumers"),
                m,
                "calls/s",
                Some((&format!("null_calls_per_s_{blocks}x256_1_consumer"), medians[0])),
                &format!(
                    "as null_calls_per_s_{blocks}x256, with {c} host consumer threads; median of {CONSUMER_ROUNDS}, round-robin over {CONSUMER_COUNTS:?}"
                ),
            ));
        }
    }
    let consumers = hostcall_runtime::default_consumers();
    let cpu_before = process_cpu()?;
    let wall = Instant::now();
    run_with(module, dir, mode::SLEEP, 1, 32, consumers)?;
    let cpu = (process_cpu()? - cpu_before).as_secs_f64() / wall.elapsed().as_secs_f64();
    rows.push(result(
        "host_cpu_while_gpu_sleeps_5s_default_consumers",
        cpu * 100.0,
        "% of a core",
        None,
        &format!(
            "as host_cpu_while_gpu_sleeps_5s, with the default {consumers} consumer threads on this machine"
        ),
    ));
    Ok(rows)
}

/// Rounds of one GPU alone, then every GPU at once, in the several-GPU rows.
const GPU_ROUNDS: usize = 3;

/// Null calls at 1056 x 256 on one GPU, then on every GPU of the machine at once (one
/// `Host::run_all`), `GPU_ROUNDS` times in turn: the medians, each GPU's calls over
/// the longest GPU's span. No rows on a machine with one GPU.
fn gpu_rows(first: CudaModule, image: &ModuleImage<'_>) -> Result<Vec<Value>, String> {
    let gpus = hostcall_runtime::cuda::device_count().map_err(|e| e.to_string())?;
    if gpus < 2 {
        eprintln!("hostcall_bench: one GPU: no several-GPU rows");
        return Ok(Vec::new());
    }
    let mut modules = vec![first];
    for d in 1..gpus {
        let m = CudaModule::load(image, &CudaOptions::default().device(d))
            .map_err(|e| e.to_string())?;
        modules.push(m);
    }
    let host = Host::builder()
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let launch = Launch::linear("kmain", 1056, 256, vec![KernelArg::U32(mode::NULL)]);
    let per_gpu_calls = 1056.0 * 256.0 * NULL_PINGS;
    let (mut alone, mut together) = (Vec::new(), Vec::new());
    let mut runs: Vec<_> = modules.into_iter().map(|m| (m, launch.clone())).collect();
    for _ in 0..GPU_ROUNDS {
        let r = host
            .run(&mut runs[0].0, &launch)
            .map_err(|e| e.to_string())?;
        let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
        if bad != 0 || r.outcome != Outcome::Completed {
            return Err(format!("null calls on GPU 0: {bad} wrong, {:?}", r.outcome));
        }
        alone.push(per_gpu_calls / (ns as f64 / 1e9));
        let mut longest = 0;
        for (gpu, r) in host.run_all(&mut runs).into_iter().enumerate() {
            let r = r.map_err(|e| e.to_string())?;
            let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
            if bad != 0 || r.outcome != Outcome::Completed {
                return Err(format!(
                    "null calls on GPU {gpu}: {bad} wrong, {:?}",
                    r.outcome
                ));
            }
            longest = longest.max(ns);
        }
        together.push(per_gpu_calls * gpus as f64 / (longest as f64 / 1e9));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (one, all) = (median(&mut alone), median(&mut together));
    eprintln!(
        "hostcall_bench: null calls at 1056x256: {:.2} M/s on one GPU, {:.2} M/s on {gpus} at once ({:.2}x)",
        one / 1e6,
        all / 1e6,
        all / one
    );
    let mut row = result(
        &format!("null_calls_per_s_1056x256_on_{gpus}_gpus"),
        all,
        "calls/s",
        Some(("null_calls_per_s_1056x256_on_1_gpu", one)),
        &format!(
            "64 verified null round trips per thread on each GPU at once (Host::run_all, the default {} consumer threads per GPU): every GPU's calls over the longest GPU's span; median of {GPU_ROUNDS}, alternating with one GPU alone",
            hostcall_runtime::default_consumers()
        ),
    );
    row["rounds_one_gpu"] = json!(alone);
    row["rounds_all_gpus"] = json!(together);
    Ok(vec![row])
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

/// The programs' rows: each figure on the GPU, compared with the CPU's.
fn program_rows(dir: &Path) -> Result<Vec<Value>, String> {
    let figures = hostcall_demo::programs::measure(dir)?;
    Ok(figures
        .iter()
        .map(|f| {
            eprintln!(
                "hostcall_bench: {}: {:.2} on the GPU, {:.2} on the CPU",
                f.name, f.gpu, f.cpu
            );
            result(
                f.name,
                f.gpu,
                f.unit,
                Some((&format!("cpu_{}", f.name), f.cpu)),
                &f.note,
            )
        })
        .collect())
}

/// Host baseline for the bulk write: the same bytes in the same chunks, from the host.
fn host_write_gbps(dir: &Path, bytes: usize) -> std::io::Result<f64> {
    let chunk = vec![7u8; 8 << 20];
    let path = dir.join("host-bulk.bin");
    let started = Instant::now();
    let mut f = std::fs::File::create(&path)?;
    for _ in 0..bytes / chunk.len() {
        f.write_all(&chunk)?;
    }
    let secs = started.elapsed().as_secs_f64();
    std::fs::remove_file(path)?;
    Ok(bytes as f64 / secs / 1e9)
}

/// CPU time this process has used (all threads), from `/proc/self/stat`.
fn process_cpu() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    // Fields after the command name (which may hold spaces) start at its closing ')'.
    let rest = stat.rsplit_once(')').ok_or("bad /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| "bad /proc/self/stat".to_owned())
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the ')', in
    // clock ticks of 10 ms (USER_HZ is 100 on x86-64 Linux).
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for now (UTC), without a date crate.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Names of the latency stages (`hostcall_client::stages::STAGES`), as reported.
const STAGE_NAMES: [&str; 6] = [
    "packet (activemask, match)",
    "port (lock, shfl)",
    "request (slot, fence, barrier)",
    "publish (release store)",
    "answer (host + PCIe poll)",
    "release (barrier, unlock)",
];

/// One-thread round-trip latency from a `latency:` line, with its stage breakdown.
fn latency(r: &RunReport) -> Result<(f64, Value), String> {
    let v = numbers(r, "latency: ")?;
    let [n, total, ref stages @ ..] = v[..] else {
        return Err(format!("short latency line: {v:?}"));
    };
    let breakdown: serde_json::Map<String, Value> = STAGE_NAMES
        .iter()
        .zip(stages)
        .map(|(name, ns)| (name.to_string(), json!(ns / n / 1e3)))
        .collect();
    Ok((total / n / 1e3, Value::Object(breakdown)))
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

/// The hostcall rows: latency, the sweep of null calls and println! lines, typed calls,
/// four consumers, file writes, malloc, idle CPU and the largest block.
fn measure_calls(
    module: &mut CudaModule,
    dir: &Path,
    limit: &dyn Fn(&str) -> Option<f64>,
    results: &mut Vec<Value>,
    sweep: &mut Vec<Value>,
    kernel: KernelLimit,
) -> Result<(), Box<dyn std::error::Error>> {
    let (us, stages) = latency(&run(module, dir, mode::LATENCY, 1, 32)?)?;
    let mut row = result(
        "roundtrip_latency_1_thread",
        us,
        "us",
        limit("roundtrip_us").map(|l| ("cuda_c_flag_roundtrip_1_thread", l)),
        "one GPU thread, ping service, 2000 calls, GPU %globaltimer; stages_us: where it goes",
    );
    row["stages_us"] = stages;
    results.push(row);

    // The sweep: verified null round trips and println! lines against launched threads.
    for (blocks, threads) in SWEEP {
        let total = blocks as f64 * threads as f64;
        let r = run(module, dir, mode::NULL, blocks, threads)?;
        let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
        if bad != 0 {
            return Err(
                format!("{bad} null replies reached the wrong lane at {blocks}x{threads}").into(),
            );
        }
        let null_per_s = total * NULL_PINGS / (ns as f64 / 1e9);
        let r = run(module, dir, mode::PRINTLN, blocks, threads)?;
        let lines = String::from_utf8_lossy(&r.stdout).lines().count() as f64;
        if lines != total * LINES_PER_THREAD {
            return Err(format!(
                "{lines} println lines at {blocks}x{threads}, expected {}",
                total * LINES_PER_THREAD
            )
            .into());
        }
        let println_per_s = lines / r.elapsed.as_secs_f64();
        eprintln!(
            "hostcall_bench: {blocks}x{threads}: {:.2} M null calls/s, {:.2} M println lines/s",
            null_per_s / 1e6,
            println_per_s / 1e6
        );
        sweep.push(json!({
            "blocks": blocks, "threads_per_block": threads, "threads": total,
            "null_calls_per_s": null_per_s, "println_lines_per_s": println_per_s,
        }));
    }
    let at = |b: u32, key: &str| {
        sweep
            .iter()
            .find(|s| s["blocks"] == b)
            .and_then(|s| s[key].as_f64())
            .unwrap_or(0.0)
    };
    for (b, printf_key) in [
        (132, "cuda_printf_lines_per_s"),
        (1056, "cuda_printf_lines_per_s_1056x256"),
    ] {
        results.push(result(
            &format!("null_calls_per_s_{b}x256"),
            at(b, "null_calls_per_s"),
            "calls/s",
            limit("flag_roundtrips_per_s_132_channels")
                .map(|l| ("cuda_c_flag_roundtrips_per_s_132_channels", l)),
            "64 verified ping round trips per thread, one consumer thread; GPU time from the first call to the last answer",
        ));
        results.push(result(
            &format!("println_lines_per_s_{b}x256"),
            at(b, "println_lines_per_s"),
            "lines/s",
            limit(printf_key).map(|l| (printf_key, l)),
            "std println! of 16 lines per thread; from launch until the host has written every line",
        ));
    }

    // Typed calls of a host closure, beside the null calls of this run: the typed layer
    // (encoding, the closure's type check, decoding) must cost no more than the noise.
    let r = run_typed(module, mode::TYPED_LATENCY, 1, 32)?;
    let v = numbers(&r, "typed_latency: ")?;
    let [n, total] = v[..] else {
        return Err(format!("bad typed_latency line: {v:?}").into());
    };
    results.push(result(
        "typed_roundtrip_latency_1_thread",
        total / n / 1e3,
        "us",
        Some(("roundtrip_latency_1_thread", us)),
        "one GPU thread, 2000 typed calls of the host closure |x: u64| x (HostFn), GPU %globaltimer",
    ));
    for b in [132, 1056] {
        let r = run_typed(module, mode::TYPED_NULL, b, 256)?;
        let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "typed")?;
        if bad != 0 {
            return Err(format!("{bad} typed replies reached the wrong lane at {b}x256").into());
        }
        let per_s = b as f64 * 256.0 * NULL_PINGS / (ns as f64 / 1e9);
        eprintln!(
            "hostcall_bench: {b}x256: {:.2} M typed calls/s",
            per_s / 1e6
        );
        results.push(result(
            &format!("typed_calls_per_s_{b}x256"),
            per_s,
            "calls/s",
            Some((&format!("null_calls_per_s_{b}x256"), at(b, "null_calls_per_s"))),
            "64 verified typed calls of the host closure |x: u64| x per thread, one consumer thread; GPU time from the first call to the last answer",
        ));
    }

    // The same 1056 x 256 null calls with four consumer threads: how far one thread is
    // the limit.
    let r = run_with(module, dir, mode::NULL, 1056, 256, 4)?;
    let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
    if bad != 0 {
        return Err(format!("{bad} null replies reached the wrong lane with 4 consumers").into());
    }
    results.push(result(
        "null_calls_per_s_1056x256_4_consumers",
        1056.0 * 256.0 * NULL_PINGS / (ns as f64 / 1e9),
        "calls/s",
        Some((
            "null_calls_per_s_1056x256_1_consumer",
            at(1056, "null_calls_per_s"),
        )),
        "as null_calls_per_s_1056x256, with four host consumer threads",
    ));

    let v = numbers(&run(module, dir, mode::BULK_WRITE, 1, 32)?, "bulk: ")?;
    std::fs::remove_file(dir.join("bulk.bin"))?;
    let bytes = v[0];
    results.push(result(
        "std_fs_write_gb_per_s_1_thread",
        bytes / v[1],
        "GB/s",
        Some((
            "host_write_same_dir_gb_per_s",
            host_write_gbps(dir, bytes as usize)?,
        )),
        "one GPU thread, File::write_all of 1 GiB in 8 MiB writes (DMA from the device heap)",
    ));

    let r = run(module, dir, mode::MALLOC, 132, 256)?;
    results.push(result(
        "malloc_free_pairs_per_s_132x256",
        132.0 * 256.0 * 256.0 / r.elapsed.as_secs_f64(),
        "pairs/s",
        limit("cuda_malloc_pairs_per_s").map(|l| ("cuda_malloc_pairs_per_s", l)),
        "Box::new([u8; 64]) + drop, 33792 threads x 256, device heap, no hostcall",
    ));

    let cpu_before = process_cpu()?;
    let wall = Instant::now();
    let r = run(module, dir, mode::SLEEP, 1, 32)?;
    let cpu = (process_cpu()? - cpu_before).as_secs_f64() / wall.elapsed().as_secs_f64();
    results.push(result(
        "host_cpu_while_gpu_sleeps_5s",
        cpu * 100.0,
        "% of a core",
        None,
        "one GPU thread sleeps 5 s without hostcalls; all host threads of this process",
    ));
    results.push(result(
        "roundtrip_latency_after_idle",
        latency(&r)?.0,
        "us",
        limit("roundtrip_us").map(|l| ("cuda_c_flag_roundtrip_1_thread", l)),
        "the same thread's 2000 round trips right after the 5 s sleep",
    ));

    let r = run(module, dir, mode::NULL, 4, 1024)?;
    let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
    if bad != 0 {
        return Err(format!("{bad} null replies reached the wrong lane at 4x1024").into());
    }
    let mut row = result(
        "max_threads_per_block",
        kernel.max_threads as f64,
        "threads",
        Some(("hardware_max_threads_per_block", 1024.0)),
        "cuFuncGetAttribute of kmain; a 4 x 1024 null-call launch ran and checked every reply",
    );
    row["registers_per_thread"] = json!(kernel.registers);
    row["null_calls_per_s_4x1024"] = json!(4.0 * 1024.0 * NULL_PINGS / (ns as f64 / 1e9));
    results.push(row);

    Ok(())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}
