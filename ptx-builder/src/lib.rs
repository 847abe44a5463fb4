//! Builds a Rust crate written against the real std into a GPU module (PTX, cubins and
//! a SHA-256), as a library for `build.rs` — the way rust-gpu's spirv-builder does for
//! SPIR-V.
//!
//! Pipeline: patched rust-src copy → nested `cargo build -Zbuild-std` of the kernel crate
//! as a `staticlib` for `target_specs/nvptx64-linux-gnu.json` → the archive's bitcode
//! members → `llvm-link` → float math intrinsics made C calls (`math`) → `opt` (internalize all but kernels and host-visible globals,
//! dead-code elimination, `default<O2>`) → for a binary, unwinding lowered to returns
//! (`unwind`), locals moved to global-memory frames (`frames`) and atomics given GPU
//! scope (`scope`) → `llc` for `sm_XX` → a check that no function
//! is left undefined → `ptxas` for each requested cubin when a ptxas is found, at the
//! module's [`PtxasOpt`].
//!
//! The patched rust-src, the nested build's target dir and the cubins live in the
//! machine's [`cache`], shared by every checkout, profile and build system: std for the
//! GPU is compiled once, and no PTX is compiled twice.
//!
//! ```no_run
//! // build.rs
//! let module = ptx_builder::PtxBuilder::new("../my-kernels").build().unwrap();
//! module.emit_rerun_if_changed();
//! println!("cargo:rustc-env=KERNEL_PTX={}", module.ptx.display());
//! ```

pub mod cache;
mod cargo;
mod cubin;
mod error;
mod fixups;
mod frames;
mod ir;
mod libc_crate;
mod link;
mod lock;
mod math;
mod nvjitlink;
mod profile;
mod progress;
mod ptxas;
mod scope;
mod selection;
mod split;
pub mod stack;
pub mod stage;
mod tools;
mod unwind;

use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};

pub use cubin::{Made, PtxasOpt};
pub use error::{BuildError, Result, Unresolved};
pub use link::{bound_threads_per_block, unresolved_in_ptx};
pub use progress::Progress;
pub use selection::{CargoArgs, Program, TestTarget};
pub use tools::PINNED_TOOLCHAIN;

/// The SM version built for unless set (Hopper: H100, H200).
pub const DEFAULT_SM: u32 = 90;
/// The PTX ISA version unless set (the lowest that supports sm_90).
pub const DEFAULT_PTX_VERSION: u32 = 80;
/// Threads per block every kernel can be launched with unless set: the hardware's
/// maximum. Registers are capped to fit (64 per thread on sm_90), which std code pays for
/// in spills; a smaller bound leaves ptxas more registers.
pub const DEFAULT_MAX_THREADS_PER_BLOCK: u32 = 1024;

/// Whether cubins are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cubins {
    /// When a ptxas is found; otherwise the module carries PTX only (JIT at load).
    IfPtxasFound,
    /// Always; no ptxas is an error.
    Required,
    /// Never.
    Off,
}

/// Builds one kernel crate. Required input in [`PtxBuilder::new`], options by setters.
#[derive(Clone, Debug)]
#[must_use]
pub struct PtxBuilder {
    krate: PathBuf,
    sm: u32,
    ptx_version: u32,
    cubin_sms: Vec<u32>,
    cubins: Cubins,
    ptxas_opt: PtxasOpt,
    kernels: Option<Vec<String>>,
    max_threads_per_block: u32,
    target_dir: Option<PathBuf>,
    progress: Progress,
    binary: Option<Program>,
    args: CargoArgs,
}

/// What a build produced.
#[derive(Clone, Debug)]
pub struct PtxModule {
    /// The PTX file.
    pub ptx: PathBuf,
    /// Cubin files by SM version.
    pub cubins: Vec<(u32, PathBuf)>,
    /// SHA-256 (hex) over the PTX and cubins.
    pub sha256: String,
    /// The kernels the module exports.
    pub kernels: Vec<String>,
    /// The stack each GPU thread needs ([`stack::module_stack`]), when cubins were built.
    pub stack_bytes: Option<u64>,
    /// Source files the build read, for `cargo:rerun-if-changed`.
    pub sources: Vec<PathBuf>,
    /// Cargo's `compiler-artifact` message for a program's target, from its nested
    /// build (its package, target, profile and features), from which a tool reports
    /// the GPU build's own artifact; `None` for a kernel library's module.
    pub cargo_message: Option<serde_json::Value>,
}

impl PtxModule {
    /// Prints `cargo:rerun-if-changed` for every source of the module.
    pub fn emit_rerun_if_changed(&self) {
        for s in &self.sources {
            println!("cargo:rerun-if-changed={}", s.display());
        }
    }

    /// Rust source that embeds this module (`PTX`, `CUBINS`, `SHA256`, `STACK_BYTES`),
    /// for a host crate to `include!` (build.rs under Cargo, a genrule under Buck2) and
    /// load as `hostcall_runtime::module_image!(that_module)`.
    pub fn embed_rs(&self) -> String {
        let mut code = String::from("/// The module's PTX.\n");
        code += &format!("pub const PTX: &str = include_str!({:?});\n", self.ptx);
        code += "/// Cubins by SM version.\npub const CUBINS: &[(u32, &[u8])] = &[\n";
        for (sm, path) in &self.cubins {
            code += &format!("    ({sm}, include_bytes!({path:?})),\n");
        }
        code += "];\n/// SHA-256 of the module.\n";
        code += &format!("pub const SHA256: &str = {:?};\n", self.sha256);
        code += "/// The stack each GPU thread needs, from ptxas's frames and the call graph.\n";
        code += &format!(
            "pub const STACK_BYTES: Option<usize> = {:?};\n",
            self.stack_bytes
        );
        code
    }

    /// Copies the module into `dir` under stable names (`module.ptx`,
    /// `module.sm_NN.cubin`, `module.sha256`, `module.kernels`, and `module.stack` when
    /// known) and returns it there.
    pub fn copy_to(&self, dir: &Path) -> Result<PtxModule> {
        let io = |what: &Path| BuildError::io(format!("writing {}", what.display()));
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let ptx = dir.join("module.ptx");
        std::fs::copy(&self.ptx, &ptx).map_err(io(&ptx))?;
        let mut cubins = Vec::new();
        for (sm, c) in &self.cubins {
            let to = dir.join(format!("module.sm_{sm}.cubin"));
            std::fs::copy(c, &to).map_err(io(&to))?;
            cubins.push((*sm, to));
        }
        let sha = dir.join("module.sha256");
        std::fs::write(&sha, &self.sha256).map_err(io(&sha))?;
        let kernels = dir.join("module.kernels");
        std::fs::write(&kernels, self.kernels.join("\n")).map_err(io(&kernels))?;
        let stack = dir.join("module.stack");
        match self.stack_bytes {
            Some(bytes) => std::fs::write(&stack, bytes.to_string()).map_err(io(&stack))?,
            None if stack.exists() => std::fs::remove_file(&stack).map_err(io(&stack))?,
            None => {}
        }
        Ok(PtxModule {
            ptx,
            cubins,
            sha256: self.sha256.clone(),
            kernels: self.kernels.clone(),
            stack_bytes: self.stack_bytes,
            sources: self.sources.clone(),
            cargo_message: self.cargo_message.clone(),
        })
    }

    /// A module that [`PtxModule::copy_to`] wrote into `dir`.
    pub fn load_dir(dir: &Path) -> Result<PtxModule> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(BuildError::io(format!("reading {}", p.display())))
        };
        let mut cubins: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
            .map_err(BuildError::io(format!("reading {}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?;
                let sm = name
                    .strip_prefix("module.sm_")?
                    .strip_suffix(".cubin")?
                    .parse()
                    .ok()?;
                Some((sm, p))
            })
            .collect();
        cubins.sort();
        Ok(PtxModule {
            ptx: dir.join("module.ptx"),
            cubins,
            sha256: read("module.sha256")?.trim().to_owned(),
            kernels: read("module.kernels")?.lines().map(str::to_owned).collect(),
            stack_bytes: match dir.join("module.stack").exists() {
                true => Some(read("module.stack")?.trim().parse().map_err(|e| {
                    BuildError::Toolchain(format!("{}/module.stack: {e}", dir.display()))
                })?),
                false => None,
            },
            sources: Vec::new(),
            cargo_message: None,
        })
    }
}

impl PtxBuilder {
    /// A builder for the kernel crate at `krate` (its folder or its Cargo.toml).
    pub fn new(krate: impl AsRef<Path>) -> PtxBuilder {
        PtxBuilder {
            krate: crate_folder(krate.as_ref()),
            sm: DEFAULT_SM,
            ptx_version: DEFAULT_PTX_VERSION,
            cubin_sms: vec![DEFAULT_SM],
            cubins: Cubins::IfPtxasFound,
            ptxas_opt: PtxasOpt::default(),
            kernels: None,
            max_threads_per_block: DEFAULT_MAX_THREADS_PER_BLOCK,
            target_dir: None,
            progress: Progress::default(),
            binary: None,
            args: CargoArgs::default(),
        }
    }

    /// The SM version `llc` targets (the PTX runs there and on newer GPUs, via JIT).
    pub fn sm(mut self, sm: u32) -> Self {
        self.sm = sm;
        self
    }

    /// The PTX ISA version to emit (e.g. 80 for PTX 8.0).
    pub fn ptx_version(mut self, v: u32) -> Self {
        self.ptx_version = v;
        self
    }

    /// SM versions to build cubins for.
    pub fn cubin_sms(mut self, sms: &[u32]) -> Self {
        self.cubin_sms = sms.to_vec();
        self
    }

    /// Whether cubins are built.
    pub fn cubins(mut self, c: Cubins) -> Self {
        self.cubins = c;
        self
    }

    /// How hard ptxas optimizes the cubins (default [`PtxasOpt::Full`]).
    pub fn ptxas_opt(mut self, opt: PtxasOpt) -> Self {
        self.ptxas_opt = opt;
        self
    }

    /// The kernels to export; by default every `extern "ptx-kernel"` function.
    pub fn kernels(mut self, names: &[&str]) -> Self {
        self.kernels = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }

    /// The most threads per block any kernel will be launched with (default
    /// [`DEFAULT_MAX_THREADS_PER_BLOCK`]); registers are capped to fit it.
    pub fn max_threads_per_block(mut self, n: u32) -> Self {
        self.max_threads_per_block = n;
        self
    }

    /// Where the nested build and outputs go (default: `target/` in the machine's cache,
    /// [`cache::root`], shared by every kernel crate, so std for the GPU is built once).
    pub fn target_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.target_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Builds the crate's binary `bin` (its only one when `None`) instead of its library:
    /// its `fn main`, unmodified, becomes the kernel `__hostcall_start`
    /// (`hostcall_abi::START_KERNEL`), which runs it as a process runs its main thread,
    /// with the host's arguments, ending the run with its exit code. The crate needs no
    /// change: libc-hostcall is linked in by the builder.
    pub fn binary(mut self, bin: Option<&str>) -> Self {
        self.binary = Some(Program::Bin(bin.map(str::to_owned)));
        self
    }

    /// Builds the crate's example `name` as the program, as [`PtxBuilder::binary`] builds
    /// a binary.
    pub fn example(mut self, name: &str) -> Self {
        self.binary = Some(Program::Example(name.to_owned()));
        self
    }

    /// Builds `target`'s tests as the program, as `cargo test` builds them (Cargo's
    /// `test` profile unless [`CargoArgs::profile`] names another, with the
    /// dev-dependencies): libtest's `main` runs them and takes libtest's arguments.
    pub fn tests(mut self, target: TestTarget) -> Self {
        self.binary = Some(Program::Test(target));
        self
    }

    /// Cargo's options, with Cargo's meaning: the workspace member (`-p`), features,
    /// `--locked`/`--offline`/`--frozen`, and the profile. The GPU build takes the
    /// profile's settings (its `[profile.NAME]` over what it inherits: checks, `lto`,
    /// per-package settings; `crate::profile` says how) but is always optimized
    /// (`opt-level = "s"`, then `opt` at O2 and ptxas at its [`PtxasOpt`]) and has one
    /// codegen unit, whatever the profile says. A binary takes the profile's `panic`
    /// (Cargo's default, `unwind`: `catch_unwind` catches, destructors run); a kernel
    /// library always aborts on panic.
    pub fn cargo_args(mut self, args: CargoArgs) -> Self {
        self.args = args;
        self
    }

    /// What the build reports on stderr (default [`Progress::Stages`]).
    pub fn progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    fn stage(&self, msg: &str) {
        self.progress.stage(msg);
    }

    /// For a build script: runs the pipeline, prints `cargo:rerun-if-changed` for its
    /// sources (and for `PTXAS`, which picks the ptxas), copies the module
    /// into `$OUT_DIR`, and writes the source that embeds it ([`PtxModule::embed_rs`]) to
    /// `$OUT_DIR/file` for the crate to `include!`.
    pub fn build_into_out_dir(&self, file: &str) -> Result<PtxModule> {
        println!("cargo:rerun-if-env-changed=PTXAS");
        let out_dir = std::env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| {
                BuildError::Toolchain("OUT_DIR is not set: not in a build script".into())
            })?;
        let built = self.build()?;
        built.emit_rerun_if_changed();
        // The crate embeds its own copy: the shared target dir may be cleaned or rebuilt
        // for another profile while this crate's build stays fresh.
        let stem = Path::new(file)
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy();
        let module = built.copy_to(&out_dir.join(format!("{stem}.module")))?;
        let out = out_dir.join(file);
        std::fs::write(&out, module.embed_rs())
            .map_err(BuildError::io(format!("writing {}", out.display())))?;
        Ok(module)
    }

    /// Runs the pipeline.
    pub fn build(&self) -> Result<PtxModule> {
        let started = Instant::now();
        let toolchain = tools::Toolchain::detect()?;
        let canonical = |p: &Path| {
            p.canonicalize()
                .map_err(BuildError::io(format!("resolving {}", p.display())))
        };
        let mut krate = canonical(&self.krate)?;
        let target = self
            .target_dir
            .clone()
            .unwrap_or_else(|| cache::root().join("target"));
        let out = target.join("ptx-builder");
        std::fs::create_dir_all(&out)
            .map_err(BuildError::io(format!("creating {}", out.display())))?;
        let (target, out) = (canonical(&target)?, canonical(&out)?);

        self.stage("preparing patched rust-src (cached per toolchain and fixup set)");
        let library = fixups::patched_library(&toolchain)?;

        self.stage(
            "building the crate and std for nvptx64 (the first build compiles std: minutes)",
        );
        let nested = cargo::Nested {
            tc: &toolchain,
            args: &self.args,
            library: &library,
            target_dir: &target,
            out: &out,
            progress: self.progress,
        };
        if let Some(spec) = &self.args.package {
            krate = cargo::member(&nested, &krate.join("Cargo.toml"), spec)?;
        }
        let _held = lock::crate_build(&out, &krate, self.progress)?;
        let built = match &self.binary {
            None => cargo::build(&nested, &krate)?,
            Some(program) => cargo::build_bin(&nested, &krate, program)?,
        };
        let name = built.name.clone();
        self.progress.status(
            "Linking",
            &format!("{name} for the GPU (llvm-link, opt, llc)"),
        );
        // A target's tests and the target itself share a name, not a folder.
        let dir_name = match &self.binary {
            Some(Program::Test(_)) => format!("{name}-tests"),
            _ => name.clone(),
        };
        let out = out.join(crate_dir_name(&dir_name, &krate));
        std::fs::create_dir_all(&out)
            .map_err(BuildError::io(format!("creating {}", out.display())))?;

        self.stage("linking bitcode, optimizing, emitting PTX");
        let members = out.join(format!("bitcode-{name}"));
        let linked = out.join(format!("{name}.linked.bc"));
        link::link(&toolchain, &built.inputs, &members, &linked)?;
        let mut optimized = out.join(format!("{name}.opt.bc"));
        let keep: &[&str] = match self.binary {
            Some(_) => &[
                hostcall_abi::FRAME_PUSH,
                hostcall_abi::FRAME_POP,
                hostcall_abi::UNWINDING,
                hostcall_abi::UNWIND_TAKE,
                hostcall_abi::UNWIND_RESUME,
                hostcall_abi::UNWINDERS,
            ],
            None => &[],
        };
        let kernels = link::optimize_kernels(
            &toolchain,
            &linked,
            self.kernels.as_deref(),
            keep,
            &optimized,
        )?;
        if self.binary.is_some() {
            // A binary's threads run on other GPU threads, which cannot see its stack,
            // and its memory is the GPU's own.
            let framed = out.join(format!("{name}.framed.bc"));
            let done = link::rewrite_binary(&toolchain, &optimized, &framed)?;
            self.stage(&format!(
                "lowered unwinding in {} functions ({} landing pads, {} calls looked after); \
                 moved the locals of {} functions to global-memory frames (threads share \
                 them); gave {} atomics GPU scope",
                done.unwound.functions,
                done.unwound.pads,
                done.unwound.looks,
                done.framed,
                done.scoped
            ));
            optimized = framed;
        }
        let ptx = out.join(format!("{name}.ptx"));
        link::emit_ptx(
            &toolchain,
            &optimized,
            self.sm,
            self.ptx_version,
            self.max_threads_per_block,
            &ptx,
        )?;

        self.stage("checking for unresolved functions");
        let text = std::fs::read_to_string(&ptx)
            .map_err(BuildError::io(format!("reading {}", ptx.display())))?;
        let missing = link::unresolved_in_ptx(&text);
        if !missing.is_empty() {
            return Err(BuildError::Unresolved(link::attribute(
                &toolchain, &members, &missing,
            )));
        }

        let mut cubins = Vec::new();
        let mut frames_files = Vec::new();
        if self.cubins != Cubins::Off {
            match cubin::Tools::find() {
                Ok(tools) => {
                    for &sm in &self.cubin_sms {
                        let cubin = ptx.with_extension(format!("sm_{sm}.cubin"));
                        let frames = ptx.with_extension(format!("sm_{sm}.frames"));
                        let made = cubin::make(
                            &tools,
                            &ptx,
                            sm,
                            self.ptxas_opt,
                            &cubin,
                            &frames,
                            self.progress,
                        )?;
                        self.stage(&made_message(&made, sm, self.ptxas_opt, tools.ptxas()));
                        cubins.push((sm, cubin));
                        frames_files.push(frames);
                    }
                }
                Err(e) if self.cubins == Cubins::Required => return Err(e),
                Err(e) => self.progress.warn(&format!(
                    "{e}: the module will carry PTX only (JIT-compiled at load)"
                )),
            }
        }

        let stack = stack::module_stack(&text, &frames_files)?;
        if let Some(s) = &stack {
            self.stage(&s.describe());
        }
        let sha256 = module_sha256(text.as_bytes(), &cubins)?;
        self.stage(&format!(
            "done in {:.1?}: {} ({} lines), {} cubin(s), kernels {kernels:?}",
            started.elapsed(),
            ptx.display(),
            text.lines().count(),
            cubins.len()
        ));
        let name = ptx.file_stem().unwrap_or_default().to_string_lossy();
        self.progress.status(
            "Finished",
            &format!(
                "the GPU build of {name} in {:.1} s",
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(PtxModule {
            ptx,
            cubins,
            sha256,
            kernels,
            stack_bytes: stack.as_ref().map(stack::EntryStack::bytes),
            sources: built.sources,
            cargo_message: built.message,
        })
    }
}

/// The targets whose tests `cargo test` runs by default in the package at `krate` (its
/// folder or `Cargo.toml`, or its workspace's when `args.package` names a member):
/// its library, binaries and integration tests, each with its source file. Doc tests
/// are not among them: rustdoc compiles each one into a host program of its own.
pub fn test_targets(
    krate: impl AsRef<Path>,
    args: &CargoArgs,
) -> Result<Vec<(TestTarget, PathBuf)>> {
    let tc = tools::Toolchain::detect()?;
    cargo::test_targets(&tc, args, &crate_folder(krate.as_ref()).join("Cargo.toml"))
}

/// The folder of a crate given as its folder or its `Cargo.toml` (`Cargo.toml` alone:
/// the current folder), as [`PtxBuilder::new`] and [`test_targets`] take it.
pub fn crate_folder(p: &Path) -> PathBuf {
    if !p.ends_with("Cargo.toml") {
        return p.to_path_buf();
    }
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The folder of one kernel crate's outputs in a shared target dir: its name and a hash
/// of its path, so same-named crates of two checkouts never share files.
fn crate_dir_name(name: &str, krate: &Path) -> String {
    let short = cache::short_hash(krate.as_os_str().as_encoded_bytes(), 6);
    format!("{name}-{short}")
}

/// A progress line saying how the cubin for `sm` was made.
pub(crate) fn made_message(made: &Made, sm: u32, opt: PtxasOpt, ptxas: &Path) -> String {
    match made {
        Made::Cached(path) => format!("sm_{sm} cubin: from the cache ({})", path.display()),
        Made::Compiled => format!("sm_{sm} cubin: compiled by {} ({opt:?})", ptxas.display()),
    }
}

/// SHA-256 (hex) over a module's PTX and its cubins, each preceded by its SM version.
fn module_sha256(ptx: &[u8], cubins: &[(u32, PathBuf)]) -> Result<String> {
    let mut h = Sha256::new();
    h.update(ptx);
    for (sm, path) in cubins {
        h.update(sm.to_le_bytes());
        h.update(
            std::fs::read(path).map_err(BuildError::io(format!("reading {}", path.display())))?,
        );
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_is_its_folder_or_its_manifests() {
        assert_eq!(crate_folder(Path::new("a/b")), Path::new("a/b"));
        assert_eq!(crate_folder(Path::new("a/b/Cargo.toml")), Path::new("a/b"));
        assert_eq!(crate_folder(Path::new("Cargo.toml")), Path::new("."));
    }

    #[test]
    fn copy_to_then_load_dir_round_trips_and_embeds() {
        let src = tempfile::tempdir().unwrap();
        let (ptx, cubin) = (src.path().join("k.ptx"), src.path().join("k.sm_90.cubin"));
        std::fs::write(&ptx, ".version 8.0\n").unwrap();
        std::fs::write(&cubin, [1u8, 2, 3]).unwrap();
        let m = PtxModule {
            ptx,
            cubins: vec![(90, cubin)],
            sha256: "ab".repeat(32),
            kernels: vec!["kmain".into(), "other".into()],
            stack_bytes: Some(40_960),
            sources: Vec::new(),
            cargo_message: None,
        };
        let out = tempfile::tempdir().unwrap();
        let copied = m.copy_to(out.path()).unwrap();
        let loaded = PtxModule::load_dir(out.path()).unwrap();
        assert_eq!(loaded.ptx, copied.ptx);
        assert_eq!(loaded.cubins, copied.cubins);
        assert_eq!(
            (
                loaded.sha256.as_str(),
                loaded.kernels.as_slice(),
                loaded.stack_bytes
            ),
            (m.sha256.as_str(), m.kernels.as_slice(), m.stack_bytes)
        );
        let rs = loaded.embed_rs();
        assert!(rs.contains("pub const PTX: &str = include_str!(") && rs.contains("module.ptx"));
        assert!(rs.contains("(90, include_bytes!(") && rs.contains(&m.sha256));
        assert!(rs.contains("pub const STACK_BYTES: Option<usize> = Some(40960);"));
        let unknown = PtxModule {
            stack_bytes: None,
            ..copied
        };
        let again = unknown.copy_to(out.path()).unwrap();
        assert_eq!(PtxModule::load_dir(out.path()).unwrap().stack_bytes, None);
        assert!(
            again
                .embed_rs()
                .contains("STACK_BYTES: Option<usize> = None;")
        );
    }
}
