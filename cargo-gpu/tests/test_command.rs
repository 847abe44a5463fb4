//! `cargo gpu test` runs a package's tests as `cargo test` does. The fixture `tested`
//! has unit tests and an integration test (with a dev-dependency, rayon) that pass, fail
//! by assertion, by an unexpected panic and by an `Err`, panic as `#[should_panic]`
//! expects (or with another message), catch a panic, spawn threads, and are ignored.
//! Everywhere: the tests build for the GPU (`--no-run --out-dir`). Without a GPU, each
//! test executable, and `cargo gpu test` itself, end with the no-GPU sentence and code,
//! and the comparison is reported SKIPPED. With one: each target's results (`test NAME
//! ... RESULT` lines, sorted, and the counts) and exit code are `cargo test`'s on the
//! CPU. The same for the conformance suite's spawning programs, each a test of
//! `conformance/spawning`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{cargo_gpu, skipped_without_gpu, text};

use hostcall_runtime::EXIT_NO_GPU;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tested/Cargo.toml")
}

/// libtest's verdicts in `out`: each test's line and the counts, sorted (tests run on
/// threads of their own, in any order), without the time taken.
fn verdicts(out: &str) -> Vec<String> {
    let mut lines: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("test "))
        .map(|l| match l.find("; finished in") {
            Some(at) => l[..at].to_owned(),
            None => l.to_owned(),
        })
        .collect();
    lines.sort();
    lines
}

/// `cargo gpu test --no-run --out-dir out` of `manifest`'s tests (quickly compiled),
/// with `extra` flags.
fn tests_built_into(manifest: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "test",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--locked",
        "--fast-compile",
        "--no-run",
        "--out-dir",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    cargo_gpu(&args)
}

/// `cargo test` of `manifest`'s `target` (`--lib`, `--test squares`) on the CPU: its
/// verdicts and exit code.
fn on_the_cpu(manifest: &Path, target: &[&str], target_dir: &Path) -> (Vec<String>, Option<i32>) {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--locked", "--manifest-path"])
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir)
        .args(target)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("cargo runs");
    (verdicts(&text(&out.stdout)), out.status.code())
}

#[test]
fn a_packages_tests_build_for_the_gpu_and_report_as_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gpu");
    let manifest = fixture();
    let built = tests_built_into(&manifest, &out, &["--message-format", "json"]);
    let stderr = text(&built.stderr);
    assert!(built.status.success(), "{stderr}");
    assert!(
        stderr.contains("Executable unittests src/lib.rs")
            && stderr.contains("Executable tests/squares.rs"),
        "{stderr}"
    );
    // As `cargo test --no-run --message-format json` names its test executables.
    let stdout = text(&built.stdout);
    let executables: Vec<String> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect(l))
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| m["executable"].as_str().map(str::to_owned))
        .collect();
    let names = |exes: &[&str]| -> Vec<String> {
        exes.iter()
            .map(|e| out.join(e).to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        executables,
        names(&["lib-tested", "test-squares"]),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("{\"reason\":\"build-finished\",\"success\":true}\n"),
        "{stdout}"
    );
    for (exe, target) in [
        ("lib-tested", &["--lib"][..]),
        ("test-squares", &["--test", "squares"]),
    ] {
        let ran = Command::new(out.join(exe))
            .output()
            .expect("the test executable starts");
        if skipped_without_gpu(&ran, &format!("{exe} against `cargo test {target:?}`")) {
            continue;
        }
        let (cpu, cpu_code) = on_the_cpu(&manifest, target, &dir.path().join("cpu"));
        assert!(cpu.iter().any(|l| l.contains("FAILED")), "{cpu:?}");
        assert_eq!(verdicts(&text(&ran.stdout)), cpu, "{exe}");
        assert_eq!(ran.status.code(), cpu_code, "{exe}");
    }

    // `cargo gpu test` itself: the build is cached; running needs a GPU.
    let run = cargo_gpu(&[
        "test",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--locked",
        "--fast-compile",
        "--lib",
        "-q",
    ]);
    let stderr = text(&run.stderr);
    match run.status.code() {
        Some(c) if c == i32::from(EXIT_NO_GPU) => {
            assert!(stderr.contains("no NVIDIA GPU is usable here"), "{stderr}");
        }
        code => {
            assert_eq!(code, Some(101), "{stderr}");
            assert!(
                stderr.contains("error: test failed, to rerun pass `--lib`"),
                "{stderr}"
            );
        }
    }
}

#[test]
fn a_missing_target_is_named() {
    let manifest = fixture();
    let missing = cargo_gpu(&[
        "test",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--test",
        "nope",
    ]);
    assert_eq!(missing.status.code(), Some(101));
    assert!(
        text(&missing.stderr).contains("no test target named `nope` in the package"),
        "{}",
        text(&missing.stderr)
    );
}

/// The conformance suite's spawning programs as tests (`conformance/spawning`'s, one per
/// program) through `cargo gpu test`, with the loopback grants the suite gives them:
/// they build for the GPU everywhere; with a GPU, each passes or fails there as on the
/// CPU (`spawn_panic` ends in a scope's panic, as the program means to: a failed test).
#[test]
fn the_conformance_suites_thread_programs_pass_as_tests_as_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gpu");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/spawning/Cargo.toml");
    let loopback = [
        "--connect",
        "127.0.0.1:*",
        "--listen",
        "127.0.0.1:*",
        "--connect",
        "localhost:*",
        "--listen",
        "localhost:*",
    ];
    let built = tests_built_into(&manifest, &out, &loopback);
    assert!(built.status.success(), "{}", text(&built.stderr));
    let exe = out.join("bin-conformance-spawning");
    let ran = Command::new(&exe)
        .output()
        .expect("the test executable starts");
    if skipped_without_gpu(&ran, "the suite's thread programs against `cargo test`") {
        return;
    }
    let (cpu, cpu_code) = on_the_cpu(&manifest, &[], &dir.path().join("cpu"));
    assert!(
        cpu.iter().any(|l| l.contains("catch_unwind ... ok")),
        "{cpu:?}"
    );
    assert_eq!(verdicts(&text(&ran.stdout)), cpu);
    assert_eq!((ran.status.code(), cpu_code), (Some(0), Some(0)));
}
