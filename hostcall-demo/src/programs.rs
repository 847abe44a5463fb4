//! Figures from ordinary std programs, run as they are on the GPU (packaged by `cargo gpu
//! build`) and on the host CPU (their own build), each measured the same way on both:
//! `bench/startup` (a whole process's wall time, from start to end), `bench/threads`
//! (spawn and join, rayon's sum) and `bench/net` (a loopback TCP echo server, measured by
//! the same CPU client). `hostcall_bench --programs DIR` reports them beside each other;
//! DIR holds `startup.gpu`, `startup-cpu`, `threads-bench.gpu`, `threads-bench-cpu`,
//! `net-bench.gpu` and `net-bench-cpu`.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use serde_json::{Map, Value};

/// One figure on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The row's name.
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// The GPU's value.
    pub gpu: f64,
    /// The CPU's value, measured the same way.
    pub cpu: f64,
    /// What was measured, and what differs between the sides.
    pub note: String,
}

/// Both sides' output merged: every JSON object a program printed, one per line.
fn objects(stdout: &[u8]) -> Result<Map<String, Value>, String> {
    let mut all = Map::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => all.extend(o),
            _ => return Err(format!("not a JSON object: {line:?}")),
        }
    }
    Ok(all)
}

/// `program`'s stdout as JSON objects, once it exited 0.
fn checked(program: &Path, out: std::io::Result<Output>) -> Result<Map<String, Value>, String> {
    let out = out.map_err(|e| format!("running {}: {e}", program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    objects(&out.stdout)
}

fn number(o: &Map<String, Value>, key: &str) -> Result<f64, String> {
    o.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number {key:?} in {o:?}"))
}

/// Runs of each start-up measure, whole processes; the median is reported.
pub const STARTUP_RUNS: usize = 5;

/// The median wall time in milliseconds of `STARTUP_RUNS` runs of `program` with `args`,
/// each checked to exit 0 and print `expect`.
fn wall_ms(program: &Path, args: &[&str], expect: &str) -> Result<f64, String> {
    let mut walls = Vec::new();
    for _ in 0..STARTUP_RUNS {
        let t = Instant::now();
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", program.display()))?;
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        if !out.status.success() || out.stdout != expect.as_bytes() {
            return Err(format!(
                "{} {args:?} exited with {} and printed {:?}: {}",
                program.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr).trim_end()
            ));
        }
    }
    walls.sort_by(f64::total_cmp);
    Ok(walls[STARTUP_RUNS / 2])
}

/// The start-up program on both sides: a whole process, from its start to its end.
fn startup(dir: &Path) -> Result<Vec<Figure>, String> {
    let (gpu, cpu) = (dir.join("startup.gpu"), dir.join("startup-cpu"));
    let total: u64 = (0..8000).sum();
    let threads = format!("{total}\n");
    Ok(vec![
        Figure {
            name: "startup_hi_ms",
            unit: "ms",
            gpu: wall_ms(&gpu, &[], "hi\n")?,
            cpu: wall_ms(&cpu, &[], "hi\n")?,
            note: format!(
                "wall time of a process whose main prints hi (bench/startup), from its start \
                 to its end, median of {STARTUP_RUNS}; on the GPU a `cargo gpu build` \
                 executable: CUDA's start and end, the module load, the launch memory, the \
                 program and the launch's end"
            ),
        },
        Figure {
            name: "startup_threads_ms",
            unit: "ms",
            gpu: wall_ms(&gpu, &["threads"], &threads)?,
            cpu: wall_ms(&cpu, &["threads"], &threads)?,
            note: format!(
                "the same with eight spawned threads each summing 1,000 numbers, joined \
                 before main prints the total, median of {STARTUP_RUNS}"
            ),
        },
    ])
}

/// The threads program on both sides.
fn threads(dir: &Path) -> Result<Vec<Figure>, String> {
    let run = |name: &str| {
        let p = dir.join(name);
        checked(&p, Command::new(&p).output())
    };
    let (gpu, cpu) = (run("threads-bench.gpu")?, run("threads-bench-cpu")?);
    let both = |key: &str| Ok::<_, String>((number(&gpu, key)?, number(&cpu, key)?));
    let (one_gpu, one_cpu) = both("spawn_join_one_us")?;
    let (many_gpu, many_cpu) = both("spawn_join_many_us")?;
    let (at_once_gpu, at_once_cpu) = both("threads_at_once")?;
    let (sum_gpu, sum_cpu) = both("rayon_sum_ms")?;
    let (seq_gpu, seq_cpu) = both("sequential_sum_ms")?;
    let (pool_gpu, pool_cpu) = both("rayon_threads")?;
    let (sort_gpu, sort_cpu) = both("rayon_sort_ms")?;
    let (sha_gpu, sha_cpu) = both("rayon_sha256_ms")?;
    let (scope_gpu, scope_cpu) = both("scope_10000_ms")?;
    let (spawned_gpu, spawned_cpu) = both("scope_spawned")?;
    let elements = number(&gpu, "elements")?;
    Ok(vec![
        Figure {
            name: "thread_spawn_join_one_us",
            unit: "us",
            gpu: one_gpu,
            cpu: one_cpu,
            note: "thread::spawn then join, one thread at a time, mean of 200".into(),
        },
        Figure {
            name: "thread_spawn_join_at_once_us",
            unit: "us",
            gpu: many_gpu,
            cpu: many_cpu,
            note: format!(
                "as many threads as available_parallelism says (at most 1,000), all spawned \
                 then all joined, per round: {at_once_gpu} on the GPU, {at_once_cpu} on the CPU"
            ),
        },
        Figure {
            name: "rayon_par_sum_ms",
            unit: "ms",
            gpu: sum_gpu,
            cpu: sum_cpu,
            note: format!(
                "par_iter().map().sum() over {elements} u64s on rayon's global pool: \
                 {pool_gpu} threads on the GPU, {pool_cpu} on the CPU; the same sum on one \
                 thread: {seq_gpu:.1} ms on the GPU, {seq_cpu:.1} ms on the CPU"
            ),
        },
        Figure {
            name: "rayon_par_sort_ms",
            unit: "ms",
            gpu: sort_gpu,
            cpu: sort_cpu,
            note: "par_sort_unstable of 10^7 pseudo-random u64s (splitmix64), rayon's \
                   global pool"
                .into(),
        },
        Figure {
            name: "rayon_sha256_ms",
            unit: "ms",
            gpu: sha_gpu,
            cpu: sha_cpu,
            note: "SHA-256 (sha2 0.10) of 10^6 64-byte blocks, par_iter().map() then an \
                   xor of the first 8 bytes of each digest: compute bound"
                .into(),
        },
        Figure {
            name: "scope_10000_threads_ms",
            unit: "ms",
            gpu: scope_gpu,
            cpu: scope_cpu,
            note: format!(
                "thread::scope over 10,000 chunks of a shared slice of 10^7 u64s, a thread \
                 each where Builder::spawn_scoped succeeds (the rest summed on the scope's \
                 thread): {spawned_gpu} spawned on the GPU, {spawned_cpu} on the CPU"
            ),
        },
    ])
}

/// A loopback port free now, for an echo server to listen on.
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The echo server `server` (on either side), measured by the CPU client.
fn echo(dir: &Path, server: &str) -> Result<Map<String, Value>, String> {
    let addr = format!("127.0.0.1:{}", free_port()?);
    let program = dir.join(server);
    let mut child: Child = Command::new(&program)
        .args(["echo", &addr, "2"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    let client = dir.join("net-bench-cpu");
    let measured = checked(
        &client,
        Command::new(&client).args(["client", &addr]).output(),
    );
    if measured.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let measured = measured?;
    if !status.success() {
        return Err(format!("{} exited with {status}", program.display()));
    }
    Ok(measured)
}

/// The echo server on both sides.
fn net(dir: &Path) -> Result<Vec<Figure>, String> {
    let (gpu, cpu) = (echo(dir, "net-bench.gpu")?, echo(dir, "net-bench-cpu")?);
    let both = |key: &str| Ok::<_, String>((number(&gpu, key)?, number(&cpu, key)?));
    let (rt_gpu, rt_cpu) = both("round_trips_per_s")?;
    let (mb_gpu, mb_cpu) = both("mb_per_s")?;
    Ok(vec![
        Figure {
            name: "tcp_echo_round_trips_per_s",
            unit: "1/s",
            gpu: rt_gpu,
            cpu: rt_cpu,
            note: "the echo server (bench/net) on that side; 64-byte messages, each waiting \
                   for its echo, one connection, TCP_NODELAY, from the same CPU client"
                .into(),
        },
        Figure {
            name: "tcp_echo_mb_per_s",
            unit: "MB/s",
            gpu: mb_gpu,
            cpu: mb_cpu,
            note: "the same server; 256 MiB in 64 KiB pieces while a second client thread \
                   reads the echo back"
                .into(),
        },
    ])
}

/// Every figure of the programs in `dir`.
pub fn measure(dir: &Path) -> Result<Vec<Figure>, String> {
    let mut figures = startup(dir)?;
    figures.extend(threads(dir)?);
    figures.extend(net(dir)?);
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_programs_lines_merge_into_one_object_and_anything_else_is_an_error() {
        let o = objects(b"{\"a\": 1.5}\n{\"b\": 2, \"c\": 3}\n").unwrap();
        assert_eq!(number(&o, "a"), Ok(1.5));
        assert_eq!(number(&o, "c"), Ok(3.0));
        assert!(number(&o, "d").is_err());
        assert!(objects(b"{\"a\": 1}\nthread panicked\n").is_err());
    }
}
