//! The pipeline run one `ptx-build` subcommand at a time, as Buck2's actions run it, each
//! stage reading and writing only the paths on its command line: it must give the module
//! the whole pipeline gives, and its `check` stage must stop a module calling `vfork`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ptx_build<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptx-build"))
        .args(args)
        .output()
        .unwrap()
}

/// Command-line words from strings and paths alike.
macro_rules! args {
    ($($a:expr),* $(,)?) => { [$(OsStr::new(&$a)),*] };
}

fn ok(what: &str, out: std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ptx-build {what} failed:\n{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds `fixture` through the stages up to `check`; returns the checked PTX's path, or
/// the `check` stage's stderr if it failed.
fn through_check(fixture: &str, std: &Path, target: &Path, dir: &Path) -> Result<PathBuf, String> {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let p = |name: &str| dir.join(format!("{fixture}.{name}"));
    let (lib, linked, opt, kernels, ptx, checked) = (
        p("a"),
        p("linked.bc"),
        p("opt.bc"),
        p("kernels"),
        p("unchecked.ptx"),
        p("ptx"),
    );
    let target_dir = target.to_path_buf();
    ok(
        "bitcode",
        ptx_build(args![
            "bitcode",
            krate,
            "--std",
            std,
            "--target-dir",
            target_dir,
            "--out",
            lib,
        ]),
    );
    ok("link", ptx_build(args!["link", lib, "--out", linked]));
    ok(
        "optimize",
        ptx_build(args![
            "optimize",
            linked,
            "--out",
            opt,
            "--kernels-out",
            kernels,
        ]),
    );
    ok("ptx", ptx_build(args!["ptx", opt, "--out", ptx]));
    let check = ptx_build(args!["check", ptx, "--staticlib", lib, "--out", checked]);
    if !check.status.success() {
        assert!(
            !checked.exists(),
            "a failed check must not leave its output"
        );
        return Err(String::from_utf8_lossy(&check.stderr).into_owned());
    }
    Ok(checked)
}

#[test]
fn the_stages_one_by_one_make_the_module_and_the_check_stage_refuses_vfork() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (std, target) = (dir.join("library"), dir.join("target"));
    ok("patch-std", ptx_build(args!["patch-std", "--out", std]));
    assert!(
        std.join("std/src/lib.rs").is_file(),
        "no std sources in {std:?}"
    );

    let ptx = through_check("names-nothing", &std, &target, dir).unwrap();
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(text.contains(".entry kmain") && text.contains(".maxntid 1024, 1, 1"));
    assert!(
        text.contains("__hostcall_thread_exit"),
        "libc-hostcall was not linked"
    );

    let cubin = dir.join("sm_90.cubin");
    let cubin_out = ptx_build(args!["cubin", ptx, "--sm", "90", "--out", cubin]);
    let cubin_arg = if cubin_out.status.success() {
        format!("--cubin=90={}", cubin.display())
    } else {
        // Without ptxas the stage must say so; the module is then PTX only.
        let err = String::from_utf8_lossy(&cubin_out.stderr);
        assert!(err.contains("no ptxas found"), "{err}");
        println!("cubin stage SKIPPED: no ptxas on this machine");
        String::new()
    };
    let kernels = dir.join("names-nothing.kernels");
    let module = dir.join("module");
    let mut module_args = args!["module", ptx, "--kernels", kernels, "--out-dir", module].to_vec();
    if !cubin_arg.is_empty() {
        module_args.push(OsStr::new(&cubin_arg));
    }
    let printed = ok("module", ptx_build(&module_args));
    let sha = std::fs::read_to_string(module.join("module.sha256")).unwrap();
    assert_eq!(printed.trim(), format!("sha256  {sha}"));
    // The fixture's kernel, and libc-hostcall's, which runs thread-local destructors.
    assert_eq!(
        std::fs::read_to_string(module.join("module.kernels")).unwrap(),
        "__hostcall_thread_exit\nkmain"
    );
    assert_eq!(
        std::fs::read_to_string(module.join("module.ptx")).unwrap(),
        text
    );

    let embed = dir.join("embed");
    ok(
        "embed",
        ptx_build(args!["embed", module, "--out-dir", embed, "--file", "m.rs"]),
    );
    let rs = std::fs::read_to_string(embed.join("m.rs")).unwrap();
    assert!(
        rs.contains("include_str!(\"module.ptx\")") && rs.contains(&sha),
        "{rs}"
    );
    assert!(embed.join("module.ptx").is_file());
    assert_eq!(
        cubin.exists(),
        rs.contains("(90, include_bytes!(\"module.sm_90.cubin\"))")
    );

    let err = through_check("calls-vfork", &std, &target, dir).unwrap_err();
    assert!(
        err.contains("vfork") && err.contains("needed by calls_vfork"),
        "{err}"
    );
}
