//! Cargo's flags reach the GPU build with Cargo's meaning. No GPU is needed for what is
//! tested: the fixture's example builds only when `-p`, `--manifest-path`, `--example`,
//! `--features`, `--no-default-features` and `--profile` all reach the build; where no
//! GPU is found, the built program says so in its one sentence and its running is
//! reported SKIPPED.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{cargo_gpu, text};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flags")
}

#[test]
fn a_workspace_members_example_builds_with_its_features_and_profile() {
    let manifest = workspace().join("Cargo.toml");
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("flags.gpu");
    let built = cargo_gpu(&[
        "build",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "-p",
        "app",
        "--example",
        "flags",
        "--features",
        "wanted",
        "--no-default-features",
        "--profile",
        "gpu-checked",
        "--locked",
        "--offline",
        "--fast-compile",
        "-q",
        "-o",
        exe.to_str().unwrap(),
    ]);
    let stderr = text(&built.stderr);
    assert!(built.status.success(), "the build failed: {stderr}");
    for said in ["cargo gpu: wrote", "Compiling", "Linking", "Finished"] {
        assert!(!stderr.contains(said), "-q printed {said:?}: {stderr}");
    }
    let ran = Command::new(&exe).output().expect("the program starts");
    let stderr = text(&ran.stderr);
    if ran.status.code() == Some(hostcall_runtime::EXIT_NO_GPU.into()) {
        assert!(stderr.contains("no NVIDIA GPU is usable here"), "{stderr}");
        println!("running the example: SKIPPED (no GPU here; it built with every flag)");
        return;
    }
    assert!(ran.status.success(), "the example failed: {stderr}");
    assert_eq!(
        text(&ran.stdout),
        "the example, with its feature and profile\n"
    );
}

#[test]
fn a_workspace_without_a_package_asks_for_one_with_p_naming_its_members() {
    let quiet = cargo_gpu(&["build", "-o", "/dev/null", workspace().to_str().unwrap()]);
    let stderr = text(&quiet.stderr);
    assert_eq!(quiet.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains(
            "is a workspace's manifest with no package of its own: name a member with -p (app)"
        ),
        "{stderr}"
    );
    // Without -v the stages are not shown; with it they are.
    assert!(!stderr.contains("ptx-builder: "), "{stderr}");
    let verbose = cargo_gpu(&[
        "build",
        "-v",
        "-o",
        "/dev/null",
        workspace().to_str().unwrap(),
    ]);
    assert!(
        text(&verbose.stderr).contains("ptx-builder: preparing patched rust-src"),
        "{}",
        text(&verbose.stderr)
    );
}

#[test]
fn an_unknown_package_or_profile_is_refused_naming_it() {
    let ws = workspace();
    let no_package = cargo_gpu(&[
        "build",
        "-o",
        "/dev/null",
        "-p",
        "nope",
        ws.to_str().unwrap(),
    ]);
    let stderr = text(&no_package.stderr);
    assert!(
        stderr.contains("package ID specification `nope` did not match any packages")
            && stderr.contains("(its members: app)"),
        "{stderr}"
    );
    let no_profile = cargo_gpu(&[
        "build",
        "-o",
        "/dev/null",
        "-p",
        "app",
        "--profile",
        "fastest",
        ws.to_str().unwrap(),
    ]);
    let stderr = text(&no_profile.stderr);
    assert!(
        stderr.contains("profile `fastest` is not defined"),
        "{stderr}"
    );
    let not_a_manifest = cargo_gpu(&["build", "-o", "/dev/null", "--manifest-path", "x.toml"]);
    assert!(
        text(&not_a_manifest.stderr)
            .contains("the manifest-path must be a path to a Cargo.toml file"),
        "{}",
        text(&not_a_manifest.stderr)
    );
}
