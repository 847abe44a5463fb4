//! What the tests of `cargo gpu` share: running it, and reading its output.

use std::process::{Command, Output};

/// `cargo gpu ARGS`, as cargo runs the subcommand.
pub fn cargo_gpu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-gpu"))
        .arg("gpu")
        .args(args)
        .output()
        .expect("cargo-gpu runs")
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether `ran` found no GPU: then it said so in its one sentence (asserted here) and
/// `what`, which built, is reported SKIPPED.
pub fn skipped_without_gpu(ran: &Output, what: &str) -> bool {
    if ran.status.code() != Some(hostcall_runtime::EXIT_NO_GPU.into()) {
        return false;
    }
    let stderr = text(&ran.stderr);
    assert!(stderr.contains("no NVIDIA GPU is usable here"), "{stderr}");
    println!("{what}: SKIPPED (no GPU here; it built)");
    true
}
