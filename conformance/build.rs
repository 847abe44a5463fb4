//! Builds every conformance program for the GPU (one module, `conformance/kernels`) and
//! generates the code that embeds it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    ptx_builder::PtxBuilder::new("kernels").build_into_out_dir("conformance_module.rs")?;
    Ok(())
}
