//! `cargo gpu`: runs an unmodified Rust program's `fn main` on an NVIDIA GPU, the way
//! `cargo miri run` runs one under Miri.
//!
//! - `cargo gpu run [CRATE] [OPTIONS] -- ARGS`: builds the binary crate for the GPU and
//!   runs `main` on one GPU thread with ARGS; stdout and stderr pass through, and the
//!   exit code is the program's.
//! - `cargo gpu build [CRATE] [OPTIONS] -o FILE`: writes FILE, one executable holding this
//!   runner, the module and the options, to carry to a machine with a GPU and run there
//!   as `FILE ARGS`. Its user sees what it is granted there
//!   (`CARGO_GPU_RUNNER_FLAGS=--gpu-grants FILE`) and may take grants away (`recipient`).
//! - `cargo gpu test [CRATE] [OPTIONS] [TESTNAME] -- ARGS`: builds the package's test
//!   targets as `cargo test` does and runs each one's libtest on the GPU (`test`).
//!
//! The program sees only what OPTIONS grant (directories, variables, stdin, sockets).

mod messages;
mod options;
mod package;
mod recipient;
mod run;
mod test;
mod threads;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use options::RunOptions;
use package::Program;
use ptx_builder::{CargoArgs, Progress, PtxBuilder, PtxasOpt};

#[derive(Parser)]
#[command(name = "cargo gpu", bin_name = "cargo gpu", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a package's program for the GPU and run its `fn main` there.
    Run {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        target: RunTarget,
        /// The program's arguments (after `--`)
        #[arg(last = true)]
        args: Vec<String>,
        #[command(flatten, next_help_heading = "Run Options")]
        options: RunOptions,
    },
    /// Build a package's program for the GPU into one executable that runs it.
    Build {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        target: RunTarget,
        /// The executable to write
        #[arg(short, long, value_name = "FILE")]
        out: PathBuf,
        #[command(flatten, next_help_heading = "Run Options")]
        options: RunOptions,
    },
    /// Build a package's tests for the GPU and run them there, as `cargo test` does.
    Test {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        select: test::Selection,
        #[command(flatten)]
        how: test::How,
        /// If specified, only run tests containing this string in their names
        #[arg(value_name = "TESTNAME")]
        filter: Option<String>,
        /// Arguments for libtest (after `--`): `--test-threads N`, `--nocapture`,
        /// `--ignored`, `--list`, `--exact`, ...
        #[arg(last = true)]
        args: Vec<String>,
        #[command(flatten, next_help_heading = "Run Options")]
        options: RunOptions,
    },
}

/// The program target of `run` and `build`.
#[derive(clap::Args)]
struct RunTarget {
    /// Name of the bin target to run
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Target Selection",
        conflicts_with = "example"
    )]
    bin: Option<String>,
    /// Name of the example target to run
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    example: Option<String>,
}

impl RunTarget {
    /// `builder` set to build this target.
    fn select(&self, builder: PtxBuilder) -> PtxBuilder {
        match &self.example {
            Some(e) => builder.example(e),
            None => builder.binary(self.bin.as_deref()),
        }
    }
}

/// The program to build, chosen and configured with Cargo's flags, in Cargo's words.
#[derive(clap::Args)]
struct Source {
    /// The package's folder (as `--manifest-path CRATE/Cargo.toml`)
    #[arg(default_value = ".", value_name = "CRATE")]
    krate: PathBuf,
    /// Do not print cargo log messages (the build's steps, cargo gpu's notes)
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Use verbose output (every stage of the GPU build, and cargo's own output)
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Error format (a JSON one: Cargo's messages on stdout, each GPU build's artifact
    /// among them)
    #[arg(
        long,
        value_name = "FMT",
        value_delimiter = ',',
        value_parser = [
            "human",
            "short",
            "json",
            "json-diagnostic-short",
            "json-diagnostic-rendered-ansi",
            "json-render-diagnostics",
        ]
    )]
    message_format: Vec<String>,
    /// Package with the target to run
    #[arg(short, long, value_name = "SPEC", help_heading = "Package Selection")]
    package: Option<String>,
    /// Space or comma separated list of features to activate
    #[arg(
        short = 'F',
        long,
        value_name = "FEATURES",
        help_heading = "Feature Selection"
    )]
    features: Vec<String>,
    /// Activate all available features
    #[arg(long, help_heading = "Feature Selection")]
    all_features: bool,
    /// Do not activate the `default` feature
    #[arg(long, help_heading = "Feature Selection")]
    no_default_features: bool,
    /// Build with the release profile (the default for `run` and `build`; `test` uses
    /// the test profile, optimized)
    #[arg(
        short,
        long,
        help_heading = "Compilation Options",
        conflicts_with = "profile"
    )]
    release: bool,
    /// Build with the specified profile's settings
    ///
    /// Its checks, `lto`, `panic` and per-package settings; the GPU build is optimized
    /// and has one codegen unit whatever it says.
    #[arg(
        long,
        value_name = "PROFILE-NAME",
        help_heading = "Compilation Options"
    )]
    profile: Option<String>,
    /// Directory for all generated artifacts
    ///
    /// Default: the machine's cache, shared by every GPU build, so that std for the GPU
    /// is compiled once.
    #[arg(long, value_name = "DIRECTORY", help_heading = "Compilation Options")]
    target_dir: Option<PathBuf>,
    /// Compile the cubin fast (`ptxas --Ofast-compile=max`), for slower code
    ///
    /// The default, `-O3` in parts on every core, builds a program of serde_json, regex
    /// and sha2 in about a minute on 2 cores; this saves a few seconds of it.
    #[arg(long, help_heading = "Compilation Options")]
    fast_compile: bool,
    /// Path to Cargo.toml
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Manifest Options",
        conflicts_with = "krate"
    )]
    manifest_path: Option<PathBuf>,
    /// Assert that `Cargo.lock` will remain unchanged
    #[arg(long, help_heading = "Manifest Options")]
    locked: bool,
    /// Run without accessing the network
    #[arg(long, help_heading = "Manifest Options")]
    offline: bool,
    /// Equivalent to specifying both --locked and --offline
    #[arg(long, help_heading = "Manifest Options")]
    frozen: bool,
}

impl Source {
    /// The package's folder or manifest (or its workspace's, with `-p`).
    fn folder(&self) -> Result<&std::path::Path, String> {
        match &self.manifest_path {
            Some(m) if m.file_name().is_some_and(|f| f == "Cargo.toml") => Ok(m),
            Some(_) => Err("the manifest-path must be a path to a Cargo.toml file".into()),
            None => Ok(self.krate.as_path()),
        }
    }

    /// The builder these flags ask for, its target still to choose.
    fn builder(&self) -> Result<PtxBuilder, String> {
        let builder = PtxBuilder::new(self.folder()?);
        let builder = match &self.target_dir {
            Some(d) => builder.target_dir(d),
            None => builder,
        };
        let progress = if self.quiet {
            Progress::Quiet
        } else if self.verbose > 0 || std::env::var_os("CARGO_GPU_VERBOSE").is_some() {
            Progress::Stages
        } else {
            Progress::Status
        };
        Ok(builder
            .cargo_args(self.cargo_args())
            .ptxas_opt(if self.fast_compile {
                PtxasOpt::FastCompile
            } else {
                PtxasOpt::Full
            })
            .progress(progress))
    }

    /// The flags the builder takes as Cargo's.
    fn cargo_args(&self) -> CargoArgs {
        CargoArgs {
            package: self.package.clone(),
            features: self.features.clone(),
            all_features: self.all_features,
            no_default_features: self.no_default_features,
            profile: self.profile.clone(),
            locked: self.locked,
            offline: self.offline,
            frozen: self.frozen,
            message_format: self.message_format.clone(),
        }
    }

    /// Builds the module of `target` and reads it into a program named after it; with
    /// `out`, writes the program's executable there. With JSON messages, ends with the
    /// build's `compiler-artifact` and `build-finished`, as Cargo ends a build.
    fn build(
        &self,
        target: &RunTarget,
        options: &RunOptions,
        out: Option<&Path>,
    ) -> Result<Program, Box<dyn std::error::Error>> {
        let built = (|| {
            let module = target.select(self.builder()?).build()?;
            // The builder names the module's files after the target.
            let name = module
                .ptx
                .file_stem()
                .map_or_else(|| "main".to_owned(), |s| s.to_string_lossy().into_owned());
            let program = Program::from_module(&module, &name, options.to_args())?;
            if let Some(out) = out {
                program.write_executable(&std::env::current_exe()?, out)?;
            }
            if self.message_format_is_json() {
                messages::artifact(&module, out)
                    .iter()
                    .for_each(messages::print);
            }
            Ok(program)
        })();
        self.finish_build(built)
    }

    fn message_format_is_json(&self) -> bool {
        self.cargo_args().json_messages()
    }

    /// `built`, after `build-finished` says how it went (with JSON messages).
    fn finish_build<T>(
        &self,
        built: Result<T, Box<dyn std::error::Error>>,
    ) -> Result<T, Box<dyn std::error::Error>> {
        if self.message_format_is_json() {
            messages::print(&messages::build_finished(built.is_ok()));
        }
        built
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
            target,
            options,
            args,
        } => source
            .build(&target, &options, None)
            .map(|program| run::run(&program, &options, &args)),
        Command::Test {
            source,
            select,
            how,
            filter,
            args,
            options,
        } => test::test(&source, &select, &how, &options, filter, args),
        Command::Build {
            source,
            target,
            options,
            out,
        } => source.build(&target, &options, Some(&out)).map(|_| {
            if source.quiet {
                return ExitCode::SUCCESS;
            }
            eprintln!(
                "cargo gpu: wrote {} (run it as `{} ARGS`; `{}=--gpu-grants {}` shows what it is granted where it runs)",
                out.display(),
                out.display(),
                recipient::FLAGS_VAR,
                out.display()
            );
            for note in recipient::resolved_at_start(&options) {
                eprintln!("cargo gpu: note: {note}");
            }
            ExitCode::SUCCESS
        }),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(TOOL_FAILED)
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn source(args: &[&str]) -> (Source, RunTarget) {
        let argv = ["cargo-gpu", "build", "-o", "x"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Build { source, target, .. } => (source, target),
            _ => unreachable!("parsed as build"),
        }
    }

    #[test]
    fn cargos_flags_reach_the_builder_with_cargos_meaning() {
        let (s, target) = source(&[
            "-p",
            "app@0.1.0",
            "-F",
            "a b",
            "--features",
            "c",
            "--all-features",
            "--no-default-features",
            "--profile",
            "gpu",
            "--locked",
            "--offline",
            "--frozen",
            "--target-dir",
            "/t",
            "--manifest-path",
            "w/Cargo.toml",
            "--example",
            "e",
            "-vv",
            "--message-format",
            "json,json-diagnostic-short",
        ]);
        assert_eq!(
            s.cargo_args(),
            CargoArgs {
                package: Some("app@0.1.0".into()),
                features: vec!["a b".into(), "c".into()],
                all_features: true,
                no_default_features: true,
                profile: Some("gpu".into()),
                locked: true,
                offline: true,
                frozen: true,
                message_format: vec!["json".into(), "json-diagnostic-short".into()],
            }
        );
        assert_eq!(s.target_dir.as_deref(), Some(Path::new("/t")));
        assert_eq!(target.example.as_deref(), Some("e"));
        assert_eq!(s.verbose, 2);
        assert!(s.builder().is_ok());
        let (release, _) = source(&["-r", "--bin", "b", "-q"]);
        assert!(release.release && release.quiet && release.cargo_args() == CargoArgs::default());
    }

    #[test]
    fn flags_that_contradict_each_other_are_refused() {
        for contradiction in [
            &["--bin", "a", "--example", "b"][..],
            &["--release", "--profile", "p"],
            &["-q", "-v"],
            &["--manifest-path", "a/Cargo.toml", "b"],
            &["--message-format", "yaml"],
        ] {
            let argv = ["cargo-gpu", "build", "-o", "x"]
                .iter()
                .chain(contradiction);
            assert!(Cli::try_parse_from(argv).is_err(), "{contradiction:?}");
        }
    }
}
