//! Builds every conformance program for the GPU (one module, `conformance/kernels`) and
//! generates the code that embeds it.
//!
//! The module tests correctness, not speed, so ptxas compiles it fast: at `-O3` this
//! 315k-line module took ptxas more than 23 minutes and 8.7 GB; fast, about 13 s and
//! 1.2 GB. The suite runs exactly the cubin built here.

use ptx_builder::{PtxBuilder, PtxasOpt};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    PtxBuilder::new("kernels")
        .ptxas_opt(PtxasOpt::FastCompile)
        .build_into_out_dir("conformance_module.rs")?;
    Ok(())
}
