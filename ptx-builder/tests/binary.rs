//! A binary crate built as it is (`PtxBuilder::binary`, what `cargo gpu` runs): its
//! `main` becomes the start kernel, libc-hostcall comes in though the crate never names
//! it, and its locals move to global-memory frames that other GPU threads can reach.

use std::path::Path;

use hostcall_abi::{FRAME_PUSH, START_KERNEL, THREAD_EXIT_KERNEL};
use ptx_builder::{Cubins, Progress, PtxBuilder};

#[test]
fn an_unmodified_binary_builds_with_main_as_the_start_kernel_and_frames_in_global_memory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let m = PtxBuilder::new(root.join("examples/unmodified"))
        .binary(None)
        .cubins(Cubins::Off)
        .progress(Progress::Quiet)
        .build()
        .expect("the example program builds for the GPU");
    let mut kernels = m.kernels.clone();
    kernels.sort();
    assert_eq!(kernels, [START_KERNEL, THREAD_EXIT_KERNEL]);
    assert_eq!(m.ptx.file_stem().unwrap(), "unmodified");
    let ptx = std::fs::read_to_string(&m.ptx).unwrap();
    let calls = ptx.matches(&format!("{FRAME_PUSH},")).count()
        + ptx.matches(&format!("{FRAME_PUSH}, ")).count();
    assert!(
        ptx.contains(&format!(
            ".visible .func  (.param .b64 func_retval0) {FRAME_PUSH}"
        )) && calls > 10,
        "the program's functions take their frames from {FRAME_PUSH} ({calls} calls)"
    );
    assert!(
        m.sources
            .iter()
            .any(|s| s.ends_with("examples/unmodified/src/main.rs")),
        "{:?}",
        m.sources
    );
    synchronizes_at_gpu_scope_but_with_the_host(&ptx);
}

/// std's atomics that synchronize (an `Arc`'s drop, a `Mutex`, a `Once`) are at GPU
/// scope in a binary; system scope is left to the transport's own PTX, which spells its
/// loads and stores with `.u32` where LLVM writes `.b32`, and whose fences are
/// `fence.acq_rel.sys` (never `fence.sc.sys`).
fn synchronizes_at_gpu_scope_but_with_the_host(ptx: &str) {
    const TRANSPORT: [&str; 3] = [
        "ld.acquire.sys.u32",
        "st.release.sys.u32",
        "fence.acq_rel.sys;",
    ];
    let system: Vec<&str> = ptx
        .lines()
        .map(str::trim)
        .filter(|l| {
            let op = l.split_whitespace().next().unwrap_or("");
            let synchronizing = [".acquire.", ".release.", ".acq_rel.", ".sc."]
                .iter()
                .any(|o| op.contains(o));
            synchronizing && op.contains(".sys") && !TRANSPORT.contains(&op)
        })
        .collect();
    assert!(
        system.is_empty(),
        "{} synchronizing operations at system scope, e.g. {:?}",
        system.len(),
        &system[..system.len().min(5)]
    );
    let gpu = ptx.matches("atom.acq_rel.gpu").count() + ptx.matches("fence.acq_rel.gpu").count();
    assert!(gpu > 10, "std's atomics at GPU scope: {gpu}");
}

#[test]
fn a_crate_without_a_binary_is_refused_naming_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let err = PtxBuilder::new(root.join("hostcall-abi"))
        .binary(None)
        .cubins(Cubins::Off)
        .progress(Progress::Quiet)
        .build()
        .expect_err("a library has no main to run");
    let msg = err.to_string();
    assert!(
        msg.contains("hostcall-abi/Cargo.toml has no binary target"),
        "{msg}"
    );
}

/// A binary whose workspace sets its own release profile (here overflow checks and debug
/// assertions, which change how std is built) gets one std: its libc-hostcall, built by
/// a cargo run of its own, is built with the same profile (else rustc finds two `core`s:
/// E0152).
#[test]
fn a_binary_with_its_own_release_profile_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let m = PtxBuilder::new(root.join("tests/fixtures/custom-profile"))
        .binary(None)
        .cubins(Cubins::Off)
        .progress(Progress::Quiet)
        .build()
        .expect("a binary with overflow checks and debug assertions builds for the GPU");
    assert_eq!(m.ptx.file_stem().unwrap(), "custom-profile");
}
