//! The nested `cargo build -Zbuild-std` of the kernel crate, in its own target dir and
//! a cleaned environment (nothing of the outer build script's cargo leaks in).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::fixups::{TARGET_SPEC, libc_rustflags};
use crate::tools::Toolchain;
use crate::{BuildError, Result};

/// The crates that take the x86_64 cfg of `fixups/libc.rustflags`.
const X86_64_CFG_CRATES: [&str; 2] = ["libc", "unwind"];

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
    /// The kernel crate's name (as in its `[lib]`).
    pub name: String,
    /// The staticlib whose members are bitcode.
    pub staticlib: PathBuf,
    /// The kernel crate's source files, from cargo's dep-info.
    pub sources: Vec<PathBuf>,
}

fn toml_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// Whether the crate of `manifest` depends on libc-hostcall.
fn depends_on_libc(tc: &Toolchain, manifest: &Path) -> Result<bool> {
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
            .arg(manifest),
    )?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| BuildError::Toolchain(format!("reading `cargo metadata`: {e}")))?;
    let canon = manifest.canonicalize().ok();
    Ok(meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            canon.is_none()
                || p["manifest_path"]
                    .as_str()
                    .map(|m| Path::new(m).canonicalize().ok())
                    == Some(canon.clone())
        })
        .flat_map(|p| p["dependencies"].as_array().into_iter().flatten())
        .any(|d| d["name"] == "libc-hostcall"))
}

/// Builds the crate at `krate` into a staticlib for the GPU target.
pub(crate) fn build(
    tc: &Toolchain,
    krate: &Path,
    library: &Path,
    target_dir: &Path,
    out: &Path,
    quiet: bool,
) -> Result<Built> {
    let spec = out.join("nvptx64-linux-gnu.json");
    if std::fs::read_to_string(&spec).ok().as_deref() != Some(TARGET_SPEC) {
        std::fs::write(&spec, TARGET_SPEC)
            .map_err(BuildError::io(format!("writing {}", spec.display())))?;
    }
    let manifest = krate.join("Cargo.toml");
    let mut cmd = Command::new(&tc.cargo);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(leaks) {
            cmd.env_remove(&k);
        }
    }
    cmd.env("RUSTC", &tc.rustc)
        .env("__CARGO_TESTS_ONLY_SRC_ROOT", library)
        .arg("rustc")
        .arg("--lib")
        .arg("--release")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target")
        .arg(&spec)
        .arg("--target-dir")
        .arg(target_dir)
        .args([
            "-Zbuild-std=std,panic_abort",
            "-Zjson-target-spec",
            "-Zprofile-rustflags",
        ])
        .arg("--message-format=json-render-diagnostics")
        // Built for size: half the PTX of O2/O3 and half the JIT time (DESIGN.md §2);
        // `opt` then runs default<O2> over the linked module.
        .args(["--config", "profile.release.opt-level=\"s\""])
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.codegen-units=1"]);
    let flags = toml_list(&libc_rustflags());
    for c in X86_64_CFG_CRATES {
        cmd.args([
            "--config",
            &format!("profile.release.package.{c}.rustflags={flags}"),
        ]);
    }
    if depends_on_libc(tc, &manifest)? {
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
    cmd.stdout(Stdio::piped()).stderr(if quiet {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });

    let mut child = cmd
        .spawn()
        .map_err(BuildError::io(format!("running {}", tc.cargo.display())))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let manifest_canon = manifest.canonicalize().ok();
    let mut staticlib = None;
    let mut name = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(BuildError::io("reading cargo's output"))?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let is_staticlib = msg["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|x| x == "staticlib"));
        let ours = msg["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).canonicalize().ok())
            .is_some_and(|m| Some(m) == manifest_canon);
        if is_staticlib && ours {
            name = msg["target"]["name"].as_str().map(|s| s.replace('-', "_"));
            staticlib = msg["filenames"]
                .as_array()
                .and_then(|f| {
                    f.iter()
                        .filter_map(|x| x.as_str())
                        .find(|x| x.ends_with(".a"))
                })
                .map(PathBuf::from);
        }
    }
    let output = child
        .wait_with_output()
        .map_err(BuildError::io("waiting for cargo"))?;
    if !output.status.success() {
        if quiet {
            eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        }
        return Err(BuildError::Cargo {
            krate: manifest,
            status: output.status.to_string(),
        });
    }
    let (Some(name), Some(staticlib)) = (name, staticlib) else {
        return Err(BuildError::Toolchain(format!(
            "{} produced no staticlib: its [lib] needs crate-type = [\"staticlib\"]",
            manifest.display()
        )));
    };
    let sources = dep_info(&staticlib.with_extension("d"), library);
    Ok(Built {
        name,
        staticlib,
        sources,
    })
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
