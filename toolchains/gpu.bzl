"""The GPU build as Buck2 actions, one per stage of ptx-builder's pipeline.

Each action runs one subcommand of the `ptx-build` CLI (//ptx-builder:ptx-build) with
its inputs and outputs declared, so Buck2 caches every stage and reruns only those whose
inputs changed:

    bitcode (std + the kernel crate, the nested `cargo -Zbuild-std` build)
      -> link -> optimize -> ptx -> check (unresolved functions)
      -> cubin (ptxas, one per SM) -> module (+ SHA-256) -> embed (Rust source)

Two stages also use the machine's cache that Cargo builds use (ptx-builder's `cache`
module, `$HOSTCALL_CACHE`): `bitcode` compiles std from the one patched rust-src there,
in the shared target dir, so std is built once per machine and every build of a crate
makes the same PTX; `cubin` takes a cubin made from the same PTX, tools and options
from there. Both are keyed by content, so they survive `buck2 kill` and never go stale.

The Rust toolchain is the rustup one that rust-toolchain.toml pins, or, with
`-c rust.toolchain=stage0`, the same artefacts downloaded by URL and SHA-256
(//stage0:sysroot).
"""

GpuToolchainInfo = provider(
    doc = "How GPU stages reach rustc and cargo: the environment they run with.",
    fields = {"env": provider_field(dict[str, typing.Any])},
)

def _stage(ctx: AnalysisContext, category: str, args, identifier = None):
    ctx.actions.run(
        cmd_args(ctx.attrs._builder[RunInfo], args),
        env = ctx.attrs._toolchain[GpuToolchainInfo].env,
        category = category,
        identifier = identifier,
        # The nested cargo fetches std's dependencies into CARGO_HOME, and ptxas is
        # found on this machine: not remote-executable.
        local_only = True,
    )

def _gpu_toolchain_impl(ctx: AnalysisContext) -> list[Provider]:
    env = {}
    if ctx.attrs.sysroot:
        root = ctx.attrs.sysroot[DefaultInfo].default_outputs[0]
        env = {
            "CARGO": cmd_args(root, format = "{}/bin/cargo"),
            "RUSTC": cmd_args(root, format = "{}/bin/rustc"),
        }
    return [DefaultInfo(), GpuToolchainInfo(env = env)]

gpu_toolchain = rule(
    impl = _gpu_toolchain_impl,
    attrs = {
        "sysroot": attrs.option(attrs.exec_dep(), default = None, doc = "a sysroot with bin/rustc and bin/cargo; none: rustup's"),
    },
    doc = "The rustc and cargo the GPU stages run.",
)

_COMMON = {
    "_builder": attrs.exec_dep(default = "root//ptx-builder:ptx-build"),
    "_toolchain": attrs.exec_dep(default = "toolchains//:gpu", providers = [GpuToolchainInfo]),
}

def _gpu_module_impl(ctx: AnalysisContext) -> list[Provider]:
    out = lambda name: ctx.actions.declare_output(name)

    staticlib = out("kernel.a")
    _stage(ctx, "gpu_bitcode", cmd_args(
        "bitcode",
        ctx.attrs.krate,
        "--out",
        staticlib.as_output(),
        hidden = ctx.attrs.srcs,
    ))
    linked = out("linked.bc")
    _stage(ctx, "gpu_link", ["link", staticlib, "--out", linked.as_output()])
    optimized, kernels = out("optimized.bc"), out("kernels")
    _stage(ctx, "gpu_optimize", [
        "optimize",
        linked,
        "--out",
        optimized.as_output(),
        "--kernels-out",
        kernels.as_output(),
    ])
    unchecked = out("unchecked.ptx")
    _stage(ctx, "gpu_ptx", ["ptx", optimized, "--out", unchecked.as_output()])
    ptx = out("module.ptx")
    _stage(ctx, "gpu_check", ["check", unchecked, "--staticlib", staticlib, "--out", ptx.as_output()])
    cubins = []
    for sm in ctx.attrs.cubin_sms:
        cubin, frames = out("module.sm_{}.cubin".format(sm)), out("module.sm_{}.frames".format(sm))
        fast = ["--fast-compile"] if ctx.attrs.fast_compile else []
        _stage(ctx, "gpu_cubin", ["cubin", ptx, "--sm", str(sm)] + fast + [
            "--out",
            cubin.as_output(),
            "--frames-out",
            frames.as_output(),
        ], identifier = "sm_{}".format(sm))
        cubins += [cmd_args(cubin, format = "--cubin={}=".format(sm) + "{}"), "--frames", frames]
    module = ctx.actions.declare_output("module", dir = True)
    _stage(ctx, "gpu_module", ["module", ptx, cubins, "--kernels", kernels, "--out-dir", module.as_output()])
    embed = ctx.actions.declare_output("embed", dir = True)
    _stage(ctx, "gpu_embed", ["embed", module, "--out-dir", embed.as_output(), "--file", ctx.attrs.embed_file])
    return [DefaultInfo(
        default_output = module,
        sub_targets = {
            "embed": [DefaultInfo(default_output = embed)],
            "ptx": [DefaultInfo(default_output = ptx)],
        },
    )]

gpu_module = rule(
    impl = _gpu_module_impl,
    attrs = _COMMON | {
        "cubin_sms": attrs.list(attrs.int(), default = [90], doc = "SM versions to build cubins for (ptxas is then required)"),
        "embed_file": attrs.string(doc = "the Rust file [embed] writes, which the host crate includes from OUT_DIR"),
        "fast_compile": attrs.bool(default = False, doc = "ptxas --Ofast-compile=max instead of -O3: for modules that test correctness only"),
        "krate": attrs.string(doc = "the kernel crate's folder, from the repo root"),
        "srcs": attrs.list(attrs.source(), default = [], doc = "every file the kernel build reads (its crate and path dependencies)"),
    },
    doc = """A Rust crate written against std, built into a GPU module: the default output is
the module folder (module.ptx, module.sm_NN.cubin, module.sha256, module.kernels,
module.stack: the stack each GPU thread needs, from ptxas's frames and the call graph);
[embed] adds the Rust source a host crate includes; [ptx] is the checked PTX alone.""",
)

def _binary_env(ctx: AnalysisContext) -> dict[str, typing.Any]:
    # A binary's build links libc-hostcall in, and the builder runs from a copy of its
    # sources in buck-out: name libc-hostcall's folder, from the project root, where
    # local actions run.
    return ctx.attrs._toolchain[GpuToolchainInfo].env | {"HOSTCALL_LIBC_DIR": "libc-hostcall"}

def _gpu_binary_module_impl(ctx: AnalysisContext) -> list[Provider]:
    module = ctx.actions.declare_output("module", dir = True)
    fast = ["--fast-compile"] if ctx.attrs.fast_compile else []
    cubins = []
    for sm in ctx.attrs.cubin_sms:
        cubins += ["--cubin", str(sm)]
    ctx.actions.run(
        cmd_args(
            ctx.attrs._builder[RunInfo],
            ctx.attrs.krate,
            "--bin",
            "--require-cubins",
            cubins,
            fast,
            "--out-dir",
            module.as_output(),
            hidden = ctx.attrs.srcs,
        ),
        env = _binary_env(ctx),
        category = "gpu_binary_module",
        local_only = True,
    )
    embed = ctx.actions.declare_output("embed", dir = True)
    _stage(ctx, "gpu_embed", ["embed", module, "--out-dir", embed.as_output(), "--file", ctx.attrs.embed_file])
    return [DefaultInfo(default_output = module, sub_targets = {"embed": [DefaultInfo(default_output = embed)]})]

gpu_binary_module = rule(
    impl = _gpu_binary_module_impl,
    attrs = _COMMON | {
        "cubin_sms": attrs.list(attrs.int(), default = [90], doc = "SM versions to build cubins for"),
        "embed_file": attrs.string(doc = "the Rust file [embed] writes, which the host crate includes"),
        "fast_compile": attrs.bool(default = False, doc = "ptxas --Ofast-compile=max instead of -O3"),
        "krate": attrs.string(doc = "the binary crate's folder, from the repo root"),
        "srcs": attrs.list(attrs.source(), default = [], doc = "every file the build reads (the crate, and libc-hostcall's and its dependencies' sources)"),
    },
    doc = """A binary crate's `fn main` built into a GPU module whose kernel
`__hostcall_start` runs it (`PtxBuilder::binary`), for a host crate to embed ([embed])
and launch itself, where gpu_program packages it with the runner. One action: a
binary's stages (the frames rewrite, its link line) are not split out as a library's.""",
)

def _gpu_program_impl(ctx: AnalysisContext) -> list[Provider]:
    exe = ctx.actions.declare_output(ctx.label.name)
    options = []
    for g in ctx.attrs.grants:
        options += ["--grant", g]
    for e in ctx.attrs.env_vars:
        options += ["--env", e]
    if ctx.attrs.threads:
        options += ["--threads", str(ctx.attrs.threads)]
    if ctx.attrs.fast_compile:
        options.append("--fast-compile")
    ctx.actions.run(
        cmd_args(
            ctx.attrs._runner[RunInfo],
            "build",
            ctx.attrs.krate,
            options,
            "-o",
            exe.as_output(),
            hidden = ctx.attrs.srcs,
        ),
        env = _binary_env(ctx),
        category = "gpu_program",
        # As the stages above: the nested cargo and ptxas are this machine's.
        local_only = True,
    )
    return [DefaultInfo(default_output = exe), RunInfo(args = cmd_args(exe))]

gpu_program = rule(
    impl = _gpu_program_impl,
    attrs = {
        "_runner": attrs.exec_dep(default = "root//cargo-gpu:cargo-gpu"),
        "_toolchain": attrs.exec_dep(default = "toolchains//:gpu", providers = [GpuToolchainInfo]),
        "env_vars": attrs.list(attrs.string(), default = [], doc = "--env NAME[=VALUE] for each"),
        "fast_compile": attrs.bool(default = False, doc = "ptxas --Ofast-compile=max"),
        "grants": attrs.list(attrs.string(), default = [], doc = "--grant DIR[:GUEST] for each (a relative DIR is taken where the program runs)"),
        "krate": attrs.string(doc = "the binary crate's folder, from the repo root"),
        "srcs": attrs.list(attrs.source(), default = [], doc = "every file the build reads (the crate, and libc-hostcall's and its dependencies' sources)"),
        "threads": attrs.int(default = 0, doc = "--threads (0: the runner's default)"),
    },
    doc = """An unmodified binary crate's `fn main`, built for the GPU by `cargo gpu build` into
one executable (the runner, the module and these options): `buck2 run` runs it on the
GPU with the arguments after `--`, as `cargo gpu run` does.""",
)
