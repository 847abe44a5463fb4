//! The host's defaults, the limits of its run loop, and the `HOSTCALL_*` variables that
//! override the defaults.

use std::time::Duration;

use crate::server::Tracing;

/// Ports in the channel unless set: enough for 128 warps in flight at once.
pub const DEFAULT_PORTS: usize = 128;
/// The most consumer threads [`default_consumers`] gives.
pub const MAX_DEFAULT_CONSUMERS: usize = 4;

/// Consumer threads unless set: one per four of this machine's CPUs, from one to
/// [`MAX_DEFAULT_CONSUMERS`]. Each spins while its ports are busy, so a small machine
/// keeps its CPUs for the rest of the program; on the H100's hosts (16 and 32 CPUs) it
/// gives four (measured in `hostcall_bench --only consumers`; see
/// `bench-results/gpu-issue16.md`).
pub fn default_consumers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (cpus / 4).clamp(1, MAX_DEFAULT_CONSUMERS)
}
/// Device heap unless set: 256 MiB.
pub const DEFAULT_HEAP_BYTES: u64 = 256 << 20;
/// Files the GPU may hold open at once unless set; never more than the process's
/// open-file limit allows with room to spare for the host (see [`HostBuilder::build`](crate::HostBuilder::build)).
pub const DEFAULT_MAX_OPEN_FILES: usize = 1024;
/// How long a run may take from the call of `Host::run` unless set (or
/// `HOSTCALL_TIMEOUT_S` says otherwise; 0 there means no limit): long for a GPU program,
/// short against a hung CI job.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Bytes of each of stdout and stderr a capture keeps unless set.
pub const DEFAULT_CAPTURE_LIMIT: usize = 64 << 20;
/// Threads serving calls that may block (file system, stdin) unless set.
pub const DEFAULT_BLOCKING_THREADS: usize = 4;
/// The most stream reader threads [`default_stream_readers`] gives.
pub const MAX_DEFAULT_STREAM_READERS: usize = 16;

/// Threads emptying a launch's stream rings unless set (only a launch given a stream
/// starts them): one per two of this machine's CPUs, from one to
/// [`MAX_DEFAULT_STREAM_READERS`]. Taking messages is the host's work per message, so
/// a stream's rate grows with its readers (on the H200s' 32-CPU host, 64-byte messages:
/// 23.6 GB/s with 8, 41.5 with 16; `bench-results/gpu-issue16.md`); each spins only
/// while messages come and sleeps when its rings are empty.
pub fn default_stream_readers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (cpus / 2).clamp(1, MAX_DEFAULT_STREAM_READERS)
}
/// How long a killed launch gets to end before the run reports anyway: its threads that
/// call the host trap within a round trip; one that never calls keeps running until the
/// process exits.
pub(super) const KILL_GRACE: Duration = Duration::from_millis(500);
/// Longest the end-of-run drain of published requests may take (unless the timeout
/// leaves less), and the least it gets even when the timeout has passed: answering a
/// killed launch's requests takes microseconds.
pub(super) const DRAIN_LIMIT: Duration = Duration::from_secs(10);
pub(super) const DRAIN_MIN: Duration = Duration::from_millis(100);
/// How long past its time limit (counted from the call of `Host::run`) a run waits for
/// the host's stdout and stderr to take the program's output, however long the program
/// ran: a reader stalled that long loses the rest. The killed launch's [`KILL_GRACE`]
/// and the drain of its last calls end before it, and closing the run's files and
/// reactor after it, so `Host::run` returns within the limit and a second.
pub(super) const OUTPUT_GRACE: Duration = Duration::from_millis(900);
const _: () = assert!(KILL_GRACE.as_millis() + DRAIN_MIN.as_millis() < OUTPUT_GRACE.as_millis());
/// How long a GPU thread waits for a port or an answer before it gives up and ends the
/// launch with a report, unless set: far beyond any queueing delay, so that only a host
/// that stopped serving (or a service that blocks) trips it.
pub const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// Wake words of parked calls a launch gets at most (one per GPU thread below it):
/// 8 MiB of host-pinned memory.
pub(super) const WAKE_WORDS_MAX: u64 = 1 << 20;
/// How often the host asks the backend whether the launch ended: at first often, so
/// short launches end promptly, then, for launches that run on, rarely enough that the
/// asking costs no noticeable CPU.
pub(super) const POLL_INTERVAL: Duration = Duration::from_micros(200);
pub(super) const POLL_INTERVAL_LONG: Duration = Duration::from_millis(5);
pub(super) const LONG_RUN: Duration = Duration::from_millis(100);

/// What `HOSTCALL_DEBUG` asks for: unset or `0` nothing, `summary` the table, anything
/// else a trace line per call.
pub(super) fn debug_from_env() -> Tracing {
    match std::env::var("HOSTCALL_DEBUG").as_deref() {
        Err(_) | Ok("0") => Tracing::default(),
        Ok("summary") => Tracing {
            summary: true,
            ..Tracing::default()
        },
        Ok(_) => Tracing {
            trace: true,
            ..Tracing::default()
        },
    }
}

/// `HOSTCALL_TIMEOUT_S` as a timeout (`0`: none), else [`DEFAULT_TIMEOUT`].
/// `HOSTCALL_CONSUMERS` (a count of at least one), else [`default_consumers`].
pub(super) fn consumers_from_env() -> usize {
    match std::env::var("HOSTCALL_CONSUMERS").map(|v| v.parse::<usize>()) {
        Ok(Ok(n)) if n > 0 => n,
        Ok(_) => {
            log::warn!("HOSTCALL_CONSUMERS is not a count of threads; using the default");
            default_consumers()
        }
        Err(_) => default_consumers(),
    }
}

pub(super) fn timeout_from_env() -> Option<Duration> {
    match std::env::var("HOSTCALL_TIMEOUT_S")
        .ok()
        .map(|v| v.parse::<f64>())
    {
        Some(Ok(0.0)) => None,
        Some(Ok(s)) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
        Some(_) => {
            log::warn!("HOSTCALL_TIMEOUT_S is not a number of seconds; using the default");
            Some(DEFAULT_TIMEOUT)
        }
        None => Some(DEFAULT_TIMEOUT),
    }
}

/// The process's soft limit on open files, if it has one.
pub(super) fn nofile_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Files the GPU may hold open: what was asked, less what the host keeps for itself out
/// of a `soft` process limit.
pub(super) fn open_files_allowed(asked: usize, soft: Option<u64>) -> usize {
    match soft {
        None => asked,
        Some(soft) => {
            let spare = (soft / 4).max(64);
            asked.min(soft.saturating_sub(spare).try_into().unwrap_or(usize::MAX))
        }
    }
}
