//! A GPU module as a build embeds it ([`ModuleImage`], `module_image!`), how it was
//! loaded, and the service slots its PTX defines.

/// A GPU module image as a build embeds it.
#[derive(Clone, Copy, Debug)]
pub struct ModuleImage<'a> {
    /// The PTX, for any architecture the JIT can target.
    pub ptx: &'a str,
    /// Cubins by SM version (e.g. 90 for sm_90).
    pub cubins: &'a [(u32, &'a [u8])],
    /// SHA-256 of the module, for reports.
    pub sha256: &'a str,
    /// The stack each GPU thread needs, as the build computed it from ptxas's frames and
    /// the call graph (`STACK_BYTES` of the embedded module); None if unknown.
    pub stack_bytes: Option<usize>,
}

/// The [`ModuleImage`] of a module a build embedded: `$m` is the module that includes the
/// Rust source `ptx_builder::PtxModule::embed_rs` wrote (its `PTX`, `CUBINS`, `SHA256`
/// and `STACK_BYTES`), so that an embedder names the module once, whatever the image
/// carries.
#[macro_export]
macro_rules! module_image {
    ($m:ident) => {
        $crate::cuda::ModuleImage {
            ptx: $m::PTX,
            cubins: $m::CUBINS,
            sha256: $m::SHA256,
            stack_bytes: $m::STACK_BYTES,
        }
    };
}

/// How the module was loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadedFrom {
    /// A prebuilt cubin for this SM version.
    Cubin(u32),
    /// The driver compiled the PTX.
    PtxJit,
}

/// The symbols of the service slots `ptx` defines (ptx-builder keeps exactly those of the
/// services its kernels call), e.g. from
/// `.visible .global .align 8 .b8 __HOSTCALL__Kv__get[61] = {...};`.
pub(super) fn slot_symbols(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter(|l| l.starts_with(".visible .global") || l.starts_with(".global"))
        .filter_map(|l| {
            let at = l.find(hostcall_abi::typed::SLOT_PREFIX)?;
            let name = &l[at..];
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(name.len());
            Some(name[..end].to_owned())
        })
        .collect()
}
