//! `ptx-build`: the builder from the command line, with its progress on stderr. Without
//! a subcommand it runs the whole pipeline; each subcommand runs one stage
//! (`ptx_builder::stage`), which is how Buck2 caches the stages as separate actions.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use ptx_builder::{Cubins, PtxBuilder, PtxasOpt, stage};

/// Builds a Rust kernel crate that uses std into PTX (and cubins when ptxas is found).
#[derive(Parser)]
#[command(name = "ptx-build", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    stage: Option<Stage>,
    #[command(flatten)]
    whole: Whole,
}

/// The whole pipeline.
#[derive(clap::Args)]
struct Whole {
    /// The kernel crate's folder.
    krate: Option<PathBuf>,
    /// Also copy the module into this folder under stable names (module.ptx, ...).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    #[command(flatten)]
    target: Target,
    /// SM versions to build cubins for (repeatable).
    #[arg(long = "cubin", default_values_t = [ptx_builder::DEFAULT_SM])]
    cubin_sms: Vec<u32>,
    /// Fail if no ptxas is found.
    #[arg(long, conflicts_with = "no_cubins")]
    require_cubins: bool,
    /// Emit PTX only.
    #[arg(long)]
    no_cubins: bool,
    #[command(flatten)]
    opt: Opt,
    /// The nested build's target dir (default: the machine's cache, shared by every
    /// build).
    #[arg(long)]
    target_dir: Option<PathBuf>,
    /// Build the crate's binary (its only one, or NAME) instead of its library: its `fn
    /// main` becomes the kernel `__hostcall_start`.
    #[arg(long, value_name = "NAME", num_args = 0..=1)]
    bin: Option<Option<String>>,
}

/// What the PTX is lowered for.
#[derive(clap::Args)]
struct Target {
    /// SM version the PTX targets.
    #[arg(long, default_value_t = ptx_builder::DEFAULT_SM)]
    sm: u32,
    /// PTX ISA version to emit.
    #[arg(long, default_value_t = ptx_builder::DEFAULT_PTX_VERSION)]
    ptx_version: u32,
    /// Most threads per block any kernel is launched with (registers are capped to fit).
    #[arg(long, default_value_t = ptx_builder::DEFAULT_MAX_THREADS_PER_BLOCK)]
    max_threads_per_block: u32,
}

/// How hard ptxas optimizes.
#[derive(clap::Args)]
struct Opt {
    /// `ptxas --Ofast-compile=max` instead of `-O3`: for modules that test correctness
    /// only (much quicker and smaller on large modules; slower code).
    #[arg(long)]
    fast_compile: bool,
}

impl Opt {
    fn level(&self) -> PtxasOpt {
        if self.fast_compile {
            PtxasOpt::FastCompile
        } else {
            PtxasOpt::Full
        }
    }
}

/// One stage: every input and output is named on the command line.
#[derive(Subcommand)]
enum Stage {
    /// Build the kernel crate and std for the GPU into an archive of bitcode.
    Bitcode {
        /// The kernel crate's folder.
        krate: PathBuf,
        /// The nested cargo build's target dir (default: the machine's cache, shared by
        /// every build, so std for the GPU is built once).
        #[arg(long)]
        target_dir: Option<PathBuf>,
        /// The archive to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Link an archive's bitcode members into one module.
    Link {
        /// The archive (from `bitcode`).
        staticlib: PathBuf,
        /// The linked bitcode to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Internalize all but the kernels and optimize.
    Optimize {
        /// The linked bitcode.
        linked: PathBuf,
        /// A kernel to export (repeatable; default: every `extern "ptx-kernel"` fn).
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// The optimized bitcode to write.
        #[arg(long)]
        out: PathBuf,
        /// Where to write the exported kernels' names, one per line.
        #[arg(long)]
        kernels_out: PathBuf,
    },
    /// Lower optimized bitcode to PTX.
    Ptx {
        /// The optimized bitcode.
        optimized: PathBuf,
        #[command(flatten)]
        target: Target,
        /// The PTX to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Fail if the PTX calls a function nobody defines; else copy it to --out.
    Check {
        /// The PTX.
        ptx: PathBuf,
        /// The archive it came from, to name the crates that need a missing function.
        #[arg(long)]
        staticlib: PathBuf,
        /// Where the checked PTX goes.
        #[arg(long)]
        out: PathBuf,
    },
    /// Compile PTX to a cubin with ptxas (required).
    Cubin {
        /// The checked PTX.
        ptx: PathBuf,
        /// The SM version.
        #[arg(long, default_value_t = ptx_builder::DEFAULT_SM)]
        sm: u32,
        #[command(flatten)]
        opt: Opt,
        /// The cubin to write.
        #[arg(long)]
        out: PathBuf,
        /// Where to write each function's stack frame as ptxas reports it (for `module`).
        #[arg(long)]
        frames_out: PathBuf,
    },
    /// Put the PTX, cubins and kernel names under stable names in a folder, with the
    /// module's SHA-256.
    Module {
        /// The checked PTX.
        ptx: PathBuf,
        /// A cubin as SM=PATH (repeatable).
        #[arg(long = "cubin", value_parser = parse_cubin)]
        cubins: Vec<(u32, PathBuf)>,
        /// A cubin's frames (from `cubin --frames-out`; repeatable): the stack each GPU
        /// thread needs is computed from them.
        #[arg(long = "frames")]
        frames: Vec<PathBuf>,
        /// The kernel names (from `optimize`).
        #[arg(long)]
        kernels: PathBuf,
        /// The folder to write.
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Copy a module folder and write the Rust source that embeds it beside it.
    Embed {
        /// The module folder (from `module` or --out-dir).
        module: PathBuf,
        /// The folder to write (a crate's OUT_DIR).
        #[arg(long)]
        out_dir: PathBuf,
        /// The Rust file's name in it.
        #[arg(long)]
        file: String,
    },
}

fn parse_cubin(s: &str) -> Result<(u32, PathBuf), String> {
    let (sm, path) = s.split_once('=').ok_or("expected SM=PATH")?;
    let sm = sm.parse().map_err(|e| format!("SM {sm:?}: {e}"))?;
    Ok((sm, PathBuf::from(path)))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.stage {
        Some(s) => run_stage(s),
        None => run_whole(&cli.whole),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_stage(s: Stage) -> ptx_builder::Result<()> {
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).map_err(|source| ptx_builder::BuildError::Io {
            context: format!("writing {}", path.display()),
            source,
        })
    };
    match s {
        Stage::Bitcode {
            krate,
            target_dir,
            out,
        } => stage::bitcode(&krate, target_dir.as_deref(), &out),
        Stage::Link { staticlib, out } => stage::link(&staticlib, &out),
        Stage::Optimize {
            linked,
            kernels,
            out,
            kernels_out,
        } => {
            let chosen = (!kernels.is_empty()).then_some(kernels.as_slice());
            let exported = stage::optimize(&linked, chosen, &out)?;
            write(&kernels_out, exported.join("\n"))
        }
        Stage::Ptx {
            optimized,
            target,
            out,
        } => stage::emit_ptx(
            &optimized,
            target.sm,
            target.ptx_version,
            target.max_threads_per_block,
            &out,
        ),
        Stage::Check {
            ptx,
            staticlib,
            out,
        } => {
            let text = stage::check(&ptx, &staticlib)?;
            write(&out, text)
        }
        Stage::Cubin {
            ptx,
            sm,
            opt,
            out,
            frames_out,
        } => stage::cubin(&ptx, sm, opt.level(), &out, &frames_out),
        Stage::Module {
            ptx,
            cubins,
            frames,
            kernels,
            out_dir,
        } => {
            let names = std::fs::read_to_string(&kernels).map_err(|source| {
                ptx_builder::BuildError::Io {
                    context: format!("reading {}", kernels.display()),
                    source,
                }
            })?;
            let names: Vec<String> = names.lines().map(str::to_owned).collect();
            let m = stage::module(&ptx, &cubins, &frames, &names, &out_dir)?;
            println!("sha256  {}", m.sha256);
            print_stack(m.stack_bytes);
            Ok(())
        }
        Stage::Embed {
            module,
            out_dir,
            file,
        } => stage::embed(&module, &out_dir, &file),
    }
}

fn run_whole(a: &Whole) -> ptx_builder::Result<()> {
    let Some(krate) = &a.krate else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "name the kernel crate's folder, or a stage",
            )
            .exit()
    };
    let cubins = match (a.require_cubins, a.no_cubins) {
        (true, _) => Cubins::Required,
        (_, true) => Cubins::Off,
        _ => Cubins::IfPtxasFound,
    };
    let mut b = PtxBuilder::new(krate)
        .sm(a.target.sm)
        .ptx_version(a.target.ptx_version)
        .cubin_sms(&a.cubin_sms)
        .max_threads_per_block(a.target.max_threads_per_block)
        .ptxas_opt(a.opt.level())
        .cubins(cubins);
    if let Some(dir) = &a.target_dir {
        b = b.target_dir(dir);
    }
    if let Some(bin) = &a.bin {
        b = b.binary(bin.as_deref());
    }
    let mut m = b.build()?;
    if let Some(dir) = &a.out_dir {
        m = m.copy_to(dir)?;
    }
    println!("ptx     {}", m.ptx.display());
    for (sm, c) in &m.cubins {
        println!("sm_{sm}   {}", c.display());
    }
    println!("sha256  {}", m.sha256);
    println!("kernels {}", m.kernels.join(" "));
    print_stack(m.stack_bytes);
    Ok(())
}

/// The module's stack per GPU thread, where it is known.
fn print_stack(bytes: Option<u64>) {
    if let Some(b) = bytes {
        println!("stack   {b}");
    }
}
