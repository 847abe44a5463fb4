//! `lifetimes`: AMDGPU.jl's hostcall lifetimes on the GPU. culinux's `lifetimes` kernel
//! calls a one-shot closure twice (the second call gets `EPIPE`), then every thread calls
//! a continuous closure until the host finishes it from another thread, mid-launch. Then
//! `lifetimes_strict` calls a closure that cannot fail past its two calls, which ends that
//! launch naming the thread and the closure. Exits 0 only if all three behaved so.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use hostcall_abi::typed::Errno;
use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::{Host, KernelArg, Launch, Lifetime, Outcome};

/// Serves host closures for a limited number of calls to a GPU launch.
#[derive(Parser)]
#[command(name = "lifetimes", version)]
struct Args {
    /// Blocks to launch.
    #[arg(long, default_value_t = 132)]
    blocks: u32,
    /// Threads per block.
    #[arg(long, default_value_t = 256)]
    threads: u32,
    /// Calls of the continuous closure after which the host finishes it.
    #[arg(long, default_value_t = 1_000_000)]
    finish_after: u64,
}

fn main() -> ExitCode {
    hostcall_demo::example_main("lifetimes", culinux_ptx::image(), run)
}

fn run(a: &Args, module: &mut CudaModule) -> Result<bool, Box<dyn std::error::Error>> {
    // Captured, not echoed as well: the kernel's lines are checked, then printed once.
    let mut host = Host::builder()
        .capture_output(true)
        .echo_output(false)
        .build()?;
    let echo = |x: u64| -> Result<u64, Errno> { Ok(x) };
    let (once, _) = host.hostcall_for(Lifetime::Once, echo);
    let (tick, serving) = host.hostcall_for(Lifetime::Continuous, echo);
    let (add, _) = host.hostcall_for(Lifetime::Times(2), |x: u64| x + 1);

    // finish() from another thread while every GPU thread is still calling `tick`.
    let watcher = {
        let (serving, after) = (serving.clone(), a.finish_after);
        std::thread::spawn(move || {
            let started = Instant::now();
            while serving.served() < after && started.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_micros(100));
            }
            // Calls under way as it is called still complete.
            let answered = serving.served();
            serving.finish();
            answered
        })
    };
    let args = vec![KernelArg::U64(once.raw()), KernelArg::U64(tick.raw())];
    let r = host.run(
        module,
        &Launch::linear("lifetimes", a.blocks, a.threads, args),
    )?;
    let at_finish = watcher.join().map_err(|_| "the watcher panicked")?;
    let out = String::from_utf8_lossy(&r.stdout);
    print!("{out}");
    let threads = a.blocks as u64 * a.threads as u64;
    let report = format!(
        "lifetimes: {} calls answered, then {threads} threads refused with EPIPE, 0 wrong",
        serving.served()
    );
    let first = out.contains("lifetimes: the one-shot closure answered Ok(7), then Err(EPIPE)");
    let continuous = r.outcome == Outcome::Completed && out.contains(&report);
    println!(
        "lifetimes: finish() called when {threads} threads' continuous closure had answered {at_finish} calls; {} answered in all",
        serving.served()
    );

    let strict = host.run(
        module,
        &Launch::linear("lifetimes_strict", 1, 1, vec![KernelArg::U64(add.raw())]),
    )?;
    let why = strict.outcome.failure().unwrap_or_default();
    println!("lifetimes_strict: {why}");
    let ended = why.contains("which cannot return an error, and it failed with EPIPE")
        && !strict.stdout.starts_with(b"lifetimes_strict");
    let ok = first && continuous && ended;
    println!(
        "lifetimes: {}",
        if ok {
            "the one-shot, continuous and strict closures behaved as their lifetimes say"
        } else {
            "FAILED"
        }
    );
    Ok(ok)
}
