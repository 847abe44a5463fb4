//! `cargo gpu`: runs an unmodified Rust program's `fn main` on an NVIDIA GPU, the way
//! `cargo miri run` runs one under Miri.
//!
//! - `cargo gpu run [CRATE] [OPTIONS] -- ARGS`: builds the binary crate for the GPU and
//!   runs `main` on one GPU thread with ARGS; stdout and stderr pass through, and the
//!   exit code is the program's.
//! - `cargo gpu build [CRATE] [OPTIONS] -o FILE`: writes FILE, one executable holding this
//!   runner, the module and the options, to carry to a machine with a GPU and run there
//!   as `FILE ARGS`. Its user sees what it is granted there (`FILE --gpu-grants`) and may
//!   take grants away (`recipient`).
//!
//! The program sees only what OPTIONS grant (directories, variables, stdin, sockets).

mod options;
mod package;
mod recipient;
mod run;
mod threads;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use options::RunOptions;
use package::Program;
use ptx_builder::{PtxBuilder, PtxasOpt};

#[derive(Parser)]
#[command(name = "cargo gpu", bin_name = "cargo gpu", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the crate's `fn main` for the GPU and run it.
    Run {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        options: RunOptions,
        /// The program's arguments (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Build the crate's `fn main` for the GPU into one executable that runs it.
    Build {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        options: RunOptions,
        /// The executable to write.
        #[arg(short, long)]
        out: PathBuf,
    },
}

/// The binary crate to build.
#[derive(clap::Args)]
struct Source {
    /// The crate's folder.
    #[arg(default_value = ".")]
    krate: PathBuf,
    /// Which binary, when the crate has several.
    #[arg(long)]
    bin: Option<String>,
    /// Compile the cubin fast (`ptxas --Ofast-compile=max`): minutes less for a large
    /// program, slower code.
    #[arg(long)]
    fast_compile: bool,
}

impl Source {
    /// Builds the module and reads it into a program named after the binary.
    fn build(&self, options: &RunOptions) -> Result<Program, Box<dyn std::error::Error>> {
        let module = PtxBuilder::new(&self.krate)
            .binary(self.bin.as_deref())
            .ptxas_opt(if self.fast_compile {
                PtxasOpt::FastCompile
            } else {
                PtxasOpt::Full
            })
            .quiet(std::env::var_os("CARGO_GPU_VERBOSE").is_none())
            .build()?;
        // The builder names the module's files after the binary.
        let name = module
            .ptx
            .file_stem()
            .map_or_else(|| "main".to_owned(), |s| s.to_string_lossy().into_owned());
        Ok(Program::from_module(&module, &name, options.to_args())?)
    }
}

/// Exit code for a failure of this tool itself (as `cargo` uses).
const TOOL_FAILED: u8 = 101;

fn main() -> ExitCode {
    let exe = std::env::current_exe();
    match exe.as_deref().map(Program::attached_to) {
        Ok(Ok(Some(program))) => return run::packaged(&program),
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(TOOL_FAILED);
        }
        _ => {}
    }
    // Run as `cargo gpu ...`, cargo passes "gpu" first.
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "gpu") {
        argv.remove(1);
    }
    let result = match Cli::parse_from(argv).command {
        Command::Run {
            source,
            options,
            args,
        } => source
            .build(&options)
            .map(|program| run::run(&program, &options, &args)),
        Command::Build {
            source,
            options,
            out,
        } => source.build(&options).and_then(|program| {
            program.write_executable(&std::env::current_exe()?, &out)?;
            eprintln!(
                "cargo gpu: wrote {} (run it as `{} ARGS`; `{} --gpu-grants` shows what it is granted where it runs)",
                out.display(),
                out.display(),
                out.display()
            );
            for note in recipient::resolved_at_start(&options) {
                eprintln!("cargo gpu: note: {note}");
            }
            Ok(ExitCode::SUCCESS)
        }),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(TOOL_FAILED)
    })
}
