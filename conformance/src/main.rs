//! `conformance`: runs every program of `conformance/programs` on the CPU and on the GPU
//! and compares stdout, stderr, the exit code and the files produced, byte for byte
//! after the normalisation rules of [`compare`].
//!
//! Each run is a child process of this binary in a fresh working directory holding
//! `input.txt`, with the suite's arguments, environment and stdin (`suite`). Single
//! programs run at one thread; threaded programs run at one thread and, with
//! `--geometry BLOCKSxTHREADS`, at that many GPU threads against as many OS threads.
//! Spawning programs run as a process's `main`, which starts threads of its own (on the
//! GPU, a binary's `main` with threads held back for it to spawn).
//! With no GPU (or `--cpu-only`) each CPU run is made twice and compared with itself:
//! the suite's outputs must not depend on the run.

mod compare;
mod exec;
mod observe;
mod suite;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::exec::Request;
use crate::observe::Observed;
use crate::suite::{Kind, Program};

#[derive(Parser, Debug)]
#[command(about = "Runs the std conformance programs on the CPU and the GPU and compares them")]
struct Args {
    /// Also run threaded programs at this many GPU threads (and OS threads), e.g. 132x256.
    #[arg(long, value_parser = parse_geometry)]
    geometry: Option<(u32, u32)>,
    /// Skip the GPU: run each program twice on the CPU and compare the runs.
    #[arg(long)]
    cpu_only: bool,
    /// Write the table of results (Markdown) here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Each GPU thread's stack in KiB, instead of what each module's build computed
    /// (to see what a program needs).
    #[arg(long, value_name = "KIB")]
    stack_kib: Option<usize>,
    /// Lanes of each warp that run a spawning program's threads on the GPU, 1 to 32:
    /// 1 gives each thread a warp, 32 packs them all on one warp's lanes.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=32))]
    thread_lanes: u32,
    /// Keep both sides' stdout and stderr of every run that differs in this folder.
    #[arg(long)]
    artifacts: Option<PathBuf>,
    /// Programs to run (all when none).
    names: Vec<String>,
}

fn parse_geometry(s: &str) -> Result<(u32, u32), String> {
    let (b, t) = s.split_once('x').ok_or("expected BLOCKSxTHREADS")?;
    let n = |v: &str| {
        v.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or(format!("{v:?} is not a positive number"))
    };
    Ok((n(b)?, n(t)?))
}

/// One row of the table.
struct Row {
    program: &'static str,
    threads: String,
    cpu: String,
    gpu: String,
    verdict: Verdict,
}

#[derive(PartialEq, Eq)]
enum Verdict {
    Identical,
    Differs(Vec<String>),
    GpuSkipped,
    Failed(String),
}

fn main() -> ExitCode {
    if let Some(code) = exec::child() {
        return code;
    }
    hostcall_runtime::init_logging();
    let args = Args::parse();
    let programs: Vec<Program> = if args.names.is_empty() {
        suite::all()
    } else {
        match args.names.iter().map(|n| suite::find(n).ok_or(n)).collect() {
            Ok(p) => p,
            Err(n) => {
                eprintln!("conformance: no program named {n:?}");
                return ExitCode::from(2);
            }
        }
    };
    let mut gpu = !args.cpu_only;
    let mut rows = Vec::new();
    for p in &programs {
        let mut geometries = vec![(1, 1)];
        if let (true, Some(g)) = (p.threaded(), args.geometry) {
            geometries.push(g);
        }
        for geometry in geometries {
            let row = compare_one(
                *p,
                geometry,
                (args.stack_kib, args.thread_lanes),
                &mut gpu,
                args.artifacts.as_deref(),
            );
            println!(
                "{:<20} {:>9}  {}",
                row.program,
                row.threads,
                verdict_text(&row.verdict)
            );
            rows.push(row);
        }
    }
    let table = markdown(&rows);
    if let Some(path) = &args.report
        && let Err(e) = std::fs::write(path, &table)
    {
        eprintln!("conformance: writing {}: {e}", path.display());
        return ExitCode::from(2);
    }
    let bad = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Differs(_) | Verdict::Failed(_)))
        .count();
    let skipped = rows
        .iter()
        .filter(|r| r.verdict == Verdict::GpuSkipped)
        .count();
    println!(
        "{} runs: {} identical, {bad} not, {skipped} without a GPU{}",
        rows.len(),
        rows.len() - bad - skipped,
        if skipped > 0 {
            " (SKIPPED: the CPU side was run twice and compared with itself)"
        } else {
            ""
        }
    );
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `p` both ways at `geometry` and compares. `gpu` turns false once the GPU side
/// finds no GPU; from then on the CPU side is compared with a second CPU run.
fn compare_one(
    p: Program,
    geometry: (u32, u32),
    (stack_kib, thread_lanes): (Option<usize>, u32),
    gpu: &mut bool,
    artifacts: Option<&std::path::Path>,
) -> Row {
    let threads = geometry.0 as usize * geometry.1 as usize;
    let shape = if threads == 1 {
        "1".to_owned()
    } else {
        format!("{}x{}", geometry.0, geometry.1)
    };
    let cpu = observe(Request {
        gpu: false,
        program: p,
        geometry,
        stack_kib,
        thread_lanes,
    });
    let mut other = if *gpu {
        Some(observe(Request {
            gpu: true,
            program: p,
            geometry,
            stack_kib,
            thread_lanes,
        }))
    } else {
        None
    };
    if let Some(Ok(o)) = &other
        && o.code == i32::from(hostcall_runtime::EXIT_NO_GPU)
        && String::from_utf8_lossy(&o.stderr).contains("no NVIDIA GPU")
    {
        *gpu = false;
        other = None;
    }
    let skipped = other.is_none();
    let other = other.unwrap_or_else(|| {
        observe(Request {
            gpu: false,
            program: p,
            geometry,
            stack_kib,
            thread_lanes,
        })
    });
    let code =
        |o: &Result<Observed, String>| o.as_ref().map_or("-".to_owned(), |o| o.code.to_string());
    let (cpu_code, gpu_code) = (
        code(&cpu),
        if skipped {
            "-".to_owned()
        } else {
            code(&other)
        },
    );
    let verdict = match (cpu, other) {
        (Err(e), _) => Verdict::Failed(format!("CPU run: {e}")),
        (_, Err(e)) => Verdict::Failed(format!(
            "{} run: {e}",
            if skipped { "second CPU" } else { "GPU" }
        )),
        (Ok(cpu), Ok(other)) => {
            let diffs = match p.kind {
                Kind::Unsupported(_, expected) | Kind::Spawning(_, Some(expected)) if !skipped => {
                    expected_differences(p.name, expected, &other)
                }
                _ => compare::differences(&cpu, &other, threads),
            };
            if let (false, Some(dir)) = (diffs.is_empty(), artifacts) {
                keep(dir, &format!("{}-{shape}", p.name), &cpu, &other);
            }
            match (diffs.is_empty(), skipped) {
                (false, _) => Verdict::Differs(diffs),
                (true, true) => Verdict::GpuSkipped,
                (true, false) => Verdict::Identical,
            }
        }
    };
    Row {
        program: p.name,
        threads: shape,
        cpu: cpu_code,
        gpu: gpu_code,
        verdict,
    }
}

/// An unsupported or limits program's GPU run against `expected/NAME.stdout` (and exit
/// 0).
fn expected_differences(name: &str, expected: &str, gpu: &Observed) -> Vec<String> {
    let mut diffs = Vec::new();
    if gpu.code != 0 {
        diffs.push(format!("exit code {} on the GPU, 0 expected", gpu.code));
    }
    if gpu.stdout != expected.as_bytes() {
        let first = compare::first_difference(expected.as_bytes(), &gpu.stdout);
        diffs.push(format!("stdout against expected/{name}.stdout: {first}"));
    }
    diffs
}

/// Writes both sides' outputs of a run that differed (a failure to keep them is only
/// reported: the verdict stands).
fn keep(dir: &std::path::Path, run: &str, cpu: &Observed, gpu: &Observed) {
    let files = [
        ("cpu.stdout", &cpu.stdout),
        ("cpu.stderr", &cpu.stderr),
        ("gpu.stdout", &gpu.stdout),
        ("gpu.stderr", &gpu.stderr),
    ];
    for (what, bytes) in files {
        let path = dir.join(format!("{run}.{what}"));
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, bytes)) {
            eprintln!("conformance: keeping {}: {e}", path.display());
        }
    }
}

fn observe(r: Request) -> Result<Observed, String> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("conformance-{}-", r.program.name))
        .tempdir()
        .map_err(|e| format!("making a working directory: {e}"))?;
    observe::run(&r, dir.path())
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Identical => "identical".into(),
        Verdict::GpuSkipped => "CPU runs identical (GPU SKIPPED)".into(),
        Verdict::Differs(d) => format!("DIFFERS: {}", d.join("; ")),
        Verdict::Failed(e) => format!("FAILED: {e}"),
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut t = String::from(
        "| program | threads | CPU exit | GPU exit | result |\n| --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        let v = verdict_text(&r.verdict).replace('|', "\\|");
        t += &format!(
            "| {} | {} | {} | {} | {v} |\n",
            r.program, r.threads, r.cpu, r.gpu
        );
    }
    t
}
