//! The `ptx-build` CLI as a user runs it: from another directory (where rustup's
//! default toolchain may be stable, which cannot build std for the GPU), on a kernel
//! crate that depends on libc-hostcall but never names it.

use std::path::Path;
use std::process::Command;

#[test]
fn the_cli_builds_a_crate_that_never_names_libc_from_any_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let out = out.path();
    let run = Command::new(env!("CARGO_BIN_EXE_ptx-build"))
        .arg(root.join("tests/fixtures/names-nothing"))
        .arg("--no-cubins")
        .arg("--out-dir")
        .arg(out)
        .current_dir("/")
        .env_remove("RUSTC")
        .env_remove("CARGO")
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "ptx-build failed:\n{stderr}");
    let ptx = std::fs::read_to_string(out.join("module.ptx")).unwrap();
    assert!(ptx.contains(".entry kmain"), "no kernel in the module");
    // libc-hostcall's own kernel is there: it was linked.
    assert!(
        ptx.contains("__hostcall_thread_exit"),
        "libc-hostcall was not linked"
    );
}

/// The builder's pinned nightly is the repository's: the fixups are written against its
/// rust-src, and an installed builder, with no `rust-toolchain.toml` beside it, uses it.
#[test]
fn the_pinned_toolchain_is_the_repositorys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let toml = std::fs::read_to_string(root.join("../rust-toolchain.toml")).unwrap();
    let channel = toml
        .lines()
        .find_map(|l| l.strip_prefix("channel = "))
        .map(|c| c.trim_matches('"'));
    assert_eq!(channel, Some(ptx_builder::PINNED_TOOLCHAIN));
}
