//! `cargo gpu test`: a package's tests run on the GPU as `cargo test` runs them on the
//! CPU. Each test target (the library's unit tests, each binary's, each integration
//! test) is built with libtest's harness in Cargo's `test` profile, dev-dependencies
//! included, and its `main` runs on the GPU with libtest's arguments: libtest's own
//! output and exit code, each test on a thread of its own, a panicking test a failure
//! of that test (`catch_unwind` unwinds on the GPU). Doc tests are not run: rustdoc
//! compiles each one into a host program of its own.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hostcall_runtime::EXIT_NO_GPU;
use ptx_builder::TestTarget;

use crate::options::RunOptions;
use crate::package::Program;
use crate::{Source, messages, run};

/// Which targets' tests run, with `cargo test`'s flags; none given: all of them.
#[derive(clap::Args, Debug, Default)]
pub struct Selection {
    /// Test only this package's library
    #[arg(long, help_heading = "Target Selection")]
    lib: bool,
    /// Test all binaries
    #[arg(long, help_heading = "Target Selection")]
    bins: bool,
    /// Test only the specified binary (repeatable)
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    bin: Vec<String>,
    /// Test all targets that have `test = true` set (the integration tests)
    #[arg(long, help_heading = "Target Selection")]
    tests: bool,
    /// Test only the specified test target (repeatable)
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    test: Vec<String>,
}

impl Selection {
    /// The targets of `all` these flags pick, in `all`'s order; an error for a named
    /// target the package lacks.
    fn pick(&self, all: Vec<(TestTarget, PathBuf)>) -> Result<Vec<(TestTarget, PathBuf)>, String> {
        for (kind, names) in [("bin", &self.bin), ("test", &self.test)] {
            for name in names {
                let found = all.iter().any(|(t, _)| match t {
                    TestTarget::Bin(n) => kind == "bin" && n == name,
                    TestTarget::Integration(n) => kind == "test" && n == name,
                    TestTarget::Lib => false,
                });
                if !found {
                    return Err(format!("no {kind} target named `{name}` in the package"));
                }
            }
        }
        if self.lib && !all.iter().any(|(t, _)| *t == TestTarget::Lib) {
            return Err("no library targets found in the package".into());
        }
        let everything =
            !(self.lib || self.bins || self.tests) && self.bin.is_empty() && self.test.is_empty();
        Ok(all
            .into_iter()
            .filter(|(t, _)| {
                everything
                    || match t {
                        TestTarget::Lib => self.lib,
                        TestTarget::Bin(n) => self.bins || self.bin.contains(n),
                        TestTarget::Integration(n) => self.tests || self.test.contains(n),
                    }
            })
            .collect())
    }
}

/// How the tests run, with `cargo test`'s flags.
#[derive(clap::Args, Debug, Default)]
pub struct How {
    /// Compile, but don't run tests: with --out-dir, one executable per target to carry
    /// to a machine with a GPU
    #[arg(long, help_heading = "Compilation Options")]
    no_run: bool,
    /// With --no-run: the folder for the executables (`lib-NAME`, `bin-NAME`,
    /// `test-NAME`), each run there as `FILE [TESTNAME] [libtest's options]`
    #[arg(
        long,
        value_name = "DIR",
        requires = "no_run",
        help_heading = "Compilation Options"
    )]
    out_dir: Option<PathBuf>,
    /// Run all tests regardless of failure
    #[arg(long)]
    no_fail_fast: bool,
}

/// The executable's name for `target` (argv[0] of its run).
fn file_name(target: &TestTarget, lib: &str) -> String {
    match target {
        TestTarget::Lib => format!("lib-{lib}"),
        TestTarget::Bin(n) => format!("bin-{n}"),
        TestTarget::Integration(n) => format!("test-{n}"),
    }
}

/// Cargo's flag that selects `target` alone, for the line naming a failed one.
fn rerun_flag(target: &TestTarget) -> String {
    match target {
        TestTarget::Lib => "--lib".into(),
        TestTarget::Bin(n) => format!("--bin {n}"),
        TestTarget::Integration(n) => format!("--test {n}"),
    }
}

/// What `cargo test` says before running `target`: `unittests src/lib.rs`, or the
/// integration test's source, relative to the package.
fn describe(target: &TestTarget, source: &Path, package: &Path) -> String {
    let shown = source.strip_prefix(package).unwrap_or(source).display();
    match target {
        TestTarget::Integration(_) => shown.to_string(),
        _ => format!("unittests {shown}"),
    }
}

/// Builds and runs the picked targets' tests; the exit code is 101 when one failed
/// (as `cargo test`'s), `EXIT_NO_GPU` when there is no GPU.
pub fn test(
    source: &Source,
    select: &Selection,
    how: &How,
    options: &RunOptions,
    filter: Option<String>,
    args: Vec<String>,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut cargo_args = source.cargo_args();
    if source.release {
        cargo_args.profile = Some("release".into());
    }
    let folder = source.folder()?;
    let targets = select.pick(ptx_builder::test_targets(folder, &cargo_args)?)?;
    // Sources are shown relative to the package's folder, as Cargo shows them.
    let package = ptx_builder::crate_folder(folder);
    let package = package.canonicalize().unwrap_or(package);
    let libtest_args: Vec<String> = filter.into_iter().chain(args).collect();
    // Every target is built before any runs, as Cargo builds them.
    let built = source.finish_build((|| {
        let mut built = Vec::new();
        for (target, src) in &targets {
            let module = source.builder()?.tests(target.clone()).build()?;
            let lib = module
                .ptx
                .file_stem()
                .map_or_else(|| "tests".to_owned(), |s| s.to_string_lossy().into_owned());
            let name = file_name(target, &lib);
            let written = match &how.out_dir {
                Some(dir) => {
                    std::fs::create_dir_all(dir)?;
                    let out = dir.join(&name);
                    Program::from_module(&module, &name, options.to_args())?
                        .write_executable(&std::env::current_exe()?, &out)?;
                    if !source.quiet {
                        eprintln!(
                            "  Executable {} ({})",
                            describe(target, src, &package),
                            out.display()
                        );
                    }
                    Some(out)
                }
                None => None,
            };
            if source.message_format_is_json() {
                messages::artifact(&module, written.as_deref())
                    .iter()
                    .for_each(messages::print);
            }
            built.push((target, src, module, name));
        }
        Ok(built)
    })())?;
    if how.no_run {
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = Vec::new();
    for (target, src, module, name) in built {
        if !source.quiet {
            eprintln!(
                "     Running {} ({name} on the GPU)",
                describe(target, src, &package)
            );
        }
        let program = Program::from_module(&module, &name, options.to_args())?;
        match run::exit_code(&program, options, &libtest_args) {
            0 => {}
            EXIT_NO_GPU => return Ok(ExitCode::from(EXIT_NO_GPU)),
            _ => {
                failed.push(rerun_flag(target));
                if !how.no_fail_fast {
                    break;
                }
            }
        }
    }
    match failed.as_slice() {
        [] => Ok(ExitCode::SUCCESS),
        [one] => {
            eprintln!("error: test failed, to rerun pass `{one}`");
            Ok(ExitCode::from(TESTS_FAILED))
        }
        many => {
            eprintln!("error: {} targets failed:", many.len());
            for f in many {
                eprintln!("    `{f}`");
            }
            Ok(ExitCode::from(TESTS_FAILED))
        }
    }
}

/// `cargo test`'s exit code when a test failed.
const TESTS_FAILED: u8 = 101;

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<(TestTarget, PathBuf)> {
        vec![
            (TestTarget::Lib, "src/lib.rs".into()),
            (TestTarget::Bin("app".into()), "src/main.rs".into()),
            (TestTarget::Integration("it".into()), "tests/it.rs".into()),
            (
                TestTarget::Integration("other".into()),
                "tests/other.rs".into(),
            ),
        ]
    }

    fn names(picked: &[(TestTarget, PathBuf)]) -> Vec<String> {
        picked.iter().map(|(t, _)| rerun_flag(t)).collect()
    }

    #[test]
    fn no_flag_picks_every_target_as_cargo_test_does() {
        let picked = Selection::default().pick(all()).unwrap();
        assert_eq!(
            names(&picked),
            ["--lib", "--bin app", "--test it", "--test other"]
        );
    }

    #[test]
    fn flags_pick_their_targets_and_a_missing_one_is_named() {
        let s = Selection {
            lib: true,
            test: vec!["other".into()],
            ..Selection::default()
        };
        assert_eq!(names(&s.pick(all()).unwrap()), ["--lib", "--test other"]);
        let s = Selection {
            bins: true,
            tests: true,
            ..Selection::default()
        };
        assert_eq!(
            names(&s.pick(all()).unwrap()),
            ["--bin app", "--test it", "--test other"]
        );
        let missing = Selection {
            test: vec!["nope".into()],
            ..Selection::default()
        };
        assert_eq!(
            missing.pick(all()).unwrap_err(),
            "no test target named `nope` in the package"
        );
        let no_lib = Selection {
            lib: true,
            ..Selection::default()
        };
        assert!(no_lib.pick(all()[1..].to_vec()).is_err());
    }

    #[test]
    fn targets_are_described_and_named_as_cargo_names_them() {
        let pkg = Path::new("/p");
        assert_eq!(
            describe(&TestTarget::Lib, Path::new("/p/src/lib.rs"), pkg),
            "unittests src/lib.rs"
        );
        assert_eq!(
            describe(
                &TestTarget::Integration("it".into()),
                Path::new("/p/tests/it.rs"),
                pkg
            ),
            "tests/it.rs"
        );
        assert_eq!(file_name(&TestTarget::Lib, "sample"), "lib-sample");
        assert_eq!(
            file_name(&TestTarget::Integration("it".into()), "it"),
            "test-it"
        );
    }
}
