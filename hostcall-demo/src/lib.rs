//! The culinux demo as a library for `hostcalls_bin` and `hostcall_bench`: the kernel's
//! modes and the checks of what it prints (the GPU module itself is the `culinux-ptx`
//! crate's), and the figures `hostcall_bench` takes from ordinary programs ([`programs`]).

pub mod check;
pub mod programs;

use std::process::ExitCode;

use hostcall_runtime::cuda::{CudaModule, CudaOptions, ModuleImage};

/// The commit this binary was built from (`git rev-parse HEAD` at build time).
pub const COMMIT: &str = env!("HOSTCALL_COMMIT");

/// Where the demo kernel sees its pre-opened working directory (`$CULINUX_DIR`).
pub const GUEST_DIR: &str = "/culinux";

/// Values of culinux's `mode` parameter.
pub mod mode {
    /// Every thread prints its line; one thread round-trips a file.
    pub const NORMAL: u32 = 0;
    /// Block 1 thread 3 panics.
    pub const PANIC: u32 = 1;
    /// Block 0 thread 0 calls `std::process::exit(3)`.
    pub const EXIT: u32 = 2;
    /// Every thread echoes 64 tokens through the host and checks them.
    pub const PING: u32 = 3;
    /// Thread 0 times 2000 round trips.
    pub const LATENCY: u32 = 4;
    /// Every thread prints 16 lines.
    pub const PRINTLN: u32 = 5;
    /// Thread 0 writes 1 GiB through `std::fs`.
    pub const BULK_WRITE: u32 = 6;
    /// Every thread allocates and frees 256 64-byte boxes.
    pub const MALLOC: u32 = 7;
    /// Every thread makes 64 verified null round trips; the last reports the span.
    pub const NULL: u32 = 8;
    /// Lanes mix posted lines and token-checked round trips at one call site.
    pub const MIXED: u32 = 9;
    /// Thread 0 sleeps 5 s, then times round trips as `LATENCY` does.
    pub const SLEEP: u32 = 10;
    /// Every thread spins forever without calling the host.
    pub const SPIN: u32 = 11;
    /// Every thread calls the host in an endless loop.
    pub const CALL_LOOP: u32 = 12;
    /// Thread 0 writes 300 MiB to stdout in one `write_all` while the others print.
    pub const BIG_WRITE: u32 = 13;
    /// `ktyped`: every thread's verified typed calls of a host closure.
    pub const TYPED_NULL: u32 = 14;
    /// `ktyped`: thread 0 times typed calls alone.
    pub const TYPED_LATENCY: u32 = 15;
    /// Every thread's allocation fails: std's runtime prints `memory allocation of N
    /// bytes failed` (in pieces) and aborts.
    pub const ALLOC_FAIL: u32 = 16;
    /// Block 0 thread 0 recurses with a 1 KiB frame 256 deep, past any default stack.
    pub const STACK_OVERFLOW: u32 = 17;
    /// `kmath`'s functions, by its argument, as `bench/limits.cu` names CUDA's: every
    /// thread evaluates one 65,536 times (no hostcall).
    pub const MATH_FUNCTIONS: [&str; 8] =
        ["sin", "exp", "log", "pow", "sinf", "expf", "logf", "powf"];
    /// Evaluations per thread of `kmath`.
    pub const MATH_EVALS: u32 = 65536;
}

/// An example binary's `main` (`add42`, `heatmap`, `lifetimes`): logging set up, its
/// arguments `A` parsed and the GPU module `image` loaded (culinux's, which only the
/// binaries embed: an edit of culinux rebuilds no library), then `run`; success when
/// `run` found every check right, failure when not, and an error as one line naming
/// `name`.
pub fn example_main<A: clap::Parser>(
    name: &str,
    image: ModuleImage<'_>,
    run: impl FnOnce(&A, &mut CudaModule) -> Result<bool, Box<dyn std::error::Error>>,
) -> ExitCode {
    hostcall_runtime::init_logging();
    let args = A::parse();
    let ran = CudaModule::load(&image, &CudaOptions::default())
        .map_err(Into::into)
        .and_then(|mut module| run(&args, &mut module));
    match ran {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
