//! Builds every conformance program for the GPU and generates the code that embeds it:
//! the kernel module (`conformance/kernels`), the registry programs' module
//! (`conformance/registry`, named to the crate by `CONFORMANCE_REGISTRY`) and the
//! spawning programs' binary (`conformance/spawning`, by `CONFORMANCE_SPAWNING`), named
//! as Buck2 names them.
//!
//! The modules test correctness, not speed, so ptxas compiles them fast: at `-O3` the
//! 315k-line kernel module took ptxas more than 23 minutes and 8.7 GB; fast, about 13 s
//! and 1.2 GB. The suite runs exactly the cubins built here.

use ptx_builder::{PtxBuilder, PtxasOpt};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    PtxBuilder::new("kernels")
        .ptxas_opt(PtxasOpt::FastCompile)
        .build_into_out_dir("conformance_module.rs")?;
    PtxBuilder::new("registry")
        .ptxas_opt(PtxasOpt::FastCompile)
        .build_into_out_dir("conformance_registry.rs")?;
    PtxBuilder::new("spawning")
        .binary(None)
        .ptxas_opt(PtxasOpt::FastCompile)
        .build_into_out_dir("conformance_spawning.rs")?;
    let out = std::env::var("OUT_DIR")?;
    println!("cargo:rustc-env=CONFORMANCE_SPAWNING={out}/conformance_spawning.rs");
    println!("cargo:rustc-env=CONFORMANCE_REGISTRY={out}/conformance_registry.rs");
    Ok(())
}
