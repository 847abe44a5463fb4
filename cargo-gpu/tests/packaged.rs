//! A packaged program as its user runs it: its arguments are its own, never
//! the runner's, and a damaged file is refused before any GPU is looked for. The package
//! is this build's runner with a crafted module appended, so no GPU build is needed; with
//! no GPU here, a program that gets as far as looking for one exits 69.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A digest of the right shape.
const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Output bytes as text.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `dir/prog.gpu`: the runner with `header` and `payload` appended, and a trailer
/// that says `appended` bytes were (their true length when None).
fn package(
    dir: &Path,
    header: &serde_json::Value,
    payload: &[u8],
    appended: Option<u64>,
) -> PathBuf {
    let header = header.to_string();
    let mut bytes = std::fs::read(env!("CARGO_BIN_EXE_cargo-gpu")).unwrap();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(payload);
    let true_length = (header.len() + payload.len()) as u64;
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&appended.unwrap_or(true_length).to_le_bytes());
    bytes.extend_from_slice(b"HCPROG01");
    let out = dir.join("prog.gpu");
    std::fs::write(&out, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    out
}

/// The header of a program of `ptx`, granted `granted` and limited to 30 s.
fn header(ptx: &str, granted: &Path, cubins: &[[u64; 2]], digest: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "prog",
        "options": ["--grant", granted, "--timeout", "30"],
        "sha256": digest,
        "stack_bytes": null,
        "ptx": ptx.len(),
        "cubins": cubins,
    })
}

/// Runs `exe` with `args`, and `flags` as the runner's flags when given.
fn run(exe: &Path, args: &[&OsStr], flags: Option<&str>) -> Output {
    let mut c = Command::new(exe);
    c.args(args).env_remove("CARGO_GPU_RUNNER_FLAGS");
    if let Some(f) = flags {
        c.env("CARGO_GPU_RUNNER_FLAGS", f);
    }
    c.output().expect("the packaged program runs")
}

/// Whether `ran` went past the package's checks and the runner's flags to the GPU: to
/// not finding one here (69), or to a failed run of the crafted module on a GPU (70,
/// naming no runner flag).
fn went_to_the_gpu(ran: &Output) -> bool {
    let stderr = text(&ran.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    match ran.status.code().and_then(|c| u8::try_from(c).ok()) {
        Some(hostcall_runtime::EXIT_NO_GPU) => true,
        Some(hostcall_runtime::EXIT_RUN_FAILED) => !stderr.contains("--gpu-"),
        _ => false,
    }
}

#[test]
fn a_packaged_programs_arguments_are_never_the_runners() {
    let dir = tempfile::tempdir().unwrap();
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
    let exe = package(
        dir.path(),
        &header(ptx, dir.path(), &[], DIGEST),
        ptx.as_bytes(),
        None,
    );
    for argv in [
        &["--gpu-grants"][..],
        &["--", "--delete-everything"],
        &["--gpu-timeout", "0"],
        &["--gpu-frobnicate"],
    ] {
        let args: Vec<&OsStr> = argv.iter().map(OsStr::new).collect();
        let ran = run(&exe, &args, None);
        assert!(
            went_to_the_gpu(&ran) && ran.stdout.is_empty(),
            "{argv:?}: {ran:?}"
        );
    }
    let not_utf8 = run(&exe, &[OsStr::from_bytes(b"caf\xe9")], None);
    assert!(went_to_the_gpu(&not_utf8), "{not_utf8:?}");

    let shown = run(
        &exe,
        &[],
        Some("--gpu-no-stdin --gpu-timeout 10 --gpu-grants"),
    );
    let stdout = text(&shown.stdout);
    assert!(
        shown.status.success() && stdout.contains("a time limit of 10 s"),
        "{shown:?}"
    );
    let lengthened = run(&exe, &[], Some("--gpu-timeout 31 --gpu-grants"));
    assert!(
        text(&lengthened.stdout).contains("a time limit of 30 s"),
        "the recorded limit stands: {lengthened:?}"
    );
    let lifted = run(&exe, &[], Some("--gpu-timeout 0"));
    assert_eq!(
        lifted.status.code(),
        Some(hostcall_runtime::EXIT_RUN_FAILED.into())
    );
    assert!(
        text(&lifted.stderr).contains("only shorten the time limit"),
        "{lifted:?}"
    );
}

#[test]
fn a_tampered_package_is_refused_before_any_gpu_is_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let ptx = ".version 8.0\n";
    let refused = |exe: &Path, why: &str| {
        let ran = run(exe, &[OsStr::new("x")], None);
        let stderr = text(&ran.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(ran.status.code(), Some(101), "{why}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(why) && stderr.lines().count() == 1,
            "{why}: {stderr}"
        );
    };
    let good = header(ptx, dir.path(), &[], DIGEST);
    let exe = package(dir.path(), &good, ptx.as_bytes(), Some(u64::MAX - 8));
    refused(&exe, "a packaged program cut short");
    let empty_cubin = header(ptx, dir.path(), &[[90, 0]], DIGEST);
    let exe = package(dir.path(), &empty_cubin, ptx.as_bytes(), None);
    refused(&exe, "its cubin for sm_90 is not a CUDA ELF file");
    let short_cubin = header(ptx, dir.path(), &[[90, 4]], DIGEST);
    let exe = package(dir.path(), &short_cubin, b".version 8.0\n\x7fELF", None);
    refused(&exe, "its cubin for sm_90 is not a CUDA ELF file");
    for digest in ["é".repeat(32), "abc".into()] {
        let exe = package(
            dir.path(),
            &header(ptx, dir.path(), &[], &digest),
            ptx.as_bytes(),
            None,
        );
        refused(&exe, "its digest is not 64 hex digits");
    }
}
