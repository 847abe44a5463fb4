//! The culinux module, embedded: the crate is apart from hostcall-demo's library so that
//! an edit of the kernel rebuilds this crate and the binaries, and no other host crate.
//! `OUT_DIR` holds the module and its embedding source: from build.rs under Cargo, from
//! `//hostcall-demo:culinux_ptx[embed]` under Buck2.

use hostcall_runtime::cuda::ModuleImage;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/culinux_module.rs"));
}

/// The culinux module as the CUDA backend loads it.
pub fn image() -> ModuleImage<'static> {
    hostcall_runtime::module_image!(embedded)
}
