//! The builder's one error type; every variant says what to do about it.

use std::path::{Path, PathBuf};

/// Why a GPU build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The Rust toolchain lacks something the build needs.
    #[error("toolchain: {0}")]
    Toolchain(String),
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A fixup no longer applies to this toolchain's rust-src.
    #[error(
        "fixup {patch} does not apply to {file}: {why} (was the toolchain changed? see ptx-builder/fixups/)"
    )]
    Fixup {
        /// The patch file name.
        patch: String,
        /// The file it patches, relative to `library/`.
        file: String,
        /// Which hunk failed and how.
        why: String,
    },
    /// The nested cargo build of the kernel crate failed; its diagnostics were printed.
    #[error(
        "building the kernel crate {krate} for the GPU failed ({status}); see the errors above"
    )]
    Cargo {
        /// The kernel crate's manifest.
        krate: PathBuf,
        /// cargo's exit status.
        status: String,
    },
    /// An LLVM tool or ptxas failed. The message carries the lines that say why; the
    /// whole of what it printed (an LLVM stack dump, say) is in `log`.
    #[error("{}", tool_message(.tool, .status, .stderr, .log.as_deref()))]
    Tool {
        /// The tool's path.
        tool: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
        /// The file holding `stderr` in full, when it was written.
        log: Option<PathBuf>,
    },
    /// The optimized module still calls LLVM math intrinsics the GPU build has no
    /// function for (llc would abort on them).
    #[error("{}", math_message(.0))]
    MathIntrinsics(Vec<(String, Vec<String>)>),
    /// The module calls functions nobody defines; the CUDA JIT would refuse it.
    #[error("{}", unresolved_message(.0))]
    Unresolved(Vec<Unresolved>),
    /// The kernel crate defines no `extern "ptx-kernel"` function.
    #[error("the kernel crate defines no `extern \"ptx-kernel\" fn` marked #[unsafe(no_mangle)]")]
    NoKernels,
    /// ptxas was killed, as the system does to the largest process when memory runs out.
    #[error("{}", killed_message(*.lines, *.opt))]
    PtxasKilled {
        /// The module's lines of PTX.
        lines: usize,
        /// The optimization ptxas was compiling at.
        opt: crate::PtxasOpt,
    },
    /// Cubins were required but no ptxas was found.
    #[error(
        "no ptxas found (set PTXAS, put a CUDA toolkit on PATH, or `pip install nvidia-cuda-nvcc-cu12`)"
    )]
    NoPtxas,
    /// Cubins were required but no nvJitLink (which links what ptxas compiled) was found.
    #[error(
        "no nvJitLink found (set NVJITLINK to libnvJitLink.so, put a CUDA toolkit at \
         CUDA_HOME, or `pip install nvidia-nvjitlink-cu12`)"
    )]
    NoNvJitLink,
}

/// A function the linked module references but does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The symbol.
    pub symbol: String,
    /// Crates whose bitcode references it before dead-code elimination (so std may be
    /// listed for code the kernel never reaches); empty if it could not be attributed.
    pub needed_by: Vec<String>,
}

fn killed_message(lines: usize, opt: crate::PtxasOpt) -> String {
    let instead = match opt {
        crate::PtxasOpt::FastCompile => "build on a machine with more memory",
        _ => {
            "build with `--fast-compile` (`PtxasOpt::FastCompile`: ptxas \
             `--Ofast-compile=max`, less memory, slower code), or on a machine with more \
             memory"
        }
    };
    format!(
        "ptxas was killed (SIGKILL) compiling {lines} lines of PTX at `{}`, most likely by \
         the system for want of memory: {instead}",
        opt.args().join(" ")
    )
}

/// At most this many lines of a failed tool's stderr go into its error message.
const TOOL_LINES: usize = 3;

/// A failed tool's message: its name and status, the lines of `stderr` that say why
/// (LLVM's `error:` and `LLVM ERROR:` lines and the function it was in; else the first
/// lines), and where the rest is.
fn tool_message(tool: &str, status: &str, stderr: &str, log: Option<&Path>) -> String {
    let name = Path::new(tool)
        .file_name()
        .map_or(tool.into(), |n| n.to_string_lossy());
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let saying: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            ["error", "ERROR", "fatal"].iter().any(|w| l.contains(w))
                || l.starts_with("In function:")
        })
        .collect();
    let mut why: Vec<String> = if saying.is_empty() { lines } else { saying }
        .into_iter()
        .take(TOOL_LINES)
        .map(|l| match l.char_indices().nth(200) {
            Some((at, _)) => format!("{}...", &l[..at]),
            None => l.to_owned(),
        })
        .collect();
    if let Some(f) = why.iter_mut().find(|l| l.starts_with("In function:")) {
        let symbol = f["In function:".len()..].trim();
        *f = format!("in function {}", crate::ir::demangle(symbol));
    }
    let mut s = format!("{name} failed ({status})");
    if !why.is_empty() {
        s.push_str(&format!(": {}", why.join("; ")));
    }
    match log {
        Some(log) => s.push_str(&format!(" (all it printed: {})", log.display())),
        None if stderr.lines().count() > TOOL_LINES => {
            s.push_str(&format!("\n{}", stderr.trim_end()));
        }
        None => {}
    }
    s
}

fn math_message(left: &[(String, Vec<String>)]) -> String {
    let list: Vec<String> = left
        .iter()
        .map(|(name, callers)| format!("{name} (called by {})", callers.join(", ")))
        .collect();
    format!(
        "the GPU build has no function for the float math intrinsic(s) {}: scalar `f32`/`f64` \
         math is supported; compute vector (SIMD) math lane by lane",
        list.join(", ")
    )
}

fn unresolved_message(list: &[Unresolved]) -> String {
    let mut s = format!(
        "{} function(s) are called on the GPU but defined nowhere (libc-hostcall does not \
         provide them; add them there, or avoid the std API that needs them):",
        list.len()
    );
    for u in list {
        s.push_str(&format!("\n  {}", u.symbol));
        if !u.needed_by.is_empty() {
            s.push_str(&format!("  (needed by {})", u.needed_by.join(", ")));
        }
    }
    s
}

impl BuildError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
        let context = context.into();
        move |source| BuildError::Io { context, source }
    }
}

/// Result with the builder's error.
pub type Result<T, E = BuildError> = std::result::Result<T, E>;
