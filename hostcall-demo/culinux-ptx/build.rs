//! Builds culinux for the GPU and generates the code that embeds its PTX, cubins and
//! SHA-256 (Buck2 runs the same stages as actions: //hostcall-demo:culinux_ptx).

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    if let Err(e) = ptx_builder::PtxBuilder::new(manifest.join("../../culinux"))
        .build_into_out_dir("culinux_module.rs")
    {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
