"""The host Rust toolchain: the pinned nightly, from rustup or from the stage0 sysroot."""

load("@prelude//rust:rust_toolchain.bzl", "PanicRuntime", "RustToolchainInfo")

def _pinned_rust_toolchain_impl(ctx: AnalysisContext) -> list[Provider]:
    if ctx.attrs.sysroot:
        root = ctx.attrs.sysroot[DefaultInfo].default_outputs[0]
        tool = lambda name: RunInfo(args = [cmd_args(root, format = "{}/bin/" + name)])
    else:
        # rustup's proxies, run from the repo root: they pick rust-toolchain.toml's channel.
        tool = lambda name: RunInfo(args = [name])
    return [
        DefaultInfo(),
        RustToolchainInfo(
            clippy_driver = tool("clippy-driver"),
            compiler = tool("rustc"),
            default_edition = "2024",
            doctests = False,
            nightly_features = True,
            panic_runtime = PanicRuntime("unwind"),
            rustc_flags = ctx.attrs.rustc_flags,
            rustc_target_triple = ctx.attrs.target_triple,
            rustdoc = tool("rustdoc"),
        ),
    ]

pinned_rust_toolchain = rule(
    impl = _pinned_rust_toolchain_impl,
    attrs = {
        "rustc_flags": attrs.list(attrs.string(), default = [], doc = "flags every host crate is compiled with"),
        "sysroot": attrs.option(attrs.exec_dep(), default = None, doc = "a sysroot with bin/rustc; none: rustup's"),
        "target_triple": attrs.string(),
    },
    is_toolchain_rule = True,
    doc = "rust-toolchain.toml's nightly, the way the Cargo build gets it.",
)
