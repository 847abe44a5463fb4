//! PTX to a cubin with ptxas, at the optimization the module asks for, kept in the
//! machine's cache under a key of everything the cubin depends on.
//!
//! ptxas compiles a module as one whole program, and its time and memory grow much
//! faster than the module: on the 315k-line conformance module, `-O3` ran past 23
//! minutes at 8.7 GB, while `--Ofast-compile=max` takes 13 s at 1.2 GB. Modules that
//! users and benchmarks run keep `-O3` ([`PtxasOpt::Full`]); a module that only tests
//! correctness may ask for [`PtxasOpt::FastCompile`]. Either way the cubin a binary
//! embeds is the one its tests ran.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::tools::run;
use crate::{BuildError, Result, cache, ptxas, stack};

/// How hard ptxas optimizes a module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PtxasOpt {
    /// `-O3`: for modules whose speed matters (everything users and benchmarks run).
    #[default]
    Full,
    /// `--Ofast-compile=max`: minutes and gigabytes less on large modules, slower code;
    /// for modules that test correctness only.
    FastCompile,
}

impl PtxasOpt {
    /// ptxas's arguments for this level.
    pub(crate) fn args(self) -> &'static [&'static str] {
        match self {
            PtxasOpt::Full => &["-O3"],
            PtxasOpt::FastCompile => &["--Ofast-compile=max"],
        }
    }
}

/// How a cubin came to be, for the build's progress messages.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Made {
    /// Found in the cache (`path`), made earlier from the same PTX, ptxas and options.
    Cached(PathBuf),
    /// Compiled by ptxas now.
    Compiled,
}

/// Compiles `ptx` into the cubin `out` for `sm` with `ptxas` at `opt`, writing each
/// function's stack frame as ptxas reported it to `frames` (for [`crate::stack`]), or
/// copies both from the cache. Returns how the cubin was made.
pub(crate) fn make(
    ptxas: &Path,
    ptx: &Path,
    sm: u32,
    opt: PtxasOpt,
    out: &Path,
    frames: &Path,
) -> Result<Made> {
    let io = |what: &str, p: &Path| BuildError::io(format!("{what} {}", p.display()));
    let text = std::fs::read(ptx).map_err(io("reading", ptx))?;
    let mut args = vec![format!("-arch=sm_{sm}")];
    args.extend(opt.args().iter().map(|a| a.to_string()));
    let key = key(&ptxas::version(ptxas)?, &args, &text);
    let cached = cache::cubin_path(&key);
    let cached_frames = cached.with_extension("frames");
    if cache::cubins_enabled() && cached.is_file() && cached_frames.is_file() {
        std::fs::copy(&cached, out).map_err(io("copying", &cached))?;
        std::fs::copy(&cached_frames, frames).map_err(io("copying", &cached_frames))?;
        return Ok(Made::Cached(cached));
    }
    // ptxas writes `out` in place: a cubin left by an interrupted run must not be taken
    // for a finished one, so it writes beside it and the result is renamed.
    let partial = out.with_extension("cubin.partial");
    let output = run(Command::new(ptxas)
        .args(&args)
        .arg("--verbose")
        .arg(ptx)
        .arg("-o")
        .arg(&partial))
    .map_err(|e| killed(e, opt, &text))
    .map_err(without_info)?;
    let report = stack::frames_file(&stack::frames(&String::from_utf8_lossy(&output.stderr)));
    let bytes = std::fs::read(&partial).map_err(io("reading", &partial))?;
    let _ = std::fs::remove_file(&partial);
    cache::write_atomically(out, &bytes)?;
    cache::write_atomically(frames, report.as_bytes())?;
    if cache::cubins_enabled() {
        // The frames first: a cubin in the cache is taken only with its frames.
        cache::write_atomically(&cached_frames, report.as_bytes())?;
        cache::write_atomically(&cached, &bytes)?;
    }
    Ok(Made::Compiled)
}

/// A ptxas killed by a signal 9 (`BuildError::Tool`'s status is the `ExitStatus`'s text)
/// said in one sentence that names the way around it.
fn killed(e: BuildError, opt: PtxasOpt, ptx: &[u8]) -> BuildError {
    match e {
        BuildError::Tool { status, .. } if status.contains("SIGKILL") => BuildError::PtxasKilled {
            lines: ptx.iter().filter(|&&b| b == b'\n').count(),
            opt,
        },
        other => other,
    }
}

/// A ptxas failure without the `--verbose` report of every function that compiled, so
/// that the error is what is left.
fn without_info(e: BuildError) -> BuildError {
    match e {
        BuildError::Tool {
            tool,
            status,
            stderr,
        } => {
            let mut kept = String::new();
            let mut after_info = false;
            for line in stderr.lines() {
                let info = line.starts_with("ptxas info")
                    || (after_info && line.starts_with(char::is_whitespace))
                    || line.contains("cannot be statically determined");
                after_info = info;
                if !info {
                    kept.push_str(line);
                    kept.push('\n');
                }
            }
            BuildError::Tool {
                tool,
                status,
                stderr: kept,
            }
        }
        other => other,
    }
}

/// The cache key: every input the cubin's bytes depend on.
fn key(ptxas_version: &str, args: &[String], ptx: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [ptxas_version, &args.join(" ")] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update(ptx);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ptxas the system kills (here it kills itself) is one sentence naming
    /// `--fast-compile`, not a signal number.
    #[test]
    fn a_ptxas_killed_for_memory_says_so_and_names_fast_compile() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ptxas = dir.path().join("ptxas");
        std::fs::write(
            &ptxas,
            "#!/bin/sh\n[ \"$1\" = --version ] && { echo killed-ptxas 1; exit 0; }\nkill -9 $$\n",
        )
        .unwrap();
        std::fs::set_permissions(&ptxas, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ptx = dir.path().join("m.ptx");
        std::fs::write(&ptx, ".version 8.0\n.target sm_90\n").unwrap();
        let (out, frames) = (dir.path().join("m.cubin"), dir.path().join("m.frames"));
        let err = make(&ptxas, &ptx, 90, PtxasOpt::Full, &out, &frames)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "ptxas was killed (SIGKILL) compiling 2 lines of PTX at `-O3`, most likely by the \
             system for want of memory: build with `--fast-compile` (`PtxasOpt::FastCompile`: \
             ptxas `--Ofast-compile=max`, a fraction of the memory and time, slower code), or \
             on a machine with more memory"
        );
        assert!(!out.exists());
    }

    #[test]
    fn the_key_changes_with_every_input() {
        let full: Vec<String> = ["-arch=sm_90", "-O3"].map(String::from).to_vec();
        let fast: Vec<String> = ["-arch=sm_90", "--Ofast-compile=max"]
            .map(String::from)
            .to_vec();
        let base = key("ptxas 12.9", &full, b"ptx");
        assert_ne!(base, key("ptxas 13.0", &full, b"ptx"));
        assert_ne!(base, key("ptxas 12.9", &fast, b"ptx"));
        assert_ne!(base, key("ptxas 12.9", &full, b"ptx2"));
        assert_eq!(base, key("ptxas 12.9", &full, b"ptx"));
    }

    #[test]
    fn a_failure_keeps_ptxas_errors_and_drops_its_report() {
        let e = without_info(BuildError::Tool {
            tool: "ptxas".into(),
            status: "exit status: 255".into(),
            stderr: "ptxas info    : Function properties for f\n    8 bytes stack frame, 0 bytes \
                     spill stores, 0 bytes spill loads\nptxas warning : Stack size for entry \
                     function 'k' cannot be statically determined\nptxas fatal   : Unresolved \
                     extern function 'g'\n"
                .into(),
        });
        let BuildError::Tool { stderr, .. } = e else {
            panic!("still a tool error");
        };
        assert_eq!(stderr, "ptxas fatal   : Unresolved extern function 'g'\n");
    }

    #[test]
    fn full_optimization_is_the_default() {
        assert_eq!(PtxasOpt::default(), PtxasOpt::Full);
        assert_eq!(PtxasOpt::Full.args(), ["-O3"]);
    }
}
