"""What Cargo tells our crates from the root Cargo.toml, restated for the Buck2 build
(Starlark cannot read TOML; hostcall-demo/tests/pins.rs checks the two agree)."""

# `[workspace.package] version`: Cargo's CARGO_PKG_VERSION, which clap's --version prints.
CARGO_ENV = {"CARGO_PKG_VERSION": "0.1.0"}

def cargo_tests(crate, deps, shared = [], test_deps = [], **kwargs):
    """The tests `cargo test -p <crate>` runs: the library's unit tests (`unit`), then
    one test binary per tests/*.rs file, named after it, as Cargo makes them. `deps` are
    the crate's dependencies and dev-dependencies; `test_deps` those only the tests/*.rs
    binaries take (a crate that depends on this one); `shared` are files the test files
    declare as modules (tests/common/)."""
    native.rust_test(
        name = "unit",
        srcs = native.glob(["src/**/*.rs"]),
        crate = crate,
        crate_root = "src/lib.rs",
        deps = deps,
        **kwargs
    )
    for test in native.glob(["tests/*.rs"]):
        native.rust_test(
            name = test.removeprefix("tests/").removesuffix(".rs"),
            srcs = [test] + shared,
            crate_root = test,
            deps = deps + test_deps + [":" + crate.replace("_", "-")],
            **kwargs
        )
