//! The consumer rows: null calls by the number of host consumer threads, and the idle
//! host CPU they use.

use std::path::Path;
use std::time::Instant;

use hostcall_demo::{check, mode};
use hostcall_runtime::cuda::CudaModule;
use serde_json::Value;

use super::*;

/// Consumer thread counts of the consumer rows, measured round-robin `CONSUMER_ROUNDS`
/// times.
pub(super) const CONSUMER_COUNTS: [usize; 6] = [1, 2, 3, 4, 6, 8];

pub(super) const CONSUMER_ROUNDS: usize = 3;

/// Null calls at 132 x 256 and 1056 x 256 by the number of consumer threads (medians of
/// `CONSUMER_ROUNDS`, round-robin), beside one consumer; and the host CPU the default
/// number uses while the GPU computes without calling.
pub(super) fn consumer_rows(
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
