//! Cargo's flags reach the GPU build with Cargo's meaning. No GPU is needed for what is
//! tested: the fixture's example builds only when `-p`, `--manifest-path`, `--example`,
//! `--features`, `--no-default-features` and `--profile` all reach the build; where no
//! GPU is found, the built program says so in its one sentence and its running is
//! reported SKIPPED.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{cargo_gpu, skipped_without_gpu, text};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flags")
}

#[test]
fn a_workspace_members_example_builds_with_its_features_and_profile() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("flags.gpu");
    let built = build_example(&exe, true, &["-q"]);
    let stderr = text(&built.stderr);
    assert!(built.status.success(), "the build failed: {stderr}");
    for said in ["cargo gpu: wrote", "Compiling", "Linking", "Finished"] {
        assert!(!stderr.contains(said), "-q printed {said:?}: {stderr}");
    }
    let ran = Command::new(&exe).output().expect("the program starts");
    if skipped_without_gpu(&ran, "running the example built with every flag") {
        return;
    }
    let stderr = text(&ran.stderr);
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

/// The fixture's example built with every flag it needs (or without `--features
/// wanted`, so that it fails) and `extra`.
fn build_example(exe: &Path, wanted: bool, extra: &[&str]) -> std::process::Output {
    let manifest = workspace().join("Cargo.toml");
    let mut args = vec![
        "build",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "-p",
        "app",
        "--example",
        "flags",
        "--no-default-features",
        "--profile",
        "gpu-checked",
        "--locked",
        "--offline",
        "--fast-compile",
        "-o",
        exe.to_str().unwrap(),
    ];
    if wanted {
        args.extend(["--features", "wanted"]);
    }
    args.extend(extra);
    cargo_gpu(&args)
}

#[test]
fn message_format_json_gives_cargos_messages_and_the_gpu_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("flags.gpu");
    let built = build_example(&exe, true, &["--message-format", "json"]);
    assert!(built.status.success(), "{}", text(&built.stderr));
    let messages: Vec<serde_json::Value> = text(&built.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let last = messages.last().expect("messages");
    assert_eq!(last["reason"], "build-finished");
    assert_eq!(last["success"], true);
    let finished = messages
        .iter()
        .filter(|m| m["reason"] == "build-finished")
        .count();
    assert_eq!(finished, 1, "one build-finished, the GPU build's");
    let executables: Vec<_> = messages
        .iter()
        .filter(|m| !m["executable"].is_null())
        .collect();
    assert_eq!(
        executables.len(),
        1,
        "only the GPU build names an executable"
    );
    let gpu = executables[0];
    assert_eq!(gpu["executable"], exe.to_str().unwrap());
    assert_eq!(gpu["reason"], "compiler-artifact");
    assert_eq!(gpu["target"]["name"], "flags");
    assert_eq!(gpu["target"]["kind"][0], "example");
    let files: Vec<&str> = gpu["filenames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        files[0].ends_with(".ptx") && files[1..].iter().all(|f| f.ends_with(".cubin")),
        "{files:?}"
    );
    assert!(files.iter().all(|f| Path::new(f).exists()), "{files:?}");
}

#[test]
fn a_failed_build_reports_in_the_message_format_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("flags.gpu");
    let json = build_example(&exe, false, &["--message-format", "json"]);
    assert!(!json.status.success());
    let stdout = text(&json.stdout);
    let messages: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        messages.iter().any(|m| m["reason"] == "compiler-message"
            && m["message"]["message"] == "built without `--features wanted`"),
        "{stdout}"
    );
    assert_eq!(
        messages.last().map(|m| m.to_string()).as_deref(),
        Some(r#"{"reason":"build-finished","success":false}"#)
    );
    let short = build_example(&exe, false, &["--message-format", "short"]);
    let stderr = text(&short.stderr);
    assert!(
        stderr.contains("examples/flags.rs:6:1: error: built without `--features wanted`"),
        "{stderr}"
    );
    assert!(short.stdout.is_empty());
}
