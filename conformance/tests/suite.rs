//! The whole suite as CI runs it: every program on the CPU (twice, compared with each
//! other, when there is no GPU; against the GPU when there is one), threaded programs
//! also at 4×32 threads, so that line-order normalisation is exercised.

use std::process::Command;

#[test]
fn every_program_runs_and_compares_identical() {
    let out = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["--geometry", "4x32"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    // Shown with `--nocapture`, and always when the test fails.
    println!("{summary}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(summary.contains(" 0 not,"), "{stdout}");
    // One line per run, then the summary.
    let runs = stdout.lines().count() - 1;
    assert_eq!(
        runs, 83,
        "64 programs at one thread and 19 at 4x32:\n{stdout}"
    );
}
