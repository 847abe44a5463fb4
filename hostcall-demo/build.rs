//! Records the commit the binaries are built from (the GPU module is built by the
//! `culinux-ptx` crate's build script).

use std::path::PathBuf;

fn main() {
    if let Err(e) = embed() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn embed() -> Result<(), Box<dyn std::error::Error>> {
    let commit = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    println!("cargo:rustc-env=HOSTCALL_COMMIT={commit}");
    // A new commit must refresh the embedded commit: watch HEAD and the branch it names.
    let git = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../.git");
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
        println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed={}", git.join(r).display());
        }
    }
    Ok(())
}
