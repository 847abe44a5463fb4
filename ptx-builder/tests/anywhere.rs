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

/// The same crate gives the same bytes: PTX, and the cubin ptxas compiles in parts and
/// nvJitLink links (with the cubin cache off, so that the second build compiles again),
/// after the crate itself is compiled again. A cubin that differed would miss the cache
/// and cost a user the whole ptxas step a second time.
#[test]
fn the_same_crate_builds_to_the_same_bytes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = root.join("tests/fixtures/custom-profile");
    let build = |out: &Path| {
        let run = Command::new(env!("CARGO_BIN_EXE_ptx-build"))
            .arg(&krate)
            .args(["--bin", "--require-cubins", "--out-dir"])
            .arg(out)
            .env("HOSTCALL_CACHE", "off")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "ptx-build failed:\n{stderr}");
        assert!(
            stderr.contains("compiled by"),
            "ptxas did not run:\n{stderr}"
        );
        let read = |f: &str| std::fs::read(out.join(f)).unwrap();
        (read("module.ptx"), read("module.sm_90.cubin"))
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = build(a.path());
    // rustc compiles the crate again (its source is newer than what it built).
    let main = krate.join("src/main.rs");
    let text = std::fs::read(&main).unwrap();
    std::fs::write(&main, text).unwrap();
    let second = build(b.path());
    assert!(first.0 == second.0, "the PTX differs");
    assert!(first.1 == second.1, "the cubin differs");
}
