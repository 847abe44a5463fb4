//! `hostcall_bench`: measures the hostcall path with real-std kernels on the GPU and
//! writes the figures as JSON (hardware, commit, date), each beside the limit or peer it
//! should be judged against, measured in the same run where possible.
//!
//! Peers and limits come from `bench/limits.cu` (CUDA C, built with nvcc on the GPU
//! machine) passed with `--limits`; the host's own file-write speed is measured here.

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

#[derive(Parser)]
#[command(version, about)]
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
    let host = Host::builder()
        .preopen_dir(dir)
        .env("CULINUX_DIR", dir.to_str().unwrap_or("."))
        .capture_output(true)
        .echo_output(false)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| e.to_string())?;
    let launch = Launch::linear("kmain", blocks, threads, vec![KernelArg::U32(kernel_mode)]);
    let r = host.run(module, &launch).map_err(|e| e.to_string())?;
    if r.outcome != Outcome::Completed {
        return Err(format!("mode {kernel_mode} ended with {:?}", r.outcome));
    }
    Ok(r)
}

/// The two numbers after `prefix` on the kernel's report line.
fn numbers(r: &RunReport, prefix: &str) -> Result<(f64, f64), String> {
    let out = String::from_utf8_lossy(&r.stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .ok_or(format!("no {prefix:?} line"))?;
    let mut w = line.split_whitespace().map(str::parse::<f64>);
    match (w.next(), w.next()) {
        (Some(Ok(a)), Some(Ok(b))) => Ok((a, b)),
        _ => Err(format!("bad {prefix:?} line: {line:?}")),
    }
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
fn host_write_gbps(dir: &Path) -> std::io::Result<f64> {
    let chunk = vec![7u8; 8 << 20];
    let path = dir.join("host-bulk.bin");
    let started = Instant::now();
    let mut f = std::fs::File::create(&path)?;
    for _ in 0..32 {
        f.write_all(&chunk)?;
    }
    let secs = started.elapsed().as_secs_f64();
    std::fs::remove_file(path)?;
    Ok((256u64 << 20) as f64 / secs / 1e9)
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

    let image = hostcall_demo::image();
    let started = Instant::now();
    let mut module = CudaModule::load(&image, &CudaOptions::default())?;
    let init_ms = started.elapsed().as_secs_f64() * 1e3;
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

    let (n, ns) = numbers(&run(&mut module, &dir, mode::LATENCY, 1, 32)?, "latency: ")?;
    results.push(result(
        "roundtrip_latency_1_thread",
        ns / n / 1e3,
        "us",
        limit("roundtrip_us").map(|l| ("cuda_c_flag_roundtrip_1_thread", l)),
        "one GPU thread, ping service, 2000 calls, GPU %globaltimer",
    ));

    let (blocks, threads) = (132u32, 256u32);
    let total = (blocks * threads) as f64;
    let r = run(&mut module, &dir, mode::PING, blocks, threads)?;
    let problems = check::ping_problems(&String::from_utf8_lossy(&r.stdout), total as u64);
    if !problems.is_empty() {
        return Err(format!("ping check failed: {problems:?}").into());
    }
    results.push(result(
        "ping_roundtrips_per_s_132x256",
        total * check::PINGS as f64 / r.elapsed.as_secs_f64(),
        "calls/s",
        None,
        "33792 threads x 64 verified pings, one consumer thread; kernel wall time",
    ));

    let r = run(&mut module, &dir, mode::PRINTLN, blocks, threads)?;
    results.push(result(
        "println_lines_per_s_132x256",
        total * 16.0 / r.elapsed.as_secs_f64(),
        "lines/s",
        limit("cuda_printf_lines_per_s").map(|l| ("cuda_printf_lines_per_s", l)),
        "std println! from 33792 threads x 16 lines (std's stdout lock serializes them)",
    ));

    let (bytes, ns) = numbers(&run(&mut module, &dir, mode::BULK_WRITE, 1, 32)?, "bulk: ")?;
    std::fs::remove_file(dir.join("bulk.bin"))?;
    results.push(result(
        "std_fs_write_gb_per_s_1_thread",
        bytes / ns,
        "GB/s",
        Some(("host_write_same_dir_gb_per_s", host_write_gbps(&dir)?)),
        "one GPU thread, File::write_all of 256 MiB in 8 MiB writes (4 KiB per round trip)",
    ));

    let r = run(&mut module, &dir, mode::MALLOC, blocks, threads)?;
    results.push(result(
        "malloc_free_pairs_per_s_132x256",
        total * 256.0 / r.elapsed.as_secs_f64(),
        "pairs/s",
        limit("cuda_malloc_pairs_per_s").map(|l| ("cuda_malloc_pairs_per_s", l)),
        "Box::new([u8; 64]) + drop, 33792 threads x 256, device heap, no hostcall",
    ));

    let doc = json!({
        "benchmark": "hostcall_bench",
        "hardware": { "gpu": module.describe(), "host_cpu": cpu_model() },
        "commit": hostcall_demo::COMMIT,
        "date": utc_now(),
        "module_sha256": image.sha256,
        "limits_source": a.limits.as_ref().map(|p| p.display().to_string()),
        "limits": limits,
        "results": results,
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
            "{:<36} {:>14.4} {:<8}{cmp}",
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
