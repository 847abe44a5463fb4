//! Facts about the machine the figures were measured on: its CPU, the date, the
//! process's CPU time, the host's own file-write speed.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::*;

/// Host baseline for the bulk write: the same bytes in the same chunks, from the host.
pub(super) fn host_write_gbps(dir: &Path, bytes: usize) -> std::io::Result<f64> {
    let chunk = vec![7u8; 8 << 20];
    let path = dir.join("host-bulk.bin");
    let started = Instant::now();
    let mut f = std::fs::File::create(&path)?;
    for _ in 0..bytes / chunk.len() {
        f.write_all(&chunk)?;
    }
    let secs = started.elapsed().as_secs_f64();
    std::fs::remove_file(path)?;
    Ok(bytes as f64 / secs / 1e9)
}

/// CPU time this process has used (all threads), from `/proc/self/stat`.
pub(super) fn process_cpu() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    // Fields after the command name (which may hold spaces) start at its closing ')'.
    let rest = stat.rsplit_once(')').ok_or("bad /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| "bad /proc/self/stat".to_owned())
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the ')', in
    // clock ticks of 10 ms (USER_HZ is 100 on x86-64 Linux).
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for now (UTC), without a date crate.
pub(super) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(super) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}
