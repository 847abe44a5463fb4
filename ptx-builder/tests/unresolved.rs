//! The unresolved-symbol check on a real build: a kernel calling `vfork` must fail with a
//! message naming `vfork` and the crate that calls it.

use std::path::Path;

use ptx_builder::{BuildError, Cubins, Progress, PtxBuilder};

#[test]
fn a_kernel_calling_an_undefined_libc_function_fails_naming_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let err = PtxBuilder::new(root.join("tests/fixtures/calls-vfork"))
        .cubins(Cubins::Off)
        .progress(Progress::Quiet)
        .build()
        .expect_err("a module calling vfork must not build");
    let BuildError::Unresolved(list) = &err else {
        panic!("expected an unresolved-symbol error, got: {err}");
    };
    assert_eq!(list.len(), 1, "only vfork is missing: {err}");
    assert_eq!(list[0].symbol, "vfork");
    assert!(
        list[0].needed_by.contains(&"calls_vfork".to_owned()),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("vfork") && msg.contains("needed by calls_vfork"),
        "{msg}"
    );
}
