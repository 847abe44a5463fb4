//! The release profile of the workspace a binary belongs to, for the nested build of
//! libc-hostcall beside it.
//!
//! A binary's libc-hostcall is built by a cargo run of its own (`cargo::build_bin`), in
//! libc-hostcall's workspace, and std is built anew in each run under that run's
//! profile. Were the binary's workspace to set `overflow-checks` or `debug-assertions`
//! for release, its std and libc-hostcall's would differ, and rustc would meet two
//! `core`s in one link (E0152, "duplicate lang item"). So both runs get the binary's
//! workspace's `[profile.release]`, as `--config` arguments, before the builder's own
//! settings (which come after them and win: `opt-level`, `panic`, `codegen-units`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{Toolchain, run};
use crate::{BuildError, Result};

/// `--config` values (without the flag) that set `[profile.release]` of the workspace
/// `manifest` belongs to, one per key; none when it sets none.
pub(crate) fn release_config(tc: &Toolchain, manifest: &Path) -> Result<Vec<String>> {
    let root = workspace_manifest(tc, manifest)?;
    let text = std::fs::read_to_string(&root)
        .map_err(BuildError::io(format!("reading {}", root.display())))?;
    config_of(&text).map_err(|e| {
        BuildError::Toolchain(format!(
            "reading [profile.release] of {}: {e}",
            root.display()
        ))
    })
}

/// The root manifest of the workspace `manifest` belongs to.
fn workspace_manifest(tc: &Toolchain, manifest: &Path) -> Result<PathBuf> {
    let out = run(Command::new(&tc.cargo)
        .env("RUSTC", &tc.rustc)
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .arg("--manifest-path")
        .arg(manifest))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok(PathBuf::from(path))
}

/// The `[profile.release]` of a manifest's text as `--config` values.
fn config_of(manifest: &str) -> std::result::Result<Vec<String>, toml::de::Error> {
    let doc: toml::Table = manifest.parse()?;
    let mut out = Vec::new();
    if let Some(release) = doc
        .get("profile")
        .and_then(|p| p.get("release"))
        .and_then(toml::Value::as_table)
    {
        flatten("profile.release", release, &mut out);
    }
    Ok(out)
}

/// One `key=value` per leaf of `table`, its key under `prefix` (package names quoted).
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
    for (k, v) in table {
        let bare = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let key = if bare {
            format!("{prefix}.{k}")
        } else {
            format!("{prefix}.{}", toml::Value::String(k.clone()))
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            v => out.push(format!("{key}={v}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_release_setting_becomes_one_config_value() {
        let manifest = r#"
[package]
name = "p"

[profile.release]
overflow-checks = true
debug-assertions = true
opt-level = 3
lto = "thin"

[profile.release.package."*"]
debug = 1

[profile.release.package.serde_json]
opt-level = "z"

[profile.dev]
opt-level = 1
"#;
        let mut got = config_of(manifest).unwrap();
        got.sort();
        assert_eq!(
            got,
            [
                "profile.release.debug-assertions=true",
                "profile.release.lto=\"thin\"",
                "profile.release.opt-level=3",
                "profile.release.overflow-checks=true",
                "profile.release.package.\"*\".debug=1",
                "profile.release.package.serde_json.opt-level=\"z\"",
            ]
        );
    }

    #[test]
    fn a_manifest_without_a_release_profile_gives_none() {
        assert!(config_of("[package]\nname = \"p\"\n").unwrap().is_empty());
        assert!(
            config_of("[profile.dev]\nopt-level = 1\n")
                .unwrap()
                .is_empty()
        );
    }
}
