//! Records the commit the binaries are built from (the GPU module is built by the
//! `culinux-ptx` crate's build script).

use std::path::PathBuf;

/// The sources of the binaries and of their GPU module, from the repository root.
const WATCHED: &[&str] = &[
    "hostcall-demo/src",
    "hostcall-abi/src",
    "hostcall-client/src",
    "hostcall-runtime/src",
    "culinux/src",
    "libc-hostcall/src",
];

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
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("..");
    let git = root.join(".git");
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
        println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed={}", git.join(r).display());
        }
    }
    // So must an edit of the sources the binaries are built from, or `--dirty` goes
    // stale: a benchmark's JSON would name the last clean commit for an edited tree.
    for dir in WATCHED {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    Ok(())
}
