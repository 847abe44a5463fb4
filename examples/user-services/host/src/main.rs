//! Serves the declared services to the kernel on 132 blocks of 256 threads, then shows
//! a host built against another version of `Greeter` refused when the module loads.

use std::sync::atomic::{AtomicU64, Ordering};

use hostcall_abi::errno::Errno;
use hostcall_runtime::cuda::{CudaModule, CudaOptions};
use hostcall_runtime::{Host, HostBuilder, Launch, module_image};
use user_services_decl::{Counter, Greeter};

mod module {
    include!(concat!(env!("OUT_DIR"), "/module.rs"));
}

#[derive(Default)]
struct HostCounter(AtomicU64);

impl Counter for HostCounter {
    fn bump(&self, by: u64) -> u64 {
        self.0.fetch_add(by, Ordering::Relaxed) + by
    }
    fn total(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct HostGreeter;

impl Greeter for HostGreeter {
    fn greet(&self, name: &str, out: &mut [u8]) -> Result<usize, Errno> {
        let text = format!("hello, {name}, from the host");
        let to = out.get_mut(..text.len()).ok_or(Errno(34))?; // ERANGE
        to.copy_from_slice(text.as_bytes());
        Ok(text.len())
    }
}

/// `Greeter` as an older version of the declaration had it.
mod old {
    hostcall_abi::service! {
        pub trait Greeter {
            fn greet(&self, name: &str) -> u32;
        }
    }
}

impl old::Greeter for HostGreeter {
    fn greet(&self, name: &str) -> u32 {
        name.len() as u32
    }
}

/// A host with a counter and a default handler for ids nobody serves (`Legacy`'s).
fn host() -> HostBuilder {
    Host::builder()
        .serve::<dyn Counter, _>(HostCounter::default())
        .default_handler(|call| Ok(call.id as i64 * 100))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let image = module_image!(module);
    let mut m = CudaModule::load(&image, &CudaOptions::default())?;
    let current = host().serve::<dyn Greeter, _>(HostGreeter).build()?;
    current.run(&mut m, &Launch::linear("services", 132, 256, vec![]))?;
    current.run(&mut m, &Launch::linear("services_report", 1, 1, vec![]))?;

    let outdated = host().serve::<dyn old::Greeter, _>(HostGreeter).build()?;
    match outdated.run(&mut m, &Launch::linear("services", 1, 1, vec![])) {
        Err(refused) => println!("refused at load: {refused}"),
        Ok(_) => return Err("a host with another Greeter was not refused".into()),
    }
    Ok(())
}
