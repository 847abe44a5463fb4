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
