//! The conformance suite's spawning programs as one GPU binary: its `main` runs as a
//! process's main thread (`hostcall_abi::START_KERNEL`), with GPU threads held back for
//! the threads a program spawns, and runs the program its `argv[0]` names, as the CPU
//! side's child process does.

use std::process::ExitCode;

/// Only the spawning programs run here; the others are the kernel module's.
#[path = "../../programs/mod.rs"]
#[allow(dead_code)]
mod programs;

/// The spawning programs by name, and as tests: `cargo gpu test` runs the suite's
/// thread programs under libtest on the GPU (side by side on test threads, their output
/// captured) as `cargo test` runs them on the CPU, and the same verdicts both ways is the
/// check (`cargo-gpu/tests/test_command.rs`; conformance's own harness compares their
/// output byte for byte). The limits programs are not tests: one reaches the GPU's thread
/// limit on purpose, which would starve the tests beside it.
macro_rules! table {
    (
        single: [$($s:ident),*],
        threaded: [$($t:ident),*],
        unsupported: [$($u:ident),*],
        spawning: [$($p:ident),*],
        limits: [$($l:ident),*] $(,)?
    ) => {
        /// Every spawning program by name.
        const SPAWNING: &[(&str, fn())] = &[
            $((stringify!($p), programs::$p::main),)*
            $((stringify!($l), programs::$l::main),)*
        ];

        #[cfg(test)]
        mod tests {
            $(
                #[test]
                fn $p() {
                    crate::programs::$p::main();
                }
            )*
        }
    };
}
programs::with_suite!(table);

fn main() -> ExitCode {
    let name = std::env::args().next().unwrap_or_default();
    match SPAWNING.iter().find(|(n, _)| *n == name) {
        Some((_, main)) => {
            main();
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("conformance-spawning: no spawning program named {name:?}");
            ExitCode::from(2)
        }
    }
}
