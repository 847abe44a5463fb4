//! Builds the kernel crate for the GPU (PTX, cubins, SHA-256) and embeds it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    ptx_builder::PtxBuilder::new("../kernel").build_into_out_dir("module.rs")?;
    Ok(())
}
