//! The example kernel: declared services by number, by name and through the default
//! handler, called from every GPU thread.

#![feature(abi_ptx)]

use hostcall_client::nvptx::Nvptx;
use hostcall_client::typed::Client;
use libc_hostcall::gpu;
use user_services_decl::{Counter, Greeter, Legacy};

/// Every thread bumps the counter; a few greet and call the legacy service.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn services() {
    let me = gpu::global_thread();
    let counter = Client::<Nvptx, dyn Counter>::gpu();
    counter.bump(me + 1);
    if me % 1000 == 0 {
        let greeter = Client::<Nvptx, dyn Greeter>::gpu();
        let mut buf = [0u8; 64];
        let name = format!("thread {me}");
        match greeter.greet(&name, &mut buf) {
            Ok(n) => println!("{}", String::from_utf8_lossy(&buf[..n])),
            Err(e) => println!("greet failed: {e:?}"),
        }
        let legacy = Client::<Nvptx, dyn Legacy>::gpu().legacy(7);
        println!("thread {me}: legacy(7) = {legacy:?}");
    }
}

/// Prints the counter's total.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn services_report() {
    let total = Client::<Nvptx, dyn Counter>::gpu().total();
    println!("counter total: {total}");
}
