//! Running external programs and finding the toolchain's LLVM tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{BuildError, Result};

/// Runs `cmd` to completion, turning a failure into [`BuildError::Tool`].
pub(crate) fn run(cmd: &mut Command) -> Result<Output> {
    let tool = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .map_err(BuildError::io(format!("running {tool}")))?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(out)
}

/// The rustup toolchain that compiled this crate (rustup's proxies set it for cargo).
const BUILT_WITH: Option<&str> = option_env!("RUSTUP_TOOLCHAIN");

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
    /// The toolchain of the calling cargo (`RUSTC`/`CARGO` in build scripts), else the
    /// rustup toolchain this builder was compiled with, else the one on PATH.
    pub fn detect() -> Result<Toolchain> {
        let (rustc, cargo) = match (std::env::var_os("RUSTC"), std::env::var_os("CARGO")) {
            (Some(rustc), Some(cargo)) => (PathBuf::from(rustc), PathBuf::from(cargo)),
            (rustc, cargo) => match Self::built_with()? {
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

    /// An LLVM tool of the same LLVM as rustc (`llvm-link`, `opt`, `llc`, ...).
    /// The `bin/` of the rustup toolchain this builder was compiled with, if rustup
    /// compiled it. Used when no `RUSTC`/`CARGO` is given (the CLI outside a build
    /// script): from another directory, `rustc` would be that directory's default
    /// toolchain (say, stable, which cannot build std for the GPU).
    fn built_with() -> Result<Option<PathBuf>> {
        let Some(toolchain) = BUILT_WITH else {
            return Ok(None);
        };
        let out = run(Command::new("rustc")
            .env("RUSTUP_TOOLCHAIN", toolchain)
            .args(["--print", "sysroot"]))?;
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin");
        Ok(bin.join("cargo").exists().then_some(bin))
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
