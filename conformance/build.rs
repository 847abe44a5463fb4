//! Builds every conformance program for the GPU (one module, `conformance/kernels`) and
//! generates the code that embeds it.

use std::path::PathBuf;

fn main() {
    if let Err(e) = embed() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn embed() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-env-changed=PTXAS");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    ptx_builder::PtxBuilder::new(manifest.join("kernels"))
        .build_into_out_dir("conformance_module.rs")?;
    Ok(())
}
