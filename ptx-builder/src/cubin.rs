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
use crate::{BuildError, Result, cache, ptxas};

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
    fn args(self) -> &'static [&'static str] {
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

/// Compiles `ptx` into the cubin `out` for `sm` with `ptxas` at `opt`, or copies the
/// cubin from the cache. Returns how it was made.
pub(crate) fn make(ptxas: &Path, ptx: &Path, sm: u32, opt: PtxasOpt, out: &Path) -> Result<Made> {
    let io = |what: &str, p: &Path| BuildError::io(format!("{what} {}", p.display()));
    let text = std::fs::read(ptx).map_err(io("reading", ptx))?;
    let mut args = vec![format!("-arch=sm_{sm}")];
    args.extend(opt.args().iter().map(|a| a.to_string()));
    let key = key(&ptxas::version(ptxas)?, &args, &text);
    let cached = cache::cubin_path(&key);
    if cache::cubins_enabled() && cached.is_file() {
        std::fs::copy(&cached, out).map_err(io("copying", &cached))?;
        return Ok(Made::Cached(cached));
    }
    // ptxas writes `out` in place: a cubin left by an interrupted run must not be taken
    // for a finished one, so it writes beside it and the result is renamed.
    let partial = out.with_extension("cubin.partial");
    run(Command::new(ptxas)
        .args(&args)
        .arg(ptx)
        .arg("-o")
        .arg(&partial))?;
    let bytes = std::fs::read(&partial).map_err(io("reading", &partial))?;
    let _ = std::fs::remove_file(&partial);
    cache::write_atomically(out, &bytes)?;
    if cache::cubins_enabled() {
        cache::write_atomically(&cached, &bytes)?;
    }
    Ok(Made::Compiled)
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
    fn full_optimization_is_the_default() {
        assert_eq!(PtxasOpt::default(), PtxasOpt::Full);
        assert_eq!(PtxasOpt::Full.args(), ["-O3"]);
    }
}
