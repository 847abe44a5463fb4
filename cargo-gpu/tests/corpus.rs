//! The corpus: ordinary programs on the registry's popular crates, which `cargo gpu
//! build` must build at its defaults (`ptxas -O3`), each from its own lockfile:
//! `examples/registry` (serde_json, regex, rand, sha2, itertools, hashbrown, smallvec)
//! and `examples/popular` (clap, toml, env_logger, crossbeam-channel, walkdir, tempfile
//! and so rustix, indexmap, jiff, thiserror, anyhow, memchr). A crate with profiles of
//! its own is ptx-builder's `custom-profile` fixture, built by its tests. Each built
//! program then runs: without a GPU to the no-GPU sentence and code (the comparison is
//! reported SKIPPED); with one, its stdout, stderr and exit code must be its CPU
//! build's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{cargo_gpu, skipped_without_gpu, text};

/// A program of the corpus: its folder under `examples/`, and its arguments.
struct Program {
    name: &'static str,
    args: &'static [&'static str],
}

const CORPUS: [Program; 2] = [
    Program {
        name: "registry",
        args: &[],
    },
    Program {
        name: "popular",
        args: &["--rounds", "3", "words.txt", "missing.txt"],
    },
];

fn manifest(p: &Program) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(p.name)
        .join("Cargo.toml")
}

/// Runs `exe` with the program's arguments in a fresh folder holding its input.
fn run_in_fresh_dir(exe: &Path, p: &Program) -> Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("words.txt"),
        "the GPU runs the program\nas the CPU runs the program\n",
    )
    .unwrap();
    Command::new(exe)
        .args(p.args)
        .current_dir(dir.path())
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the program starts")
}

#[test]
fn popular_crates_programs_build_for_the_gpu_and_print_what_the_cpu_prints() {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus");
    for p in &CORPUS {
        let target_dir = work.join(p.name);
        let exe = work.join(format!("{}.gpu", p.name));
        let built = cargo_gpu(&[
            "build",
            "--manifest-path",
            manifest(p).to_str().unwrap(),
            "--locked",
            "--target-dir",
            target_dir.to_str().unwrap(),
            "--grant",
            ".",
            "-o",
            exe.to_str().unwrap(),
        ]);
        assert!(
            built.status.success(),
            "{}: {}",
            p.name,
            text(&built.stderr)
        );
        let gpu = run_in_fresh_dir(&exe, p);
        if skipped_without_gpu(&gpu, &format!("{} against its CPU build", p.name)) {
            continue;
        }
        let cpu_build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "--locked", "--manifest-path"])
            .arg(manifest(p))
            .arg("--target-dir")
            .arg(target_dir.join("cpu"))
            .status()
            .expect("cargo runs");
        assert!(cpu_build.success(), "{}: the CPU build", p.name);
        let cpu = run_in_fresh_dir(&target_dir.join("cpu/release").join(p.name), p);
        assert_eq!(
            (text(&gpu.stdout), text(&gpu.stderr), gpu.status.code()),
            (text(&cpu.stdout), text(&cpu.stderr), cpu.status.code()),
            "{}: the GPU's stdout, stderr and exit code, then the CPU's",
            p.name
        );
    }
}
