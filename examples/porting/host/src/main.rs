//! Runs the kernel on 132 blocks of 256 threads, granting it `data/` and one variable.

use hostcall_runtime::cuda::{CudaModule, CudaOptions};
use hostcall_runtime::{Host, KernelArg, Launch, module_image};

mod module {
    include!(concat!(env!("OUT_DIR"), "/module.rs"));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let image = module_image!(module);
    let mut m = CudaModule::load(&image, &CudaOptions::default())?;
    std::fs::create_dir_all("data")?;
    let host = Host::builder()
        .preopen_dir("data", "/data")
        .env("MODE", "fast")
        .build()?;
    let report = host.run(
        &mut m,
        &Launch::linear("kmain", 132, 256, vec![KernelArg::U32(8)]),
    )?;
    if let Some(why) = report.outcome.failure() {
        eprintln!("{why}");
    }
    std::process::exit(report.outcome.exit_code());
}
