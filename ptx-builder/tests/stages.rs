//! The pipeline run one `ptx-build` subcommand at a time, as Buck2's actions run it, each
//! stage reading and writing only the paths on its command line: it must give the module
//! the whole pipeline gives (the same PTX, so one cubin in the cache serves both), its
//! `cubin` stage must make an executable cubin once and then take it from the cache, and
//! its `check` stage must stop a module calling `vfork`.

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

/// The fixture's folder.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Builds `fixture` through the stages up to `check`; returns the checked PTX's path, or
/// the `check` stage's stderr if it failed.
fn through_check(name: &str, dir: &Path) -> Result<PathBuf, String> {
    let krate = fixture(name);
    let p = |what: &str| dir.join(format!("{name}.{what}"));
    let (lib, linked, opt, kernels, ptx, checked) = (
        p("a"),
        p("linked.bc"),
        p("opt.bc"),
        p("kernels"),
        p("unchecked.ptx"),
        p("ptx"),
    );
    ok("bitcode", ptx_build(args!["bitcode", krate, "--out", lib]));
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
    let ptx = through_check("names-nothing", dir).unwrap();
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(text.contains(".entry kmain") && text.contains(".maxntid 1024, 1, 1"));
    assert!(
        text.contains("__hostcall_thread_exit"),
        "libc-hostcall was not linked"
    );
    let whole = dir.join("whole");
    ok(
        "the whole pipeline",
        ptx_build(args![
            fixture("names-nothing"),
            "--no-cubins",
            "--out-dir",
            whole
        ]),
    );
    assert!(
        std::fs::read_to_string(whole.join("module.ptx")).unwrap() == text,
        "the stages and the whole pipeline made different PTX"
    );

    let cubin = dir.join("sm_90.cubin");
    // A cache of this test's own, so that the first run compiles.
    let cache = dir.join("cache");
    let frames = dir.join("sm_90.frames");
    let cubin_stage = |out: &Path, frames: &Path| {
        Command::new(env!("CARGO_BIN_EXE_ptx-build"))
            .args(args![
                "cubin",
                ptx,
                "--sm",
                "90",
                "--out",
                out,
                "--frames-out",
                frames
            ])
            .env("HOSTCALL_CACHE", &cache)
            .output()
            .unwrap()
    };
    let cubin_out = cubin_stage(&cubin, &frames);
    let cubin_arg = if cubin_out.status.success() {
        let said = String::from_utf8_lossy(&cubin_out.stderr);
        assert!(said.contains("sm_90 cubin: compiled by"), "{said}");
        let bytes = std::fs::read(&cubin).unwrap();
        // ELF `e_type` 2: an executable, linked (ptxas -c alone makes type 1).
        assert_eq!(
            (&bytes[..4], bytes[16]),
            (&b"\x7fELF"[..], 2),
            "not a linked cubin"
        );
        // ptxas's frame of every function, the kernel's among them.
        let report = std::fs::read_to_string(&frames).unwrap();
        assert!(
            report.contains("Function properties for kmain\n"),
            "{report}"
        );
        let (again, again_frames) = (dir.join("again.cubin"), dir.join("again.frames"));
        let second = cubin_stage(&again, &again_frames);
        let said = String::from_utf8_lossy(&second.stderr);
        assert!(said.contains("from the cache"), "{said}");
        assert_eq!(std::fs::read(&again).unwrap(), bytes);
        assert_eq!(std::fs::read_to_string(&again_frames).unwrap(), report);
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
        module_args.extend([
            OsStr::new(&cubin_arg),
            OsStr::new("--frames"),
            frames.as_os_str(),
        ]);
    }
    let printed = ok("module", ptx_build(&module_args));
    let sha = std::fs::read_to_string(module.join("module.sha256")).unwrap();
    // With a cubin, the stack its frames and call graph need (std's formatting recurses,
    // so at least the recursion allowance).
    let stack = std::fs::read_to_string(module.join("module.stack")).ok();
    assert_eq!(stack.is_some(), !cubin_arg.is_empty());
    let stack_line = stack.as_ref().map(|b| format!("\nstack   {b}"));
    assert_eq!(
        printed.trim(),
        format!("sha256  {sha}{}", stack_line.unwrap_or_default())
    );
    if let Some(b) = &stack {
        let bytes: u64 = b.parse().unwrap();
        assert!(bytes > ptx_builder::stack::RECURSION_STACK_BYTES, "{bytes}");
    }
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
    let stack_const = match &stack {
        Some(b) => format!("STACK_BYTES: Option<usize> = Some({b});"),
        None => "STACK_BYTES: Option<usize> = None;".to_owned(),
    };
    assert!(rs.contains(&stack_const), "{rs}");

    let err = through_check("calls-vfork", dir).unwrap_err();
    assert!(
        err.contains("vfork") && err.contains("needed by calls_vfork"),
        "{err}"
    );
}
