//! `heatmap`: dh_comms's memory heat map on the GPU. culinux's `stencil` kernel takes one
//! step of a 5-point stencil over a 128 x 128 grid, one GPU thread per cell, and streams
//! the offset of every cell it reads or writes through a tagged stream. Host callbacks
//! count the tags and build a heat map of the reads and one of the writes, written as
//! PPM images. Exits 0 only if every cell was touched exactly as often as the stencil
//! says: a cell inside read five times, an edge four, a corner three, each written once.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hostcall_runtime::cuda::CudaModule;
use hostcall_runtime::stream::{Callbacks, HeatMap, StreamSpec, TagCounter};
use hostcall_runtime::{Host, KernelArg, Launch, Outcome};

/// The grid's side and the kernel's stream tags (culinux's `GRID`, `TAG_LOAD`, `TAG_STORE`).
const GRID: usize = 128;
const TAG_LOAD: u32 = 1;
const TAG_STORE: u32 = 2;
/// Pixels per cell side in the images.
const SCALE: usize = 4;

/// Runs an instrumented stencil on the GPU and draws the memory it touched.
#[derive(Parser)]
#[command(name = "heatmap", version)]
struct Args {
    /// Folder for `heatmap-loads.ppm` and `heatmap-stores.ppm`.
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

fn main() -> ExitCode {
    hostcall_demo::example_main("heatmap", culinux_ptx::image(), run)
}

fn run(a: &Args, module: &mut CudaModule) -> Result<bool, Box<dyn std::error::Error>> {
    let mut host = Host::builder()
        .capture_output(true)
        .echo_output(false)
        .build()?;
    let bytes = (GRID * GRID * 4) as u64;
    let loads = HeatMap::new(0, 0, bytes, GRID * GRID, GRID);
    let stores = HeatMap::new(0, 0, bytes, GRID * GRID, GRID);
    let tags = TagCounter::new();
    let callbacks = Callbacks::new()
        .on(TAG_LOAD, loads.callback())
        .on(TAG_STORE, stores.callback())
        .on_every(tags.callback());
    let stream = host.stream(StreamSpec::default(), callbacks);
    let threads = 256;
    let blocks = (GRID * GRID).div_ceil(threads) as u32;
    let launch = Launch::linear(
        "stencil",
        blocks,
        threads as u32,
        vec![KernelArg::Stream(stream)],
    );
    let r = host.run(module, &launch)?;
    print!("{}", String::from_utf8_lossy(&r.stdout));
    if r.outcome != Outcome::Completed {
        return Err(format!("the stencil ended with {:?}", r.outcome).into());
    }
    for (name, map) in [("loads", &loads), ("stores", &stores)] {
        let path = a.out.join(format!("heatmap-{name}.ppm"));
        std::fs::write(&path, map.ppm(SCALE))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("heatmap: wrote {}", path.display());
    }
    let counts = tags.counts();
    let report = &r.streams[0];
    println!(
        "heatmap: {} loads and {} stores streamed by {} GPU threads in {:.2} ms; {} messages taken, {} dropped",
        counts.get(&TAG_LOAD).unwrap_or(&0),
        counts.get(&TAG_STORE).unwrap_or(&0),
        GRID * GRID,
        r.elapsed.as_secs_f64() * 1e3,
        report.messages,
        report.dropped
    );
    let wrong = cells_off(&loads.counts(), |y, x| {
        1 + u64::from(y > 0) + u64::from(y + 1 < GRID) + u64::from(x > 0) + u64::from(x + 1 < GRID)
    }) + cells_off(&stores.counts(), |_, _| 1);
    let ok = wrong == 0 && report.dropped == 0 && report.broken.is_empty();
    println!(
        "heatmap: {}",
        if ok {
            "every cell read and written as often as the stencil says".to_string()
        } else {
            format!("FAILED: {wrong} cells counted wrong")
        }
    );
    Ok(ok)
}

/// How many cells of `counts` (row by row) differ from `expected(row, column)`.
fn cells_off(counts: &[u64], expected: impl Fn(usize, usize) -> u64) -> usize {
    counts
        .iter()
        .enumerate()
        .filter(|&(i, &c)| c != expected(i / GRID, i % GRID))
        .count()
}
