//! The nested `cargo build -Zbuild-std` of the kernel crate, in its own target dir and
//! a cleaned environment (nothing of the outer build script's cargo leaks in).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::fixups::{TARGET_SPEC, libc_rustflags};
use crate::selection::{CargoArgs, Program, TestTarget};
use crate::tools::Toolchain;
use crate::{BuildError, Result};

/// The crates that take the x86_64 cfg of `fixups/libc.rustflags`: std's `libc` and
/// `unwind`, and the registry's `linux-raw-sys` and `rustix` (on its libc backend, which
/// its build script picks for an arch it has no assembly for), which tempfile and much
/// of the registry are built on: neither has a module for nvptx64's constants, so both
/// failed to compile.
const X86_64_CFG_CRATES: [&str; 4] = ["libc", "unwind", "linux-raw-sys", "rustix"];

/// Variables of an outer cargo or build script that must not reach the nested build.
fn leaks(var: &str) -> bool {
    (var.starts_with("CARGO_") && var != "CARGO_HOME")
        || matches!(
            var,
            "RUSTFLAGS"
                | "RUSTDOCFLAGS"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "TARGET"
                | "HOST"
                | "OUT_DIR"
                | "OPT_LEVEL"
                | "PROFILE"
                | "DEBUG"
                | "NUM_JOBS"
                | "RUSTC_LINKER"
                | "__CARGO_FIX_PLZ"
                | "RUSTC_BOOTSTRAP"
        )
}

/// What the nested build produced.
pub(crate) struct Built {
    /// The crate's name (as in its `[lib]`), or the binary's.
    pub name: String,
    /// The bitcode to link, in link order: archives (a staticlib, rlibs) and objects.
    pub inputs: Vec<PathBuf>,
    /// The kernel crate's source files, from cargo's dep-info.
    pub sources: Vec<PathBuf>,
    /// Cargo's `compiler-artifact` message for a program's target.
    pub message: Option<serde_json::Value>,
}

fn toml_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// The packages of the workspace `manifest` belongs to, from `cargo metadata --no-deps`.
fn workspace_packages(n: &Nested<'_>, manifest: &Path) -> Result<Vec<serde_json::Value>> {
    packages_of(n.tc, n.args, manifest)
}

/// [`workspace_packages`], before a build is set up.
fn packages_of(
    tc: &Toolchain,
    args: &CargoArgs,
    manifest: &Path,
) -> Result<Vec<serde_json::Value>> {
    let out = crate::tools::run(
        Command::new(&tc.cargo)
            .env("RUSTC", &tc.rustc)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(manifest)
            .args(args.manifest_flags()),
    )?;
    let mut meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| BuildError::Toolchain(format!("reading `cargo metadata`: {e}")))?;
    Ok(meta["packages"]
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default())
}

/// The package at `manifest`; an error naming the members to pick from with `-p` when
/// `manifest` is a workspace's without a package of its own.
fn package(n: &Nested<'_>, manifest: &Path) -> Result<serde_json::Value> {
    let canon = manifest.canonicalize().ok();
    let packages = workspace_packages(n, manifest)?;
    let at = |p: &serde_json::Value| {
        p["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).canonicalize().ok())
            == canon
    };
    if let Some(p) = packages.iter().find(|p| at(p)) {
        return Ok(p.clone());
    }
    Err(BuildError::Toolchain(format!(
        "{} is a workspace's manifest with no package of its own: name a member with -p ({})",
        manifest.display(),
        names(&packages).join(", ")
    )))
}

/// The packages' names.
fn names(packages: &[serde_json::Value]) -> Vec<&str> {
    packages.iter().filter_map(|p| p["name"].as_str()).collect()
}

/// Whether the package `p` (of `cargo metadata`) is the one `spec` (`NAME` or
/// `NAME@VERSION`, as `cargo -p` takes it) names.
fn is_spec(p: &serde_json::Value, spec: &str) -> bool {
    let (name, version) = spec.split_once('@').unwrap_or((spec, ""));
    p["name"] == name && (version.is_empty() || p["version"].as_str() == Some(version))
}

/// The folder of the member `spec` (`NAME` or `NAME@VERSION`, as `cargo -p` takes it)
/// of the workspace `manifest` belongs to.
pub(crate) fn member(n: &Nested<'_>, manifest: &Path, spec: &str) -> Result<PathBuf> {
    let packages = workspace_packages(n, manifest)?;
    let found = packages.iter().find(|p| is_spec(p, spec));
    found
        .and_then(|p| p["manifest_path"].as_str())
        .and_then(|m| Path::new(m).parent())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            BuildError::Toolchain(format!(
                "package ID specification `{spec}` did not match any packages of the \
                 workspace of {} (its members: {})",
                manifest.display(),
                names(&packages).join(", ")
            ))
        })
}

/// The targets of the package at `manifest` (or of its member `args.package`) whose
/// tests `cargo test` runs: its library, binaries and integration tests, each with its
/// source file, in that order.
pub(crate) fn test_targets(
    tc: &Toolchain,
    args: &CargoArgs,
    manifest: &Path,
) -> Result<Vec<(TestTarget, PathBuf)>> {
    let packages = packages_of(tc, args, manifest)?;
    let canon = manifest.canonicalize().ok();
    let package = packages.iter().find(|p| match &args.package {
        Some(spec) => is_spec(p, spec),
        None => {
            p["manifest_path"]
                .as_str()
                .and_then(|m| Path::new(m).canonicalize().ok())
                == canon
        }
    });
    let Some(package) = package else {
        return Err(BuildError::Toolchain(format!(
            "no package to test at {} (its workspace's members: {})",
            manifest.display(),
            names(&packages).join(", ")
        )));
    };
    let mut targets: Vec<(TestTarget, PathBuf)> = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["test"].as_bool().unwrap_or(false))
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_owned();
            let kinds = t["kind"].as_array()?;
            let kind = |k: &str| kinds.iter().any(|x| x == k);
            let target = if kind("lib") || kind("rlib") || kind("staticlib") {
                TestTarget::Lib
            } else if kind("bin") {
                TestTarget::Bin(name)
            } else if kind("test") {
                TestTarget::Integration(name)
            } else {
                return None;
            };
            Some((target, PathBuf::from(t["src_path"].as_str()?)))
        })
        .collect();
    targets.sort();
    Ok(targets)
}

/// Whether the crate of `manifest` depends on libc-hostcall.
fn depends_on_libc(n: &Nested<'_>, manifest: &Path) -> Result<bool> {
    Ok(package(n, manifest)?["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|d| d["name"] == "libc-hostcall"))
}

/// Writes the target spec into `out` (once per content) and returns its path.
fn target_spec(out: &Path) -> Result<PathBuf> {
    let spec = out.join("nvptx64-linux-gnu.json");
    crate::cache::write_if_changed(&spec, TARGET_SPEC)?;
    Ok(spec)
}

/// Where and how nested builds run: the toolchain, the patched rust-src, the shared
/// target dir, the builder's output folder, what the build reports, and the user's Cargo
/// options.
pub(crate) struct Nested<'a> {
    pub tc: &'a Toolchain,
    pub args: &'a CargoArgs,
    pub library: &'a Path,
    pub target_dir: &'a Path,
    pub out: &'a Path,
    pub progress: crate::Progress,
}

/// `cargo SUBCOMMAND --profile NESTED` (`rustc`, or `build` when no flags for rustc
/// follow) for the GPU target in a cleaned environment, with the flags every nested
/// build shares (so that all of them use one build of std), after `profile`'s settings
/// for `[profile.NESTED]` (`--config` values, which the shared flags override); the
/// caller adds the target to build and the flags for rustc.
fn nested_cargo(
    n: &Nested<'_>,
    manifest: &Path,
    profile: &[String],
    (subcommand, nested): (&str, &str),
) -> Result<Command> {
    let (tc, library, target_dir) = (n.tc, n.library, n.target_dir);
    let spec = target_spec(n.out)?;
    let mut cmd = Command::new(&tc.cargo);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(leaks) {
            cmd.env_remove(&k);
        }
    }
    cmd.env("RUSTC", &tc.rustc)
        .env("__CARGO_TESTS_ONLY_SRC_ROOT", library)
        .arg(subcommand)
        .args(["--profile", nested])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target")
        .arg(&spec)
        .arg("--target-dir")
        .arg(target_dir)
        .args([
            "-Zbuild-std=std,panic_abort",
            "-Zjson-target-spec",
            "-Zprofile-rustflags",
        ])
        .arg(format!(
            "--message-format={}",
            n.args.nested_message_format()
        ));
    for setting in profile {
        cmd.arg("--config").arg(setting);
    }
    // Built for size: on this toolchain a module built so has about half the PTX of
    // O2/O3 and takes half the JIT time (29k lines in 9.1 s against 51-54k in 21-22 s);
    // `opt` then runs default<O2> over the linked module.
    // No debug information (PTX would carry DWARF) and no incremental state, whatever
    // profile is built into (`test` inherits both from `dev`).
    for (key, value) in [
        ("opt-level", "\"s\""),
        ("codegen-units", "1"),
        ("debug", "false"),
        ("incremental", "false"),
    ] {
        cmd.args(["--config", &format!("profile.{nested}.{key}={value}")]);
    }
    let flags = toml_list(&libc_rustflags());
    for c in X86_64_CFG_CRATES {
        cmd.args([
            "--config",
            &format!("profile.{nested}.package.{c}.rustflags={flags}"),
        ]);
    }
    Ok(cmd)
}

/// One `compiler-artifact` message of a nested build.
struct Artifact {
    /// The target's crate name.
    name: String,
    /// Whether it is of the crate `manifest` names (not a dependency).
    ours: bool,
    kinds: Vec<String>,
    filenames: Vec<PathBuf>,
    executable: Option<PathBuf>,
    /// The message itself.
    message: serde_json::Value,
}

/// Runs a nested build and returns its artifacts; a failed build is an error naming
/// `manifest` (with cargo's diagnostics on stderr). With JSON messages
/// ([`CargoArgs::json_messages`]) its messages are printed on stdout as they come, but
/// `build-finished` (the GPU build goes on) and the artifact of a program (its
/// "executable" is the link line the builder reads: the program's artifact is the GPU
/// build's, which the tool reports).
fn run_nested(mut cmd: Command, manifest: &Path, n: &Nested<'_>) -> Result<Vec<Artifact>> {
    let forward = n.args.json_messages();
    let quiet = !n.progress.shows_cargo();
    cmd.stdout(Stdio::piped()).stderr(if quiet {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });
    let mut child = cmd
        .spawn()
        .map_err(BuildError::io(format!("running {:?}", cmd.get_program())))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let manifest_canon = manifest.canonicalize().ok();
    let mut artifacts = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(BuildError::io("reading cargo's output"))?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if forward && msg["reason"] != "build-finished" && msg["executable"].is_null() {
            println!("{line}");
        }
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        };
        artifacts.push(Artifact {
            name: msg["target"]["name"]
                .as_str()
                .unwrap_or_default()
                .replace('-', "_"),
            ours: msg["manifest_path"]
                .as_str()
                .and_then(|m| Path::new(m).canonicalize().ok())
                .is_some_and(|m| Some(m) == manifest_canon),
            kinds: strings(&msg["target"]["kind"]),
            filenames: strings(&msg["filenames"])
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            executable: msg["executable"].as_str().map(PathBuf::from),
            message: msg,
        });
    }
    let output = child
        .wait_with_output()
        .map_err(BuildError::io("waiting for cargo"))?;
    if !output.status.success() {
        if quiet {
            eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        }
        return Err(BuildError::Cargo {
            krate: manifest.to_path_buf(),
            status: output.status.to_string(),
        });
    }
    Ok(artifacts)
}

/// Builds the crate at `krate` into a staticlib for the GPU target.
pub(crate) fn build(n: &Nested<'_>, krate: &Path) -> Result<Built> {
    let library = n.library;
    let manifest = krate.join("Cargo.toml");
    let mut profile = crate::profile::config(n.tc, &manifest, n.args.profile_name(), "release")?;
    // A kernel aborts on panic whatever the profile says: its launch has no frame to
    // catch an unwinding panic in (binaries unwind, `crate::unwind`).
    profile.push(crate::profile::ABORT.to_owned());
    let mut cmd = nested_cargo(n, &manifest, &profile, ("rustc", "release"))?;
    cmd.arg("--lib")
        .args(n.args.manifest_flags())
        .args(n.args.feature_flags());
    if depends_on_libc(n, &manifest)? {
        // A kernel crate that never names libc-hostcall (nothing to import when it needs
        // no GPU coordinates) would be built without it, and std's libc calls would go
        // unresolved: link it in whether named or not (these flags reach the kernel
        // crate only).
        cmd.args([
            "--",
            "-Zunstable-options",
            "--extern",
            "force:libc_hostcall",
        ]);
    }
    let ours = run_nested(cmd, &manifest, n)?
        .into_iter()
        .find(|a| a.ours && a.kinds.iter().any(|k| k == "staticlib"));
    let Some((name, staticlib)) = ours.and_then(|a| {
        let lib = a
            .filenames
            .into_iter()
            .find(|f| f.extension().is_some_and(|x| x == "a"))?;
        Some((a.name, lib))
    }) else {
        return Err(BuildError::Toolchain(format!(
            "{} produced no staticlib: its [lib] needs crate-type = [\"staticlib\"]",
            manifest.display()
        )));
    };
    let sources = dep_info(&staticlib.with_extension("d"), library);
    Ok(Built {
        name,
        inputs: vec![staticlib],
        sources,
        message: None,
    })
}

/// The linker of a binary's nested build: rustc hands it every bitcode object and rlib
/// the binary needs, in link order, and it writes that list, one argument a line, as the
/// "executable", with the objects (rustc's temporary files) copied into `<output>.o/`.
/// The builder links the bitcode itself.
const LINK_LINE_SCRIPT: &str = r#"#!/bin/sh
# ptx-builder: writes the link line, one argument a line, to the -o file.
out=
prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
rm -rf "$out.o" && mkdir -p "$out.o" || exit 1
for a in "$@"; do
  case $a in
    *.o) cp "$a" "$out.o/" || exit 1; printf '%s\n' "$out.o/${a##*/}" ;;
    *) printf '%s\n' "$a" ;;
  esac
done > "$out"
"#;

/// Builds `program` of the crate at `krate` for the GPU target (its `fn main` run by
/// the kernel `START_KERNEL`) and returns the bitcode its link would take.
pub(crate) fn build_bin(n: &Nested<'_>, krate: &Path, program: &Program) -> Result<Built> {
    let (library, out) = (n.library, n.out);
    let manifest = krate.join("Cargo.toml");
    let bin = match program {
        Program::Bin(Some(b)) | Program::Example(b) => b.clone(),
        Program::Bin(None) => default_bin(n, &manifest)?,
        Program::Test(t) => t.name("lib").to_owned(),
    };
    // The binary's profile, for both runs (`crate::profile`).
    let nested = program.nested_profile();
    let chosen = match program {
        Program::Test(_) => n.args.test_profile_name(),
        _ => n.args.profile_name(),
    };
    let profile = crate::profile::config(n.tc, &manifest, chosen, nested)?;
    // libc-hostcall with its start kernel, built against the same std (same flags), for
    // rustc to link into the binary as though it were a dependency.
    // Its package pins every crate it builds to one version (`crate::libc_crate`), so
    // its lockfile, written here, holds nothing `--locked` could check.
    let libc_manifest = crate::libc_crate::package(out)?;
    let mut cmd = nested_cargo(n, &libc_manifest, &profile, ("build", nested))?;
    cmd.arg("--lib").args(n.args.network_flags());
    let runtime = run_nested(cmd, &libc_manifest, n)?;
    let rmeta = runtime
        .iter()
        .filter(|a| a.name == crate::libc_crate::CRATE)
        .flat_map(|a| &a.filenames)
        .find(|f| f.extension().is_some_and(|x| x == "rmeta"))
        .cloned()
        .ok_or_else(|| BuildError::Toolchain("libc-hostcall built no rlib".into()))?;

    // Named by its content, so that a change to it reaches cargo's fingerprint (its path
    // is one of rustc's flags) and relinks every binary.
    let linker = out.join(format!(
        "ptx-link-line-{}",
        crate::cache::short_hash(LINK_LINE_SCRIPT.as_bytes(), 4)
    ));
    if crate::cache::write_if_changed(&linker, LINK_LINE_SCRIPT)? {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&linker, std::fs::Permissions::from_mode(0o755)).map_err(
            BuildError::io(format!("making {} executable", linker.display())),
        )?;
    }
    let mut cmd = nested_cargo(n, &manifest, &profile, ("rustc", nested))?;
    cmd.args(program.cargo_args(&bin))
        .args(n.args.manifest_flags())
        .args(n.args.feature_flags())
        .args(["--", "-C"])
        .arg(format!("linker={}", linker.display()))
        .args(["-Zunstable-options", "--extern"])
        .arg(format!(
            "force:libc_hostcall={}",
            rmeta.with_extension("rlib").display()
        ))
        .arg("--extern")
        .arg(format!("force:libc_hostcall={}", rmeta.display()));
    let mut dirs: Vec<&Path> = runtime
        .iter()
        .flat_map(|a| &a.filenames)
        .filter_map(|f| f.parent())
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        cmd.arg("-L").arg(format!("dependency={}", d.display()));
    }
    // The linked target (a library's tests are of kind `lib`, as the library is).
    let ours = run_nested(cmd, &manifest, n)?.into_iter().find(|a| {
        a.ours && a.executable.is_some() && a.kinds.iter().any(|k| k == program.artifact_kind())
    });
    let bin = match (&ours, program) {
        (Some(a), Program::Test(_)) => a.name.clone(),
        _ => bin,
    };
    let Some((line, message)) = ours.and_then(|a| Some((a.executable?, a.message))) else {
        return Err(BuildError::Toolchain(format!(
            "{} built no {} `{bin}`",
            manifest.display(),
            program.artifact_kind()
        )));
    };
    let text = std::fs::read_to_string(&line)
        .map_err(BuildError::io(format!("reading {}", line.display())))?;
    let inputs = link_inputs(&text);
    let sources = dep_info(&line.with_extension("d"), library);
    Ok(Built {
        name: bin,
        inputs,
        sources,
        message: Some(message),
    })
}

/// The bitcode a link line names: objects and archives, in order, up to the output.
fn link_inputs(line: &str) -> Vec<PathBuf> {
    let mut args = line.lines();
    let mut inputs = Vec::new();
    while let Some(a) = args.next() {
        if a == "-o" {
            args.next();
            continue;
        }
        let p = Path::new(a);
        if !a.starts_with('-') && p.extension().is_some_and(|x| x == "o" || x == "rlib") {
            inputs.push(p.to_path_buf());
        }
    }
    inputs
}

/// The binary `cargo run` would pick: the package's `default-run`, else its only one;
/// an error listing them when there are several.
fn default_bin(n: &Nested<'_>, manifest: &Path) -> Result<String> {
    let package = package(n, manifest)?;
    if let Some(bin) = package["default_run"].as_str() {
        return Ok(bin.to_owned());
    }
    let bins: Vec<String> = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    match bins.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(BuildError::Toolchain(format!(
            "{} has no binary target (no src/main.rs or [[bin]])",
            manifest.display()
        ))),
        many => Err(BuildError::Toolchain(format!(
            "{} has several binaries ({}): name one with --bin, or set `default-run`",
            manifest.display(),
            many.join(", ")
        ))),
    }
}

/// Source files listed in a cargo dep-info file, outside the rust-src copy.
fn dep_info(d: &Path, library: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(d) else {
        return Vec::new();
    };
    let deps = text.split_once(": ").map_or("", |(_, deps)| deps);
    let mut files = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            ' ' | '\n' => {
                if !cur.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut cur)));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        files.push(PathBuf::from(cur));
    }
    files.retain(|f| !f.starts_with(library));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_cargo_variables_are_dropped_but_home_is_kept() {
        assert!(leaks("CARGO_PKG_NAME") && leaks("RUSTFLAGS") && leaks("OUT_DIR"));
        assert!(!leaks("CARGO_HOME") && !leaks("PATH") && !leaks("RUSTUP_TOOLCHAIN"));
    }

    #[test]
    fn dep_info_splits_escaped_spaces_and_drops_std_sources() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("x.d");
        std::fs::write(&d, "/t/libk.a: /src/a\\ b.rs /lib/std/x.rs /src/c.rs\n").unwrap();
        let got = dep_info(&d, Path::new("/lib"));
        assert_eq!(
            got,
            [PathBuf::from("/src/a b.rs"), PathBuf::from("/src/c.rs")]
        );
    }
}
