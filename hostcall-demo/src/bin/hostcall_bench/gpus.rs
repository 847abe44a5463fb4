//! The several-GPU rows: null calls on one GPU, then on every GPU at once.

use std::time::Duration;

use hostcall_demo::{check, mode};
use hostcall_runtime::cuda::{CudaModule, CudaOptions, ModuleImage};
use hostcall_runtime::{Host, KernelArg, Launch, Outcome};
use serde_json::{Value, json};

use super::*;

/// Rounds of one GPU alone, then every GPU at once, in the several-GPU rows.
pub(super) const GPU_ROUNDS: usize = 3;

/// Null calls at 1056 x 256 on one GPU, then on every GPU of the machine at once (one
/// `Host::run_all`), `GPU_ROUNDS` times in turn: the medians, each GPU's calls over
/// the longest GPU's span. No rows on a machine with one GPU.
pub(super) fn gpu_rows(first: CudaModule, image: &ModuleImage<'_>) -> Result<Vec<Value>, String> {
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
