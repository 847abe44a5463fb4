//! Running external programs and finding the toolchain's LLVM tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{BuildError, Result};

/// Runs `cmd` to completion, turning a failure into [`BuildError::Tool`], whose message
/// keeps a few lines: what the tool printed is written in full to a file of the cache's
/// `logs/` folder, which the message names.
pub(crate) fn run(cmd: &mut Command) -> Result<Output> {
    let tool = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .map_err(BuildError::io(format!("running {tool}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(BuildError::Tool {
            log: write_log(&tool, cmd, &stderr),
            tool,
            status: out.status.to_string(),
            stderr,
        });
    }
    Ok(out)
}

/// Writes a failed tool's command line and stderr to a new file of `logs/` in the cache;
/// `None` if it could not be written (the message then carries the whole of `stderr`).
fn write_log(tool: &str, cmd: &Command, stderr: &str) -> Option<PathBuf> {
    let dir = crate::cache::root().join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let name = Path::new(tool).file_name()?.to_string_lossy().into_owned();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    let log = dir.join(format!("{name}-{stamp}-{}.log", std::process::id()));
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::fs::write(&log, format!("$ {tool} {}\n{stderr}", args.join(" "))).ok()?;
    Some(log)
}

/// The nightly the fixups are written against and std for the GPU is built with, as the
/// repository's `rust-toolchain.toml` names it (a test keeps the two one): an installed
/// builder uses it whatever toolchain compiled it or is the default where it runs.
pub const PINNED_TOOLCHAIN: &str = "nightly-2026-10-15";

/// The components of [`PINNED_TOOLCHAIN`] a build needs.
const COMPONENTS: [&str; 2] = ["rust-src", "llvm-tools"];

/// The pinned toolchain as the build sees it.
#[derive(Clone, Debug)]
pub(crate) struct Toolchain {
    pub rustc: PathBuf,
    pub cargo: PathBuf,
    pub sysroot: PathBuf,
    /// `rustc -vV`, part of the cache key of the patched rust-src copy.
    pub version: String,
    llvm_bin: PathBuf,
}

impl Toolchain {
    /// The toolchain of the calling cargo (`RUSTC`/`CARGO` in build scripts), else rustup's
    /// [`PINNED_TOOLCHAIN`], installed with its components the first time (rustup says
    /// what it downloads), else the one on PATH when there is no rustup.
    pub fn detect() -> Result<Toolchain> {
        let (rustc, cargo) = match (std::env::var_os("RUSTC"), std::env::var_os("CARGO")) {
            (Some(rustc), Some(cargo)) => (PathBuf::from(rustc), PathBuf::from(cargo)),
            (rustc, cargo) => match Self::pinned()? {
                Some(bin) => (bin.join("rustc"), bin.join("cargo")),
                None => (
                    PathBuf::from(rustc.unwrap_or_else(|| "rustc".into())),
                    PathBuf::from(cargo.unwrap_or_else(|| "cargo".into())),
                ),
            },
        };
        let text = |args: &[&str]| -> Result<String> {
            let out = run(Command::new(&rustc).args(args))?;
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        let sysroot = PathBuf::from(text(&["--print", "sysroot"])?);
        let version = text(&["-vV"])?;
        let host = version
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .ok_or_else(|| {
                BuildError::Toolchain(format!("no host triple in `rustc -vV`:\n{version}"))
            })?;
        let llvm_bin = sysroot.join("lib/rustlib").join(host).join("bin");
        if !llvm_bin.join("llvm-link").exists() {
            return Err(BuildError::Toolchain(format!(
                "{} has no llvm-link: run `rustup component add llvm-tools`",
                llvm_bin.display()
            )));
        }
        if !sysroot.join("lib/rustlib/src/rust/library/std").exists() {
            return Err(BuildError::Toolchain(
                "this toolchain has no rust-src: run `rustup component add rust-src`".into(),
            ));
        }
        Ok(Toolchain {
            rustc,
            cargo,
            sysroot,
            version,
            llvm_bin,
        })
    }

    /// The `bin/` of rustup's [`PINNED_TOOLCHAIN`] with its [`COMPONENTS`], installing
    /// what is missing; `None` without rustup. Used when no `RUSTC`/`CARGO` is given
    /// (the CLI outside a build script): from another directory, `rustc` would be that
    /// directory's default toolchain (say, stable, which cannot build std for the GPU).
    fn pinned() -> Result<Option<PathBuf>> {
        let sysroot = || {
            Command::new("rustc")
                .env("RUSTUP_TOOLCHAIN", PINNED_TOOLCHAIN)
                .args(["--print", "sysroot"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        };
        let complete = |root: &Path| {
            root.join("bin/cargo").exists()
                && root.join("lib/rustlib/src/rust/library/std").exists()
                && llvm_tools_present(root)
        };
        if let Some(root) = sysroot().filter(|r| complete(r)) {
            return Ok(Some(root.join("bin")));
        }
        if Command::new("rustup").arg("--version").output().is_err() {
            return Ok(None);
        }
        eprintln!(
            "ptx-builder: installing {PINNED_TOOLCHAIN} with {} (once: std for the GPU is \
             built with it)",
            COMPONENTS.join(", ")
        );
        run(Command::new("rustup")
            .args([
                "toolchain",
                "install",
                PINNED_TOOLCHAIN,
                "--profile",
                "minimal",
            ])
            .args(COMPONENTS.iter().flat_map(|c| ["--component", c])))?;
        match sysroot() {
            Some(root) if complete(&root) => Ok(Some(root.join("bin"))),
            _ => Err(BuildError::Toolchain(format!(
                "rustup installed {PINNED_TOOLCHAIN}, but it lacks {}",
                COMPONENTS.join(" or ")
            ))),
        }
    }

    /// The path of LLVM tool `name` (`llvm-link`, `opt`, ...) of this toolchain.
    pub fn llvm(&self, name: &str) -> PathBuf {
        self.llvm_bin.join(name)
    }

    /// The pristine `library/` of rust-src.
    pub fn library(&self) -> PathBuf {
        self.sysroot.join("lib/rustlib/src/rust/library")
    }
}

/// Whether `p` is an executable file.
pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a sysroot has llvm-tools (`llvm-link` under its host's `rustlib/*/bin`).
fn llvm_tools_present(sysroot: &Path) -> bool {
    std::fs::read_dir(sysroot.join("lib/rustlib"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin/llvm-link").exists())
}

/// The folder of the Python package `module` (`nvidia.cuda_nvcc`, a namespace package of
/// NVIDIA's PyPI wheels) as `python3` imports it, if it does.
pub(crate) fn python_package_dir(module: &str) -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!("import {module} as m; print(list(m.__path__)[0])"),
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| PathBuf::from(dir.trim()))
}
