//! The programs' rows: std programs on the GPU beside the same programs on the CPU, and
//! the floor under a GPU program's start-up: CUDA's own start and end.

use std::path::Path;

use hostcall_demo::programs::STARTUP_RUNS;
use serde_json::{Value, json};

use super::*;

/// The programs' rows: each figure on the GPU, compared with the CPU's; then CUDA's
/// start and end alone, in processes of their own (`--cuda-start`).
pub(super) fn program_rows(dir: &Path) -> Result<Vec<Value>, String> {
    let figures = hostcall_demo::programs::measure(dir)?;
    let mut rows: Vec<Value> = figures
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
        .collect();
    rows.extend(cuda_start_rows()?);
    Ok(rows)
}

/// `hostcall_bench --cuda-start`: starts CUDA, creates the context and releases it,
/// printing the time of each step as JSON.
pub(super) fn cuda_start() -> Result<(), String> {
    let s = hostcall_runtime::cuda::start_alone().map_err(|e| e.to_string())?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "{}",
        json!({ "init_ms": ms(s.init), "context_ms": ms(s.context), "release_ms": ms(s.release) })
    );
    Ok(())
}

/// The floor: a process that starts CUDA and ends, timed from outside (median of
/// [`STARTUP_RUNS`], as the programs), with `cuInit` alone from the median run.
fn cuda_start_rows() -> Result<Vec<Value>, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for _ in 0..STARTUP_RUNS {
        let t = Instant::now();
        let out = std::process::Command::new(&me)
            .arg("--cuda-start")
            .output()
            .map_err(|e| e.to_string())?;
        let wall = t.elapsed().as_secs_f64() * 1e3;
        let steps: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("--cuda-start printed no JSON ({e}): {out:?}"))?;
        runs.push((wall, steps));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (wall, steps) = &runs[runs.len() / 2];
    let step = |k: &str| steps[k].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "hostcall_bench: CUDA's start and end alone: {wall:.1} ms (cuInit {:.1} ms)",
        step("init_ms")
    );
    Ok(vec![
        result(
            "cuda_start_floor_ms",
            *wall,
            "ms",
            None,
            &format!(
                "wall time of a process that only starts CUDA (cuInit, device 0's primary \
                 context) and releases it, median of {STARTUP_RUNS}: the floor under \
                 startup_hi_ms; \
                 context {:.1} ms, release {:.1} ms",
                step("context_ms"),
                step("release_ms")
            ),
        ),
        result(
            "cu_init_ms",
            step("init_ms"),
            "ms",
            None,
            "cuInit alone, in the median run of cuda_start_floor_ms",
        ),
    ])
}
