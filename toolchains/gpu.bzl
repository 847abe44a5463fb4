"""gpu_module: a Rust crate written against std, built into PTX + cubins + SHA-256.

Runs the ptx-builder CLI (//ptx-builder:ptx-build) with RUSTC and CARGO taken from the
stage0 sysroot (pinned by URL and SHA-256 in stage0/BUCK), the fixups and target spec
compiled into the builder, and ptxas from $PTXAS or the nvidia-cuda-nvcc wheel. The
outputs are what hostcall-demo's build.rs embeds under Cargo.
"""

def _gpu_module_impl(ctx):
    out = ctx.actions.declare_output("module", dir = True)
    sysroot = ctx.attrs.sysroot[DefaultInfo].default_outputs[0]
    cmd = cmd_args(
        "/usr/bin/env",
        cmd_args(sysroot, format = "RUSTC={}/bin/rustc"),
        cmd_args(sysroot, format = "CARGO={}/bin/cargo"),
        ctx.attrs.builder[RunInfo],
        ctx.attrs.krate,
        "--out-dir",
        out.as_output(),
    )
    ctx.actions.run(cmd, category = "gpu_module", local_only = True)
    return [DefaultInfo(default_output = out)]

gpu_module = rule(
    impl = _gpu_module_impl,
    attrs = {
        "krate": attrs.string(doc = "the kernel crate's folder, from the repo root"),
        "srcs": attrs.list(attrs.source(), default = [], doc = "inputs that invalidate the module"),
        "builder": attrs.exec_dep(default = "//ptx-builder:ptx-build"),
        "sysroot": attrs.exec_dep(default = "//stage0:sysroot"),
    },
)
