//! The profile a binary is built with (`--profile`, default `release`), for both nested
//! builds: the binary's and its libc-hostcall's.
//!
//! A binary's libc-hostcall is built by a cargo run of its own (`cargo::build_bin`), in
//! libc-hostcall's workspace, and std is built anew in each run under that run's
//! profile. Were the binary's profile to set `overflow-checks` or `debug-assertions`,
//! its std and libc-hostcall's would differ, and rustc would meet two `core`s in one link
//! (E0152, "duplicate lang item"). So both runs build as `release` with the chosen
//! profile's settings given as `--config` values for `[profile.release]`: the profile's
//! table in the binary's workspace manifest, over those of the profiles it inherits
//! from, over Cargo's defaults for `dev` where the chain starts there (its checks on).
//! The builder's own settings come after them and win (`opt-level`, `codegen-units`): a
//! GPU build is always optimized. `panic` is the profile's for a binary (Cargo's default
//! `unwind`, lowered by `crate::unwind`) and [`ABORT`] for a kernel library.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{Toolchain, run};
use crate::{BuildError, Result};

/// The setting that makes a build abort on panic.
pub(crate) const ABORT: &str = "profile.release.panic=\"abort\"";

/// `--config` values (without the flag) that give `[profile.INTO]` (the profile the
/// nested builds name: `release`, or `test` for libtest's harness) the settings of
/// profile `name` of the workspace `manifest` belongs to, one per key.
pub(crate) fn config(
    tc: &Toolchain,
    manifest: &Path,
    name: &str,
    into: &str,
) -> Result<Vec<String>> {
    let root = workspace_manifest(tc, manifest)?;
    let text = std::fs::read_to_string(&root)
        .map_err(BuildError::io(format!("reading {}", root.display())))?;
    config_of(&text, name, into)
        .map_err(|e| BuildError::Toolchain(format!("profile `{name}` of {}: {e}", root.display())))
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

/// Cargo's own settings of its root profiles that change how std is built (written out
/// for `release` too: the profile built into may be `test`, whose root is `dev`).
fn builtin(root: &str) -> &'static [(&'static str, bool)] {
    match root {
        "dev" => &[("debug-assertions", true), ("overflow-checks", true)],
        _ => &[("debug-assertions", false), ("overflow-checks", false)],
    }
}

/// The profile `name` of a workspace manifest's text as `--config` values for
/// `[profile.INTO]`.
fn config_of(manifest: &str, name: &str, into: &str) -> std::result::Result<Vec<String>, String> {
    let prefix = format!("profile.{into}");
    let doc: toml::Table = manifest.parse().map_err(|e| format!("{e}"))?;
    let profiles = doc.get("profile").and_then(toml::Value::as_table);
    // The chain from `name` to its root (`dev` or `release`), leaf first.
    let mut chain: Vec<(&str, Option<&toml::Table>)> = Vec::new();
    let mut at = name;
    loop {
        if chain.iter().any(|(n, _)| *n == at) {
            return Err(format!("its `inherits` chain comes back to `{at}`"));
        }
        let table = profiles
            .and_then(|p| p.get(at))
            .and_then(toml::Value::as_table);
        chain.push((at, table));
        let inherits = table
            .and_then(|t| t.get("inherits"))
            .and_then(toml::Value::as_str);
        at = match (at, inherits) {
            ("dev" | "release", _) => break,
            (_, Some(parent)) => parent,
            ("test", None) => "dev",
            ("bench", None) => "release",
            (_, None) if table.is_none() => return Err(format!("profile `{at}` is not defined")),
            (_, None) => return Err(format!("profile `{at}` has no `inherits` key")),
        };
    }
    let mut settings: Vec<(String, String)> = Vec::new();
    let mut set = |key: String, value: String| match settings.iter_mut().find(|(k, _)| *k == key) {
        Some(kv) => kv.1 = value,
        None => settings.push((key, value)),
    };
    let root = chain.last().map_or("release", |(n, _)| n);
    for (k, v) in builtin(root) {
        set(format!("{prefix}.{k}"), v.to_string());
    }
    for (_, table) in chain.iter().rev() {
        let mut leaves = Vec::new();
        if let Some(t) = table {
            flatten(&prefix, t, &mut leaves);
        }
        for (k, v) in leaves {
            if k != format!("{prefix}.inherits") {
                set(k, v);
            }
        }
    }
    Ok(settings
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect())
}

/// One key and value per leaf of `table`, its key under `prefix` (package names quoted).
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
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
            v => out.push((key, v.to_string())),
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
        let mut got = config_of(manifest, "release", "release").unwrap();
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

    const RELEASE_CHECKS: [&str; 2] = [
        "profile.release.debug-assertions=false",
        "profile.release.overflow-checks=false",
    ];

    #[test]
    fn a_manifest_without_a_release_profile_gives_cargos_release_checks() {
        assert_eq!(
            config_of("[package]\nname = \"p\"\n", "release", "release").unwrap(),
            RELEASE_CHECKS
        );
        assert_eq!(
            config_of("[profile.dev]\nopt-level = 1\n", "release", "release").unwrap(),
            RELEASE_CHECKS
        );
        assert_eq!(config_of("", "bench", "release").unwrap(), RELEASE_CHECKS);
    }

    #[test]
    fn tests_build_into_the_test_profile_with_the_chosen_settings() {
        // `cargo gpu test`: Cargo's `test` profile, checks on.
        assert_eq!(
            config_of("[profile.release]\nlto = true\n", "test", "test").unwrap(),
            [
                "profile.test.debug-assertions=true",
                "profile.test.overflow-checks=true"
            ]
        );
        // `cargo gpu test --release`: the release settings, into the test profile.
        assert_eq!(
            config_of("[profile.release]\nlto = true\n", "release", "test").unwrap(),
            [
                "profile.test.debug-assertions=false",
                "profile.test.overflow-checks=false",
                "profile.test.lto=true"
            ]
        );
    }

    #[test]
    fn a_profile_takes_what_it_inherits_under_its_own_settings() {
        let manifest = r#"
[profile.release]
lto = "thin"
debug = 1

[profile.checked]
inherits = "release"
overflow-checks = true
debug = 0

[profile.checked.package.serde]
opt-level = 1

[profile.dev]
opt-level = 1

[profile.gpu-dev]
inherits = "dev"
debug-assertions = false
"#;
        let mut checked = config_of(manifest, "checked", "release").unwrap();
        checked.sort();
        assert_eq!(
            checked,
            [
                "profile.release.debug-assertions=false",
                "profile.release.debug=0",
                "profile.release.lto=\"thin\"",
                "profile.release.overflow-checks=true",
                "profile.release.package.serde.opt-level=1",
            ]
        );
        // `dev` starts from Cargo's checks, which its descendants may turn off.
        let mut dev = config_of(manifest, "gpu-dev", "release").unwrap();
        dev.sort();
        assert_eq!(
            dev,
            [
                "profile.release.debug-assertions=false",
                "profile.release.opt-level=1",
                "profile.release.overflow-checks=true",
            ]
        );
        let mut test = config_of("", "test", "release").unwrap();
        test.sort();
        assert_eq!(
            test,
            [
                "profile.release.debug-assertions=true",
                "profile.release.overflow-checks=true",
            ]
        );
    }

    #[test]
    fn an_unknown_or_looping_profile_is_refused_naming_it() {
        assert_eq!(
            config_of("", "fast", "release").unwrap_err(),
            "profile `fast` is not defined"
        );
        let looping = "[profile.a]\ninherits = \"b\"\n[profile.b]\ninherits = \"a\"\n";
        assert_eq!(
            config_of(looping, "a", "release").unwrap_err(),
            "its `inherits` chain comes back to `a`"
        );
        assert_eq!(
            config_of("[profile.x]\nlto = true\n", "x", "release").unwrap_err(),
            "profile `x` has no `inherits` key"
        );
    }
}
