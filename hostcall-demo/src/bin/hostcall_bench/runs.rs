//! One launch of the benchmark kernel in a mode, checked, as every part runs it.

use std::path::Path;
use std::time::Duration;

use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::{Host, KernelArg, Launch, Outcome, RunReport};

/// Runs `mode` as `blocks` x `threads` and insists it completed.
pub(super) fn run(
    module: &mut CudaModule,
    dir: &Path,
    kernel_mode: u32,
    blocks: u32,
    threads: u32,
) -> Result<RunReport, String> {
    run_with(module, dir, kernel_mode, blocks, threads, 1)
}

/// `run` with `consumers` host threads serving the ports.
pub(super) fn run_with(
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
pub(super) fn run_typed(
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
