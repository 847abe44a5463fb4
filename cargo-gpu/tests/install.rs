//! `cargo gpu` installs from its published packages, with no checkout: every crate is
//! packaged as `cargo publish` would upload it (`cargo package`), unpacked away from the
//! repository, and `cargo-gpu` installed from its package with the others given as the
//! registry would give them (`[patch.crates-io]`, as no registry here holds them); the
//! installed tool then builds a fresh crate, its libc-hostcall coming from the registry
//! by version. No network: the third-party crates come from Cargo's cache (`--offline`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The published crates, dependencies first; libc-hostcall is outside the workspace (it
/// defines `malloc`, which must never reach a host binary).
const WORKSPACE_CRATES: [&str; 6] = [
    "hostcall-abi",
    "hostcall-client",
    "hostcall-runtime",
    "hostcall-emulator",
    "ptx-builder",
    "cargo-gpu",
];
const LIBC: &str = "libc-hostcall";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The cargo that runs this test, with nothing of this test's own cargo run in its
/// environment.
fn cargo(cwd: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("CARGO_") && k != "CARGO_HOME")
            || ["RUSTFLAGS", "RUSTC", "RUSTDOC", "HOSTCALL_LIBC_DIR"].contains(&k.as_ref())
        {
            cmd.env_remove(&*k);
        }
    }
    cmd.current_dir(cwd);
    cmd
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?} failed:\n{stderr}");
    stderr
}

/// Each published crate and the folder its package was unpacked into.
fn unpacked(crates: &Path) -> Vec<(&'static str, String)> {
    WORKSPACE_CRATES
        .iter()
        .chain([&LIBC])
        .map(|c| {
            let dir = crates.join(format!("{c}-{}", env!("CARGO_PKG_VERSION")));
            (*c, dir.display().to_string())
        })
        .collect()
}

/// `[patch.crates-io]` naming each unpacked package, as `--config` values.
fn patches(crates: &Path) -> Vec<String> {
    unpacked(crates)
        .into_iter()
        .flat_map(|(c, dir)| {
            [
                "--config".to_owned(),
                format!("patch.crates-io.{c}.path={dir:?}"),
            ]
        })
        .collect()
}

#[test]
fn cargo_gpu_installs_from_its_packages_and_builds_a_fresh_crate() {
    let tmp = tempfile::tempdir().unwrap();
    let (pkg, crates) = (tmp.path().join("pkg"), tmp.path().join("crates"));
    let repo = repo();

    // Package as `cargo publish` would, then unpack where no checkout is near.
    let mut package = cargo(&repo);
    package.args([
        "package",
        "--no-verify",
        "--offline",
        "--allow-dirty",
        "--target-dir",
    ]);
    package.arg(&pkg);
    for c in WORKSPACE_CRATES {
        package.args(["-p", c]);
    }
    run(&mut package);
    // libc-hostcall names the workspace's crates by version, which no registry here
    // holds: they are given by path for its lockfile.
    let mut libc = cargo(&repo);
    libc.args([
        "package",
        "--no-verify",
        "--offline",
        "--allow-dirty",
        "--target-dir",
    ])
    .arg(&pkg)
    .arg("--manifest-path")
    .arg(repo.join(LIBC).join("Cargo.toml"));
    for c in ["hostcall-abi", "hostcall-client"] {
        libc.arg("--config").arg(format!(
            "patch.crates-io.{c}.path={:?}",
            repo.join(c).display().to_string()
        ));
    }
    run(&mut libc);
    std::fs::create_dir_all(&crates).unwrap();
    for c in WORKSPACE_CRATES.iter().chain([&LIBC]) {
        let file = pkg
            .join("package")
            .join(format!("{c}-{}.crate", env!("CARGO_PKG_VERSION")));
        run(Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(&crates));
    }
    let ptx_builder = crates.join(format!("ptx-builder-{}", env!("CARGO_PKG_VERSION")));
    assert!(
        ptx_builder
            .join("fixups/0001-alloc-min-align.patch")
            .is_file()
            && ptx_builder
                .join("target_specs/nvptx64-linux-gnu.json")
                .is_file(),
        "ptx-builder's package holds its fixups and target spec"
    );

    // Install from the package; the crates it names come as from the registry.
    let root = tmp.path().join("root");
    run(cargo(tmp.path())
        .args(["install", "--offline", "--debug", "--path"])
        .arg(crates.join(format!("cargo-gpu-{}", env!("CARGO_PKG_VERSION"))))
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(tmp.path().join("install-target"))
        .args(patches(&crates)));
    let installed = root.join("bin/cargo-gpu");
    assert!(installed.is_file());

    // A fresh crate, built by the installed tool: its libc-hostcall is the registry's
    // (this folder's config gives the registry's crates, for the nested builds too).
    let hello = tmp.path().join("hello");
    std::fs::create_dir_all(hello.join("src")).unwrap();
    std::fs::write(
        hello.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        hello.join("src/main.rs"),
        "fn main() {\n    println!(\"hello from an installed cargo gpu\");\n}\n",
    )
    .unwrap();
    let config: String = unpacked(&crates)
        .into_iter()
        .map(|(c, dir)| format!("{c} = {{ path = {dir:?} }}\n"))
        .collect();
    std::fs::create_dir_all(tmp.path().join(".cargo")).unwrap();
    std::fs::write(
        tmp.path().join(".cargo/config.toml"),
        format!("[patch.crates-io]\n{config}"),
    )
    .unwrap();
    let exe = tmp.path().join("hello.gpu");
    let built = Command::new(&installed)
        .current_dir(&hello)
        .args(["gpu", "build", "--offline", "--fast-compile", "-v", "-o"])
        .arg(&exe)
        .env_remove("HOSTCALL_LIBC_DIR")
        // As a user runs it: no toolchain named, so it picks its own pinned nightly.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&built.stderr);
    assert!(
        built.status.success(),
        "the installed cargo gpu failed:\n{log}"
    );
    assert!(
        !log.contains(repo.to_str().unwrap()),
        "the installed tool reached the checkout:\n{log}"
    );
    let libc_from_package = format!(
        "Compiling libc-hostcall v{} ({})",
        env!("CARGO_PKG_VERSION"),
        unpacked(&crates)[WORKSPACE_CRATES.len()].1
    );
    assert!(
        log.contains(&libc_from_package),
        "{libc_from_package}, in:\n{log}"
    );
    let ran = Command::new(&exe).output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    if ran.status.code() == Some(hostcall_runtime::EXIT_NO_GPU.into()) {
        assert!(stderr.contains("no NVIDIA GPU is usable here"), "{stderr}");
        println!("running the fresh crate: SKIPPED (no GPU here; it built)");
        return;
    }
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "hello from an installed cargo gpu\n",
        "{stderr}"
    );
}
