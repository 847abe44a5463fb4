//! The hostcall rows: latency by stage, the sweep of null calls and `println!` lines,
//! typed calls, file writes, malloc, idle CPU and the largest block.

use std::path::Path;
use std::time::Instant;

use hostcall_demo::{check, mode};
use hostcall_runtime::RunReport;
use hostcall_runtime::cuda::{CudaModule, KernelLimit};
use serde_json::{Value, json};

use super::*;

/// Names of the latency stages (`hostcall_client::stages::STAGES`), as reported.
pub(super) const STAGE_NAMES: [&str; 6] = [
    "packet (activemask, match)",
    "port (lock, shfl)",
    "request (slot, fence, barrier)",
    "publish (release store)",
    "answer (host + PCIe poll)",
    "release (barrier, unlock)",
];

/// One-thread round-trip latency from a `latency:` line, with its stage breakdown.
pub(super) fn latency(r: &RunReport) -> Result<(f64, Value), String> {
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

/// The hostcall rows: latency, the sweep of null calls and println! lines, typed calls,
/// four consumers, file writes, malloc, idle CPU and the largest block.
pub(super) fn measure_calls(
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
