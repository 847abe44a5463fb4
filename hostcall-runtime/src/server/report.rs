//! What the server reports of the calls it serves: the requests still in flight when a
//! launch is stopped, the tracing and summary switches, how a GPU thread is named in
//! the host's lines, and each service's line of the summary.

use std::time::Duration;

/// A lane's request still waiting for its answer, for the report of a killed launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The port it was published on.
    pub port: usize,
    /// The caller's linear block index.
    pub block: u32,
    /// The caller's thread index within its block.
    pub thread: u32,
    /// The service id it asked for.
    pub service: u32,
    /// The service's name.
    pub name: String,
    /// Whether the call waits parked, its port freed (it was published on `port`).
    pub parked: bool,
}

impl std::fmt::Display for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}#{:#x} by block {} thread {} {} port {}",
            self.name,
            self.service,
            self.block,
            self.thread,
            if self.parked { "parked, from" } else { "on" },
            self.port
        )
    }
}

/// What the server reports of the calls it serves (`HOSTCALL_DEBUG`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracing {
    /// A log line per call.
    pub trace: bool,
    /// A table per run: calls, errors and host time per service.
    pub summary: bool,
    /// The GPU's place in a run over several (`Host::run_all`), named in every line.
    pub gpu: Option<u32>,
}

/// One service's line of the summary table.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stat {
    pub calls: u64,
    pub errors: u64,
    pub time: Duration,
}

/// The summary table of a run's calls: per service (named by `name`), its calls, errors
/// and host time, the costliest first.
pub(crate) fn summary(
    stats: &std::collections::HashMap<u32, Stat>,
    name: impl Fn(u32) -> String,
) -> String {
    let mut rows: Vec<(String, Stat)> = stats.iter().map(|(id, s)| (name(*id), *s)).collect();
    rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(&b.0)));
    let mut t = format!(
        "hostcall summary\n{:<28} {:>12} {:>10} {:>14} {:>12}\n",
        "service", "calls", "errors", "host time", "mean"
    );
    for (name, s) in rows {
        let mean = s.time / s.calls.max(1) as u32;
        t.push_str(&format!(
            "{name:<28} {:>12} {:>10} {:>14.3?} {:>12.3?}\n",
            s.calls, s.errors, s.time, mean
        ));
    }
    t
}
