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
use hostcall_runtime::cuda::{CudaModule, CudaOptions};
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
/// closure `|x: u64| x`, and insists it completed.
fn run_typed(
    module: &mut CudaModule,
    kernel_mode: u32,
    blocks: u32,
    threads: u32,
) -> Result<RunReport, String> {
    let mut host = Host::builder()
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

    let (us, stages) = latency(&run(&mut module, &dir, mode::LATENCY, 1, 32)?)?;
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
    let mut sweep = Vec::new();
    for (blocks, threads) in SWEEP {
        let total = blocks as f64 * threads as f64;
        let r = run(&mut module, &dir, mode::NULL, blocks, threads)?;
        let (bad, ns) = check::report(&String::from_utf8_lossy(&r.stdout), "null")?;
        if bad != 0 {
            return Err(
                format!("{bad} null replies reached the wrong lane at {blocks}x{threads}").into(),
            );
        }
        let null_per_s = total * NULL_PINGS / (ns as f64 / 1e9);
        let r = run(&mut module, &dir, mode::PRINTLN, blocks, threads)?;
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
    let r = run_typed(&mut module, mode::TYPED_LATENCY, 1, 32)?;
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
        let r = run_typed(&mut module, mode::TYPED_NULL, b, 256)?;
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
    let r = run_with(&mut module, &dir, mode::NULL, 1056, 256, 4)?;
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

    let v = numbers(&run(&mut module, &dir, mode::BULK_WRITE, 1, 32)?, "bulk: ")?;
    std::fs::remove_file(dir.join("bulk.bin"))?;
    let bytes = v[0];
    results.push(result(
        "std_fs_write_gb_per_s_1_thread",
        bytes / v[1],
        "GB/s",
        Some((
            "host_write_same_dir_gb_per_s",
            host_write_gbps(&dir, bytes as usize)?,
        )),
        "one GPU thread, File::write_all of 1 GiB in 8 MiB writes (DMA from the device heap)",
    ));

    let r = run(&mut module, &dir, mode::MALLOC, 132, 256)?;
    results.push(result(
        "malloc_free_pairs_per_s_132x256",
        132.0 * 256.0 * 256.0 / r.elapsed.as_secs_f64(),
        "pairs/s",
        limit("cuda_malloc_pairs_per_s").map(|l| ("cuda_malloc_pairs_per_s", l)),
        "Box::new([u8; 64]) + drop, 33792 threads x 256, device heap, no hostcall",
    ));

    let cpu_before = process_cpu()?;
    let wall = Instant::now();
    let r = run(&mut module, &dir, mode::SLEEP, 1, 32)?;
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

    let r = run(&mut module, &dir, mode::NULL, 4, 1024)?;
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

    let doc = json!({
        "benchmark": "hostcall_bench",
        "hardware": { "gpu": module.describe(), "host_cpu": cpu_model() },
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
