//! Running a program: its module loaded on GPU 0, the host built from the options, and
//! `main` launched on one GPU thread (`hostcall_abi::START_KERNEL`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use clap::Parser;
use hostcall_abi::{START_KERNEL, WARP_SIZE};
use hostcall_runtime::cuda::{CudaModule, CudaOptions, ModuleImage};
use hostcall_runtime::{GpuModule, Host, Launch};

use crate::options::RunOptions;
use crate::package::Program;
use crate::{recipient, threads};

/// Exit code when the program could not run for a reason other than the GPU (a refused
/// option): the runtime's, as for a fault.
const NOT_RUN: u8 = hostcall_runtime::EXIT_RUN_FAILED;

/// Runs `program` with `options`, its arguments `args` (after its name, any bytes), and
/// returns the program's exit code.
pub fn run(program: &Program, options: &RunOptions, args: &[impl AsRef<OsStr>]) -> ExitCode {
    ExitCode::from(exit_code(program, options, args))
}

/// [`run`], its exit code as a number.
pub fn exit_code(program: &Program, options: &RunOptions, args: &[impl AsRef<OsStr>]) -> u8 {
    // The runtime's warnings (a stack below the module's need, say) reach stderr.
    hostcall_runtime::init_logging();
    match launch(program, options, args) {
        Ok(code) => code as u8,
        Err(e) => {
            eprintln!("error: {e}");
            // No GPU here is told apart from a failed run (`hostcall_runtime::EXIT_NO_GPU`).
            e.downcast_ref::<hostcall_runtime::Error>()
                .map_or(NOT_RUN, hostcall_runtime::Error::exit_code)
        }
    }
}

/// Runs a packaged program with the options it recorded, narrowed by the runner flags
/// its user gave in their variable (`recipient`), and every argument of this process
/// after its name.
pub fn packaged(program: &Program) -> ExitCode {
    #[derive(Parser)]
    struct Recorded {
        #[command(flatten)]
        options: RunOptions,
    }
    let recorded = std::iter::once(program.name.clone()).chain(program.options.iter().cloned());
    let mut options = match Recorded::try_parse_from(recorded) {
        Ok(r) => r.options,
        Err(e) => {
            eprintln!("error: the program's recorded options: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    let (flags, args) = match recipient::of_this_process() {
        Ok(split) => split,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(NOT_RUN);
        }
    };
    if let Err(e) = flags.narrow(&mut options) {
        eprintln!("error: {e}");
        return ExitCode::from(NOT_RUN);
    }
    if flags.show {
        print!(
            "{} is granted, started here:\n{}",
            program.name,
            recipient::describe(&options)
        );
        return ExitCode::SUCCESS;
    }
    run(program, &options, &args)
}

fn launch(
    program: &Program,
    options: &RunOptions,
    args: &[impl AsRef<OsStr>],
) -> Result<i32, Box<dyn std::error::Error>> {
    let cubins: Vec<(u32, &[u8])> = program
        .cubins
        .iter()
        .map(|(sm, c)| (*sm, c.as_slice()))
        .collect();
    let image = ModuleImage {
        ptx: &program.ptx,
        cubins: &cubins,
        sha256: &program.sha256,
        stack_bytes: program.stack_bytes.map(|b| b as usize),
    };
    let mut cuda = CudaOptions::default();
    if let Some(kib) = options.stack_kib {
        cuda = cuda.stack_bytes(kib << 10);
    }
    let mut module = CudaModule::load(&image, &cuda)?;
    let argv: Vec<&[u8]> = std::iter::once(program.name.as_bytes())
        .chain(args.iter().map(|a| a.as_ref().as_bytes()))
        .collect();
    let mut host = options
        .apply(Host::builder(), &argv)?
        .executable(&program.file);
    let heap = match options.heap_mib {
        Some(mib) => mib << 20,
        None => module.process_heap_bytes()?,
    };
    host = host.heap_bytes(heap);
    // One warp per block, spread over the SMs: thread 0 runs `main`, and the first
    // `lanes` lanes of each warp are held back for threads (libc-hostcall's start kernel).
    let sms = match module.multiprocessors() {
        0 => return Err(format!("{} reports no multiprocessors", module.describe()).into()),
        n => n,
    };
    let g = threads::geometry(options.threads, sms)?;
    host = host.program_threads(g.threads, g.lanes);
    let launch = Launch::linear(START_KERNEL, g.warps, WARP_SIZE as u32, Vec::new());
    let report = host.build()?.run(&mut module, &launch)?;
    if let Some(why) = report.outcome.failure() {
        eprintln!("{}: {why}", program.name);
    }
    Ok(report.outcome.exit_code())
}
