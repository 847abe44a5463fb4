//! PTX to a cubin: ptxas compiles the module separately (`-c`), in parts
//! ([`crate::split`]) on every core, at the optimization it asks for; nvJitLink links
//! the objects; the result is kept in the machine's cache under a key of everything the
//! cubin depends on.
//!
//! Whole-program compilation, ptxas's default, is what made large Rust programs take
//! tens of minutes and tens of gigabytes: on the build machine (2 cores, ptxas 12.9),
//! `examples/rayon-json`'s 153k lines of PTX took 176 s and 2.4 GB at `-O3` (`-O1`: 116 s,
//! 1.9 GB) against 10 s and 0.67 GB separately; the registry program's 638k lines passed
//! 17 GB in under 4 minutes at `-O3`, and 16 GB even at `--Ofast-compile=mid`. Separate
//! compilation optimizes each function at `-O3` as before but across calls keeps to the
//! ABI, whose registers per function are bounded as the kernels' `.maxntid` bounds the
//! whole program's ([`device_registers`]); on an H100 both programs ran as fast as (or
//! faster than) before. Either way the cubin a binary embeds is the one its tests ran.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use crate::nvjitlink::{self, NvJitLink};
use crate::progress::{Counter, Progress};
use crate::tools::run;
use crate::{BuildError, Result, cache, ptxas, split, stack};

/// How hard ptxas optimizes a module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PtxasOpt {
    /// `-O3`: for modules whose speed matters (everything users and benchmarks run).
    #[default]
    Full,
    /// `--Ofast-compile=max`: a little less time (the registry program's build: 57 s
    /// against 62 on 2 cores), code several times slower (`rayon-json`: 3.6 s against
    /// 1.0); for modules that test correctness only.
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

/// The tools that make a cubin: ptxas, and nvJitLink to link what it compiled.
#[derive(Clone, Debug)]
pub(crate) struct Tools {
    ptxas: PathBuf,
    nvjitlink: PathBuf,
}

impl Tools {
    /// Both tools ([`ptxas::find`], [`nvjitlink::find`]); an error naming the one missing.
    pub(crate) fn find() -> Result<Tools> {
        let ptxas = ptxas::find().ok_or(BuildError::NoPtxas)?;
        let nvjitlink = nvjitlink::find().ok_or(BuildError::NoNvJitLink)?;
        Ok(Tools { ptxas, nvjitlink })
    }

    /// Where ptxas is, for progress messages.
    pub(crate) fn ptxas(&self) -> &Path {
        &self.ptxas
    }
}

/// The most registers a device function may use (`--device-function-maxrregcount`): as
/// many as every kernel of the module can give each of its threads at its `.maxntid`
/// (65,536 registers per block on sm_90), which whole-program compilation derived itself.
pub(crate) fn device_registers(ptx: &str) -> u32 {
    let threads = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".maxntid "))
        .filter_map(|l| {
            l.split(',')
                .map(|d| d.trim().parse::<u32>().ok())
                .product::<Option<u32>>()
        })
        .max()
        .unwrap_or(0);
    match threads {
        0 => 255,
        n => (65_536 / n).clamp(16, 255),
    }
}

/// Compiles `ptx` into the cubin `out` for `sm` at `opt`, writing each function's stack
/// frame as ptxas reported it to `frames` (for [`crate::stack`]), or copies both from the
/// cache. Returns how the cubin was made.
pub(crate) fn make(
    tools: &Tools,
    ptx: &Path,
    sm: u32,
    opt: PtxasOpt,
    out: &Path,
    frames: &Path,
    progress: Progress,
) -> Result<Made> {
    let io = |what: &str, p: &Path| BuildError::io(format!("{what} {}", p.display()));
    let text = std::fs::read_to_string(ptx).map_err(io("reading", ptx))?;
    let mut args = vec![
        format!("-arch=sm_{sm}"),
        "-c".to_owned(),
        format!("--device-function-maxrregcount={}", device_registers(&text)),
    ];
    args.extend(opt.args().iter().map(|a| a.to_string()));
    let linker = NvJitLink::load(&tools.nvjitlink)?;
    let versions = format!(
        "{}\n{}\nparts of {} lines",
        ptxas::version(&tools.ptxas)?,
        linker.version()?,
        split::PART_LINES
    );
    let key = key(&versions, &args, text.as_bytes());
    let cached = cache::cubin_path(&key);
    let cached_frames = cached.with_extension("frames");
    if cache::cubins_enabled() && cached.is_file() && cached_frames.is_file() {
        std::fs::copy(&cached, out).map_err(io("copying", &cached))?;
        std::fs::copy(&cached_frames, frames).map_err(io("copying", &cached_frames))?;
        return Ok(Made::Cached(cached));
    }
    let parts = split::split(&text, split::PART_LINES);
    let counter = progress.counter(
        "Compiling",
        format!(
            "{} for sm_{sm}: ptxas {}, {}k lines of PTX",
            ptx.file_stem().unwrap_or_default().to_string_lossy(),
            opt.args().join(" "),
            text.lines().count() / 1000
        ),
        parts.len(),
    );
    let (objects, report) = compile_parts(tools, &parts, &args, opt, out, counter)?;
    let bytes = linker.link(&objects, sm)?;
    cache::write_atomically(out, &bytes)?;
    cache::write_atomically(frames, report.as_bytes())?;
    if cache::cubins_enabled() {
        // The frames first: a cubin in the cache is taken only with its frames.
        cache::write_atomically(&cached_frames, report.as_bytes())?;
        cache::write_atomically(&cached, &bytes)?;
    }
    Ok(Made::Compiled)
}

/// One part compiled: its object and ptxas's report.
struct Compiled {
    object: Vec<u8>,
    report: String,
}

/// Compiles each part with ptxas (`args`, `-c`), as many at once as there are cores,
/// each beside `out` until read; returns the objects and the frames file of them all.
fn compile_parts(
    tools: &Tools,
    parts: &[String],
    args: &[String],
    opt: PtxasOpt,
    out: &Path,
    mut counter: Counter,
) -> Result<(Vec<Vec<u8>>, String)> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (next, finished) = (AtomicUsize::new(0), AtomicUsize::new(0));
    // Once a part fails, the parts not yet started are not compiled: the build has failed.
    let failed = AtomicBool::new(false);
    let compile = |i: usize| -> Result<Compiled> {
        let io = |what: &str, p: &Path| BuildError::io(format!("{what} {}", p.display()));
        let ptx = out.with_extension(format!("part{i}.ptx"));
        let object = out.with_extension(format!("part{i}.o"));
        std::fs::write(&ptx, &parts[i]).map_err(io("writing", &ptx))?;
        let output = run(Command::new(&tools.ptxas)
            .args(args)
            .arg("--verbose")
            .arg(&ptx)
            .arg("-o")
            .arg(&object))
        .map_err(|e| killed(e, opt, &parts[i]))
        .map_err(without_info);
        let _ = std::fs::remove_file(&ptx);
        let report = String::from_utf8_lossy(&output?.stderr).into_owned();
        let bytes = std::fs::read(&object).map_err(io("reading", &object));
        let _ = std::fs::remove_file(&object);
        Ok(Compiled {
            object: bytes?,
            report,
        })
    };
    // Each worker takes the next part until none is left.
    let mut results: Vec<(usize, Result<Compiled>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.min(parts.len()))
            .map(|_| {
                s.spawn(|| {
                    std::iter::from_fn(|| {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        (i < parts.len() && !failed.load(Ordering::Relaxed)).then(|| {
                            let compiled = compile(i);
                            failed.fetch_or(compiled.is_err(), Ordering::Relaxed);
                            finished.fetch_add(1, Ordering::Relaxed);
                            (i, compiled)
                        })
                    })
                    .collect::<Vec<_>>()
                })
            })
            .collect();
        while !workers.iter().all(|w| w.is_finished()) {
            counter.update(finished.load(Ordering::Relaxed));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a ptxas worker panicked"))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    counter.finish();
    let mut objects = Vec::with_capacity(parts.len());
    let mut frames = HashMap::new();
    for (_, r) in results {
        let Compiled { object, report } = r?;
        frames.extend(stack::frames(&report));
        objects.push(object);
    }
    Ok((objects, stack::frames_file(&frames)))
}

/// A ptxas killed by a signal 9 (`BuildError::Tool`'s status is the `ExitStatus`'s text)
/// said in one sentence that names the way around it.
fn killed(e: BuildError, opt: PtxasOpt, ptx: &str) -> BuildError {
    match e {
        BuildError::Tool { status, .. } if status.contains("SIGKILL") => BuildError::PtxasKilled {
            lines: ptx.lines().count(),
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
            log,
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
                log,
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
        let Some(nvjitlink) = nvjitlink::find() else {
            println!("a_ptxas_killed_for_memory_says_so: SKIPPED (no nvJitLink here)");
            return;
        };
        let err = make(
            &Tools { ptxas, nvjitlink },
            &ptx,
            90,
            PtxasOpt::Full,
            &out,
            &frames,
            Progress::Quiet,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "ptxas was killed (SIGKILL) compiling 2 lines of PTX at `-O3`, most likely by the \
             system for want of memory: build with `--fast-compile` (`PtxasOpt::FastCompile`: \
             ptxas `--Ofast-compile=max`, less memory, slower code), or on a machine with more \
             memory"
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
            log: None,
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
