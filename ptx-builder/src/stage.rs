//! The pipeline one stage at a time, each reading and writing only the paths it is
//! given: for build systems that cache every stage as its own action (Buck2 runs them
//! through the `ptx-build` CLI's subcommands). [`crate::PtxBuilder::build`] runs the same
//! functions in sequence.

use std::path::{Path, PathBuf};

use crate::tools::Toolchain;
use crate::{BuildError, PtxModule, PtxasOpt, Result, cargo, cubin, fixups, link, stack};

fn io(what: &str, p: &Path) -> impl FnOnce(std::io::Error) -> BuildError {
    BuildError::io(format!("{what} {}", p.display()))
}

/// Compiles the kernel crate at `krate` and std (the patched copy in the machine's cache)
/// for the GPU, in `target_dir` (default: the cache's, shared by every build), and
/// copies the resulting archive of bitcode to `staticlib`.
pub fn bitcode(krate: &Path, target_dir: Option<&Path>, staticlib: &Path) -> Result<()> {
    let tc = Toolchain::detect()?;
    let target_dir =
        target_dir.map_or_else(|| crate::cache::root().join("target"), Path::to_path_buf);
    std::fs::create_dir_all(&target_dir).map_err(io("creating", &target_dir))?;
    let canonical = |p: &Path| p.canonicalize().map_err(io("resolving", p));
    let (krate, target_dir) = (canonical(krate)?, canonical(&target_dir)?);
    let library = fixups::patched_library(&tc)?;
    let out = target_dir.join("ptx-builder");
    std::fs::create_dir_all(&out).map_err(io("creating", &out))?;
    let nested = cargo::Nested {
        tc: &tc,
        args: &crate::CargoArgs::default(),
        library: &library,
        target_dir: &target_dir,
        out: &out,
        progress: crate::Progress::Stages,
    };
    let built = cargo::build(&nested, &krate)?;
    std::fs::copy(&built.inputs[0], staticlib).map_err(io("writing", staticlib))?;
    Ok(())
}

/// Links the archive's bitcode members into one module, `linked`.
pub fn link(staticlib: &Path, linked: &Path) -> Result<()> {
    let members = scratch(linked, "members");
    let result = link::link(
        &Toolchain::detect()?,
        &[staticlib.to_path_buf()],
        &members,
        linked,
    );
    let _ = std::fs::remove_dir_all(&members);
    result
}

/// The kernels `linked` exports (`kernels`, or else every `extern "ptx-kernel"` function),
/// with everything else internalized, optimized into `optimized`. Returns the kernels.
pub fn optimize(
    linked: &Path,
    kernels: Option<&[String]>,
    optimized: &Path,
) -> Result<Vec<String>> {
    link::optimize_kernels(&Toolchain::detect()?, linked, kernels, &[], optimized)
}

/// Lowers `optimized` to PTX at `ptx`, for `sm` and PTX ISA `ptx_version`, every kernel
/// bounded to `max_threads` threads per block.
pub fn emit_ptx(
    optimized: &Path,
    sm: u32,
    ptx_version: u32,
    max_threads: u32,
    ptx: &Path,
) -> Result<()> {
    link::emit_ptx(
        &Toolchain::detect()?,
        optimized,
        sm,
        ptx_version,
        max_threads,
        ptx,
    )
}

/// Fails with [`BuildError::Unresolved`] if `ptx` calls a function it does not define,
/// naming the crates of `staticlib` that reference each one. Returns the PTX's text.
pub fn check(ptx: &Path, staticlib: &Path) -> Result<String> {
    let text = std::fs::read_to_string(ptx).map_err(io("reading", ptx))?;
    let missing = link::unresolved_in_ptx(&text);
    if missing.is_empty() {
        return Ok(text);
    }
    let tc = Toolchain::detect()?;
    let members = scratch(ptx, "members");
    std::fs::create_dir_all(&members).map_err(io("creating", &members))?;
    let attributed =
        link::extract(&tc, staticlib, &members).map(|()| link::attribute(&tc, &members, &missing));
    let _ = std::fs::remove_dir_all(&members);
    Err(BuildError::Unresolved(attributed?))
}

/// Compiles `ptx` into `cubin` for `sm` at `opt` with the ptxas and nvJitLink
/// [`crate::PtxBuilder`] would find (`$PTXAS`/`$NVJITLINK`, the CUDA toolkit, the PyPI
/// wheels), or takes it from the machine's cache, with each function's stack frame in
/// `frames`; a missing tool is [`BuildError::NoPtxas`] or [`BuildError::NoNvJitLink`].
pub fn cubin(ptx: &Path, sm: u32, opt: PtxasOpt, cubin: &Path, frames: &Path) -> Result<()> {
    let tools = cubin::Tools::find()?;
    let made = cubin::make(&tools, ptx, sm, opt, cubin, frames, crate::Progress::Quiet)?;
    eprintln!(
        "ptx-build: {}",
        crate::made_message(&made, sm, opt, tools.ptxas())
    );
    Ok(())
}

/// The module of `ptx`, `cubins` and `kernels` under stable names in `dir`, with its
/// SHA-256 and the stack its threads need, from the cubins' `frames` ([`PtxModule::copy_to`]
/// names the files).
pub fn module(
    ptx: &Path,
    cubins: &[(u32, PathBuf)],
    frames: &[PathBuf],
    kernels: &[String],
    dir: &Path,
) -> Result<PtxModule> {
    let text = std::fs::read_to_string(ptx).map_err(io("reading", ptx))?;
    let stack = stack::module_stack(&text, frames)?;
    if let Some(s) = &stack {
        eprintln!("ptx-build: {}", s.describe());
    }
    PtxModule {
        ptx: ptx.to_path_buf(),
        cubins: cubins.to_vec(),
        sha256: crate::module_sha256(text.as_bytes(), cubins)?,
        kernels: kernels.to_vec(),
        stack_bytes: stack.as_ref().map(stack::EntryStack::bytes),
        sources: Vec::new(),
        cargo_message: None,
    }
    .copy_to(dir)
}

/// Copies the module in `module_dir` into `out_dir` with `out_dir/file`, the Rust source
/// that embeds it ([`PtxModule::embed_rs`]) by names relative to itself: a crate whose
/// `OUT_DIR` is `out_dir` includes it wherever `out_dir` lies.
pub fn embed(module_dir: &Path, out_dir: &Path, file: &str) -> Result<()> {
    let m = PtxModule::load_dir(module_dir)?.copy_to(out_dir)?;
    let name = |p: &Path| PathBuf::from(p.file_name().unwrap_or(p.as_os_str()));
    let relative = PtxModule {
        ptx: name(&m.ptx),
        cubins: m.cubins.iter().map(|(sm, c)| (*sm, name(c))).collect(),
        ..m
    };
    let rs = out_dir.join(file);
    std::fs::write(&rs, relative.embed_rs()).map_err(io("writing", &rs))
}

/// A scratch folder beside `output`, for files no later stage reads.
fn scratch(output: &Path, what: &str) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{what}"));
    output.with_file_name(name)
}
