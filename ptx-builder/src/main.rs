//! `ptx-build`: the builder from the command line, with its progress on stderr.

use std::process::ExitCode;

use clap::Parser;
use ptx_builder::{Cubins, PtxBuilder};

/// Builds a Rust kernel crate that uses std into PTX (and cubins when ptxas is found).
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The kernel crate's folder.
    krate: std::path::PathBuf,
    /// SM version the PTX targets.
    #[arg(long, default_value_t = ptx_builder::DEFAULT_SM)]
    sm: u32,
    /// SM versions to build cubins for (repeatable).
    #[arg(long = "cubin", default_values_t = [ptx_builder::DEFAULT_SM])]
    cubin_sms: Vec<u32>,
    /// Fail if no ptxas is found.
    #[arg(long, conflicts_with = "no_cubins")]
    require_cubins: bool,
    /// Emit PTX only.
    #[arg(long)]
    no_cubins: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let cubins = match (a.require_cubins, a.no_cubins) {
        (true, _) => Cubins::Required,
        (_, true) => Cubins::Off,
        _ => Cubins::IfPtxasFound,
    };
    match PtxBuilder::new(&a.krate)
        .sm(a.sm)
        .cubin_sms(&a.cubin_sms)
        .cubins(cubins)
        .build()
    {
        Ok(m) => {
            println!("ptx     {}", m.ptx.display());
            for (sm, c) in &m.cubins {
                println!("sm_{sm}   {}", c.display());
            }
            println!("sha256  {}", m.sha256);
            println!("kernels {}", m.kernels.join(" "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
