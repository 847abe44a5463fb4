//! What the Buck2 files restate of Cargo's TOML, which Starlark cannot read: stage0/BUCK
//! pins, by URL and SHA-256, the toolchain rust-toolchain.toml names, and cargo.bzl the
//! workspace's version. Everything else the Buck2 side declares, `buck2 build //...`
//! checks itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The artefact names of stage0/BUCK's `ARTEFACTS` table.
fn artefacts(buck: &str) -> BTreeSet<String> {
    let start = buck
        .find("ARTEFACTS = {")
        .expect("stage0/BUCK has ARTEFACTS");
    buck[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn stage0_pins_the_toolchain_rust_toolchain_toml_names() {
    let toolchain: toml::Table = read("rust-toolchain.toml").parse().unwrap();
    let channel = toolchain["toolchain"]["channel"]
        .as_str()
        .unwrap()
        .to_owned();
    let date = channel.strip_prefix("nightly-").expect("a dated nightly");
    let stage0 = read("stage0/BUCK");
    assert!(
        stage0.contains(&format!("DATE = \"{date}\"")),
        "stage0/BUCK pins another date than {channel}"
    );
    let names = artefacts(&stage0);
    for needed in ["rustc", "cargo", "rust-std", "rust-src", "llvm-tools"] {
        assert!(names.contains(needed), "stage0 lacks {needed}");
    }
    let hashes: Vec<&str> = stage0
        .lines()
        .filter(|l| l.trim_start().starts_with('"') && l.contains("\", \""))
        .filter_map(|l| l.rsplit('"').nth(1))
        .collect();
    assert_eq!(hashes.len(), 7, "one SHA-256 per artefact");
    for h in hashes {
        assert!(
            h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()),
            "bad SHA-256 {h:?}"
        );
    }
}

#[test]
fn cargo_bzl_restates_the_workspace_version() {
    let cargo: toml::Table = read("Cargo.toml").parse().unwrap();
    let version = cargo["workspace"]["package"]["version"].as_str().unwrap();
    assert!(
        read("cargo.bzl").contains(&format!("\"CARGO_PKG_VERSION\": \"{version}\"")),
        "cargo.bzl must give CARGO_PKG_VERSION = {version:?}"
    );
}
