//! `add42`: AMDGPU.jl's `HostCallHolder` example. The host closure `|x: f32| x + 42.0`
//! is passed to culinux's `add42` kernel as a handle; every GPU thread calls it with its
//! own value and checks the answer. Exits 0 only if every call came back right.

use std::process::ExitCode;

use clap::Parser;
use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::{Host, KernelArg, Launch, Outcome};

/// Calls a typed host closure from every thread of a GPU launch.
#[derive(Parser)]
#[command(name = "add42", version)]
struct Args {
    /// Blocks to launch.
    #[arg(long, default_value_t = 132)]
    blocks: u32,
    /// Threads per block.
    #[arg(long, default_value_t = 256)]
    threads: u32,
}

fn main() -> ExitCode {
    hostcall_demo::example_main("add42", culinux_ptx::image(), run)
}

fn run(a: &Args, module: &mut CudaModule) -> Result<bool, Box<dyn std::error::Error>> {
    let mut host = Host::builder().capture_output(true).build()?;
    let add42 = host.hostcall(|x: f32| x + 42.0);
    let launch = Launch::linear(
        "add42",
        a.blocks,
        a.threads,
        vec![KernelArg::U64(add42.raw())],
    );
    let r = host.run(module, &launch)?;
    let report = host.run(module, &Launch::linear("add42_report", 1, 1, vec![]))?;
    let threads = a.blocks as u64 * a.threads as u64;
    let expected = format!("add42: {threads} calls, 0 wrong\n");
    let ok = r.outcome == Outcome::Completed
        && report.outcome == Outcome::Completed
        && report.stdout == expected.as_bytes();
    println!(
        "add42: {} x {} GPU threads called the host closure |x: f32| x + 42.0 in {:.2?}: {}",
        a.blocks,
        a.threads,
        r.elapsed,
        if ok { "every result right" } else { "FAILED" }
    );
    Ok(ok)
}
