//! The math rows: float functions evaluated by every thread of a 128 x 128 launch of
//! culinux's `kmath`, each beside CUDA's own function timed the same way in
//! `bench/limits.cu`.

use std::time::Duration;

use hostcall_demo::mode;
use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::{Host, KernelArg, Launch, Outcome};
use serde_json::Value;

use super::*;

/// Each of `mode::MATH_FUNCTIONS`: evaluations per second over 128 x 128 threads,
/// `mode::MATH_EVALS` each (the best of three launches: a launch's own set-up is in its
/// time), beside `cuda_NAME_evals_per_s`.
pub(super) fn math_rows(
    module: &mut CudaModule,
    limit: &dyn Fn(&str) -> Option<f64>,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for (k, name) in (0u32..).zip(mode::MATH_FUNCTIONS) {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let host = Host::builder().timeout(Duration::from_secs(60)).build()?;
            let r = host.run(
                module,
                &Launch::linear("kmath", 128, 128, vec![KernelArg::U32(k)]),
            )?;
            if r.outcome != Outcome::Completed {
                return Err(format!("kmath {name} ended with {:?}", r.outcome).into());
            }
            best = best.min(r.elapsed.as_secs_f64());
        }
        let reference = format!("cuda_{name}_evals_per_s");
        rows.push(result(
            &format!("{name}_evals_per_s_128x128"),
            128.0 * 128.0 * f64::from(mode::MATH_EVALS) / best,
            "evals/s",
            limit(&reference).map(|l| (reference.as_str(), l)),
            "std's float method on every GPU thread (Rust's libm, linked by ptx-builder), \
             arguments 0.5 + k * 1e-7; the launch's set-up included",
        ));
    }
    Ok(rows)
}
