//! Float math through the real LLVM tools, on small hand-written modules: a scalar
//! intrinsic llc cannot lower becomes a call of its C function, and whatever still cannot
//! be lowered fails in a sentence or two, never with llc's stack dump.

use std::path::Path;
use std::process::Command;

use ptx_builder::{BuildError, stage};

/// The pinned toolchain's `llvm-as` (the tests run under it: `rust-toolchain.toml`).
fn llvm_as(ll: &Path, bc: &Path) {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let sysroot = String::from_utf8(sysroot.stdout).unwrap();
    let bin = Path::new(sysroot.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/bin");
    let out = Command::new(bin.join("llvm-as"))
        .arg(ll)
        .arg("-o")
        .arg(bc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kernel computing `body` of `%x` (a `double`), as bitcode in `dir`.
fn kernel(dir: &Path, decls: &str, body: &str) -> std::path::PathBuf {
    let ll = dir.join("k.ll");
    std::fs::write(
        &ll,
        format!(
            "target datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n\
             target triple = \"nvptx64-nvidia-cuda\"\n\
             @out = global double 0.0\n\
             define ptx_kernel void @k(double %x) {{\n{body}\n  ret void\n}}\n\
             define weak double @log(double %x) {{\n  ret double %x\n}}\n{decls}\n"
        ),
    )
    .unwrap();
    let bc = dir.join("k.bc");
    llvm_as(&ll, &bc);
    bc
}

#[test]
fn a_scalar_log_becomes_a_call_of_log_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let linked = kernel(
        dir.path(),
        "declare double @llvm.log.f64(double)",
        "  %r = call double @llvm.log.f64(double %x)\n  store volatile double %r, ptr @out",
    );
    let opt = dir.path().join("k.opt.bc");
    stage::optimize(&linked, None, &opt).unwrap();
    let ptx = dir.path().join("k.ptx");
    stage::emit_ptx(&opt, 90, 80, 1024, &ptx).unwrap();
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(text.contains(".entry k"), "{text}");
}

#[test]
fn a_vector_sin_is_refused_naming_it_and_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let linked = kernel(
        dir.path(),
        "declare <2 x double> @llvm.sin.v2f64(<2 x double>)",
        "  %a = insertelement <2 x double> poison, double %x, i32 0\n  \
         %y = fadd double %x, 1.0\n  \
         %v = insertelement <2 x double> %a, double %y, i32 1\n  \
         %s = call <2 x double> @llvm.sin.v2f64(<2 x double> %v)\n  \
         store volatile <2 x double> %s, ptr @out",
    );
    let opt = dir.path().join("k.opt.bc");
    let e = stage::optimize(&linked, None, &opt).unwrap_err();
    assert!(matches!(e, BuildError::MathIntrinsics(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("llvm.sin.v2f64 (called by k)"), "{msg}");
    assert!(msg.lines().count() <= 2, "{msg}");
}

#[test]
fn an_llc_abort_is_summed_up_and_its_dump_kept_in_a_log() {
    let dir = tempfile::tempdir().unwrap();
    // Straight to llc, past the check the optimize stage makes: llc aborts on it.
    let bc = kernel(
        dir.path(),
        "declare double @llvm.sin.f64(double)",
        "  %r = call double @llvm.sin.f64(double %x)\n  store volatile double %r, ptr @out",
    );
    let e = stage::emit_ptx(&bc, 90, 80, 1024, &dir.path().join("k.ptx")).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("llc failed"), "{msg}");
    assert!(msg.contains("Cannot select"), "{msg}");
    assert!(msg.contains("in function k"), "{msg}");
    assert!(!msg.contains("Stack dump"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    let BuildError::Tool { log: Some(log), .. } = e else {
        panic!("no log kept: {e:?}");
    };
    let kept = std::fs::read_to_string(&log).unwrap();
    assert!(kept.contains("LLVM ERROR"), "{kept}");
    assert!(msg.contains(&log.display().to_string()), "{msg}");
}
