//! `ptx-build`: the builder from the command line, with its progress on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ptx_builder::{Cubins, PtxBuilder, PtxModule};

/// Builds a Rust kernel crate that uses std into PTX (and cubins when ptxas is found).
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The kernel crate's folder.
    #[arg(required_unless_present = "embed_rs")]
    krate: Option<PathBuf>,
    /// Also copy the module into this folder under stable names (module.ptx, ...).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Print the Rust source embedding the module an --out-dir holds, and build nothing.
    #[arg(long, conflicts_with = "krate")]
    embed_rs: Option<PathBuf>,
    /// SM version the PTX targets.
    #[arg(long, default_value_t = ptx_builder::DEFAULT_SM)]
    sm: u32,
    /// SM versions to build cubins for (repeatable).
    #[arg(long = "cubin", default_values_t = [ptx_builder::DEFAULT_SM])]
    cubin_sms: Vec<u32>,
    /// Most threads per block any kernel is launched with (registers are capped to fit).
    #[arg(long, default_value_t = ptx_builder::DEFAULT_MAX_THREADS_PER_BLOCK)]
    max_threads_per_block: u32,
    /// Fail if no ptxas is found.
    #[arg(long, conflicts_with = "no_cubins")]
    require_cubins: bool,
    /// Emit PTX only.
    #[arg(long)]
    no_cubins: bool,
    /// The nested build's target dir (default: the crate's own `target/`).
    #[arg(long)]
    target_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> ptx_builder::Result<()> {
    if let Some(dir) = &a.embed_rs {
        print!("{}", PtxModule::load_dir(dir)?.embed_rs());
        return Ok(());
    }
    let cubins = match (a.require_cubins, a.no_cubins) {
        (true, _) => Cubins::Required,
        (_, true) => Cubins::Off,
        _ => Cubins::IfPtxasFound,
    };
    let krate = a
        .krate
        .as_deref()
        .expect("clap requires KRATE without --embed-rs");
    let mut b = PtxBuilder::new(krate)
        .sm(a.sm)
        .cubin_sms(&a.cubin_sms)
        .max_threads_per_block(a.max_threads_per_block)
        .cubins(cubins);
    if let Some(dir) = &a.target_dir {
        b = b.target_dir(dir);
    }
    let mut m = b.build()?;
    if let Some(dir) = &a.out_dir {
        m = m.copy_to(dir)?;
    }
    println!("ptx     {}", m.ptx.display());
    for (sm, c) in &m.cubins {
        println!("sm_{sm}   {}", c.display());
    }
    println!("sha256  {}", m.sha256);
    println!("kernels {}", m.kernels.join(" "));
    Ok(())
}
