//! What a correct culinux run prints, checked line by line.

use std::collections::HashMap;

/// The sum of every thread's checksum for `threads` threads: thread `g` adds
/// `(g + 1) * (0 + 1 + ... + 15)`.
pub fn expected_checksum(threads: u64) -> u64 {
    120 * threads * (threads + 1) / 2
}

/// Problems in the output of a normal run of `blocks` x `threads`; empty when correct.
pub fn problems(stdout: &str, blocks: u32, threads: u32) -> Vec<String> {
    let mut seen: HashMap<(u32, u32), usize> = HashMap::new();
    let mut out = Vec::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("culinux: block ") else {
            continue;
        };
        let mut words = rest.split(' ');
        let b = words.next().and_then(|w| w.parse().ok());
        let t = words.nth(1).and_then(|w| w.parse().ok());
        match (b, t) {
            (Some(b), Some(t)) if b < blocks && t < threads => {
                *seen.entry((b, t)).or_default() += 1
            }
            _ => out.push(format!("unexpected line: {line:?}")),
        }
    }
    for b in 0..blocks {
        for t in 0..threads {
            match seen.get(&(b, t)).copied().unwrap_or(0) {
                1 => {}
                0 => out.push(format!("no line from block {b} thread {t}")),
                n => out.push(format!("{n} lines from block {b} thread {t}")),
            }
        }
    }
    let total = blocks as u64 * threads as u64;
    let summary = format!(
        "culinux: counter={total} checksum={}",
        expected_checksum(total)
    );
    if stdout.lines().filter(|l| *l == summary).count() != 1 {
        out.push(format!("missing or repeated summary {summary:?}"));
    }
    if !stdout
        .lines()
        .any(|l| l.starts_with("culinux: file round-trip ok"))
    {
        out.push("the file round-trip did not report success".into());
    }
    out
}

/// Round trips per thread in ping mode (culinux's `PINGS`).
pub const PINGS: u64 = 64;

/// Problems in the output of a ping run of `threads` threads: every thread must report
/// once, with no bad reply.
pub fn ping_problems(stdout: &str, threads: u64) -> Vec<String> {
    let mut reported = vec![0u32; threads as usize];
    let mut out: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("ping: MISMATCH"))
        .map(str::to_owned)
        .collect();
    for l in stdout.lines().filter_map(|l| l.strip_prefix("ping: ")) {
        let mut w = l.split(' ');
        if let (Some(Ok(t)), Some(Ok(bad))) = (
            w.next().map(str::parse::<u64>),
            w.next().map(str::parse::<u64>),
        ) {
            match reported.get_mut(t as usize) {
                Some(n) => *n += 1,
                None => out.push(format!("report from unknown thread {t}")),
            }
            if bad != 0 {
                out.push(format!("thread {t}: {bad} bad replies"));
            }
        }
    }
    let missing = reported.iter().filter(|&&n| n != 1).count();
    if missing > 0 {
        out.push(format!("{missing} threads did not report exactly once"));
    }
    out
}

/// Calls lane `l` makes in mixed mode (culinux's `MIXED_CALLS - l % 3`).
pub const MIXED_CALLS: u64 = 24;

/// Whether lane `lane`'s call `i` in mixed mode is a posted line (else a checked ping).
fn mixed_posts(lane: u64, i: u64) -> bool {
    (lane * 7 + i).is_multiple_of(3)
}

/// The `<label>: <bad> <ns>` report of a throughput mode: the bad replies and the span.
pub fn report(stdout: &str, label: &str) -> Result<(u64, u64), String> {
    let prefix = format!("{label}: ");
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    let [line] = lines[..] else {
        return Err(format!("{} {label:?} reports, expected one", lines.len()));
    };
    let mut w = line.split(' ').map(str::parse::<u64>);
    match (w.next(), w.next()) {
        (Some(Ok(bad)), Some(Ok(ns))) => Ok((bad, ns)),
        _ => Err(format!("bad {label:?} report: {line:?}")),
    }
}

/// Bytes of `x` thread 0 writes in big-write mode (culinux's `BIG_WRITE_BYTES`).
pub const BIG_WRITE_BYTES: u64 = 300 << 20;
/// Lines each other thread prints meanwhile (culinux's `BIG_LINES`).
const BIG_LINES: u64 = 8;

/// Problems in the output of a big-write run of `threads` GPU threads: thread 0's
/// `bytes` of `x` must all arrive (other threads' lines may come between its 1 MiB
/// parts, never inside one), and every other thread's lines exactly once, in order.
pub fn big_write_problems(stdout: &[u8], threads: u64, bytes: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut xs = 0u64;
    let mut next = vec![0u64; threads as usize];
    for line in stdout.split(|&b| b == b'\n') {
        let k = line.iter().take_while(|&&b| b == b'x').count();
        xs += k as u64;
        let text = String::from_utf8_lossy(&line[k..]);
        let Some(rest) = text.strip_prefix("big ") else {
            if !text.is_empty() && !text.starts_with("big: ") {
                out.push(format!("unexpected output: {text:?}"));
            }
            continue;
        };
        let mut w = rest.split(' ').map(str::parse::<u64>);
        match (w.next(), w.next(), w.next()) {
            (Some(Ok(t)), Some(Ok(i)), None) if t > 0 && t < threads => {
                if next[t as usize] != i {
                    out.push(format!(
                        "thread {t} line {i} after line {}",
                        next[t as usize]
                    ));
                }
                next[t as usize] = i + 1;
            }
            _ => out.push(format!("unexpected line: big {rest}")),
        }
    }
    if xs != bytes {
        out.push(format!("{xs} bytes of the big write arrived, not {bytes}"));
    }
    let short = (1..threads)
        .filter(|&t| next[t as usize] != BIG_LINES)
        .count();
    if short > 0 {
        out.push(format!("{short} threads' lines are missing"));
    }
    out
}

/// Problems in the output of a mixed run of `blocks` x `threads`: every posted line must
/// arrive exactly once and no round trip may have come back to the wrong lane.
pub fn mixed_problems(stdout: &str, blocks: u32, threads: u32) -> Vec<String> {
    let total = blocks as usize * threads as usize;
    let mut seen = vec![0u32; total * MIXED_CALLS as usize];
    let mut out = Vec::new();
    for line in stdout.lines().filter_map(|l| l.strip_prefix("mixed ")) {
        let mut w = line.split(' ').map(str::parse::<u64>);
        match (w.next(), w.next(), w.next()) {
            (Some(Ok(g)), Some(Ok(i)), None) if (g as usize) < total && i < MIXED_CALLS => {
                seen[g as usize * MIXED_CALLS as usize + i as usize] += 1
            }
            _ => out.push(format!("unexpected line: mixed {line}")),
        }
    }
    let mut wrong = 0usize;
    for g in 0..total as u64 {
        let lane = (g % threads as u64) % 32;
        for i in 0..MIXED_CALLS {
            let expected = u32::from(i < MIXED_CALLS - lane % 3 && mixed_posts(lane, i));
            if seen[(g * MIXED_CALLS + i) as usize] != expected {
                wrong += 1;
                if wrong <= 5 {
                    out.push(format!(
                        "thread {g} line {i} arrived {} times, expected {expected}",
                        seen[(g * MIXED_CALLS + i) as usize]
                    ));
                }
            }
        }
    }
    if wrong > 5 {
        out.push(format!("{} more lines missing or repeated", wrong - 5));
    }
    match report(stdout, "mixed") {
        Ok((0, _)) => {}
        Ok((bad, _)) => out.push(format!("{bad} round trips answered to the wrong lane")),
        Err(e) => out.push(e),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_output(blocks: u32, threads: u32) -> String {
        let mut s = String::from("culinux: file round-trip ok (41 bytes)\n");
        for b in 0..blocks {
            for t in 0..threads {
                s += &format!("culinux: block {b} thread {t} sum=0 words=6 took=1µs\n");
            }
        }
        let n = (blocks * threads) as u64;
        s + &format!("culinux: counter={n} checksum={}\n", expected_checksum(n))
    }

    /// Thread 0's `x`s in 1 MiB parts with the other threads' lines between them.
    fn big_output(threads: u64, skip: Option<(u64, u64)>) -> Vec<u8> {
        let mut s = Vec::new();
        let parts = 40;
        for part in 0..parts {
            s.extend(std::iter::repeat_n(b'x', 1 << 20));
            let t = 1 + part as u64 % (threads - 1);
            let i = part as u64 / (threads - 1);
            if i < BIG_LINES && skip != Some((t, i)) {
                s.extend(format!("big {t} {i}\n").bytes());
            }
        }
        s.extend(b"\nbig: 0 1000\n");
        s
    }

    #[test]
    fn a_big_write_between_lines_passes_and_a_missing_line_is_caught() {
        let bytes = 40 << 20;
        assert_eq!(
            big_write_problems(&big_output(5, None), 5, bytes),
            Vec::<String>::new()
        );
        let missing = big_write_problems(&big_output(5, Some((3, 2))), 5, bytes);
        assert!(
            missing
                .iter()
                .any(|p| p.contains("thread 3 line 3 after line 2")),
            "{missing:?}"
        );
        let mut short = big_output(5, None);
        short.remove(0);
        assert!(big_write_problems(&short, 5, bytes)[0].contains("bytes of the big write arrived"));
    }

    #[test]
    fn a_complete_output_passes() {
        assert_eq!(problems(&run_output(2, 3), 2, 3), Vec::<String>::new());
    }

    #[test]
    fn missing_duplicated_and_foreign_lines_are_caught() {
        let full = run_output(2, 3);
        let missing = full.replace("culinux: block 1 thread 2 sum=0 words=6 took=1µs\n", "");
        assert!(
            problems(&missing, 2, 3)
                .iter()
                .any(|p| p.contains("no line from block 1 thread 2"))
        );
        let dup = full.clone() + "culinux: block 0 thread 0 sum=0 words=6 took=1µs\n";
        assert!(
            problems(&dup, 2, 3)
                .iter()
                .any(|p| p.contains("2 lines from block 0 thread 0"))
        );
        let foreign = full.clone() + "culinux: block 9 thread 0 sum=0\n";
        assert!(
            problems(&foreign, 2, 3)
                .iter()
                .any(|p| p.contains("unexpected"))
        );
        let no_file = full.replace("culinux: file round-trip ok (41 bytes)\n", "");
        assert!(
            problems(&no_file, 2, 3)
                .iter()
                .any(|p| p.contains("round-trip"))
        );
        assert_eq!(
            problems(&full, 2, 4).len(),
            2 + 1,
            "thread 3 missing in both blocks, and the summary"
        );
    }

    fn mixed_output(blocks: u32, threads: u32, bad: u64) -> String {
        let mut s = String::new();
        for g in 0..(blocks * threads) as u64 {
            let lane = (g % threads as u64) % 32;
            for i in (0..MIXED_CALLS - lane % 3).filter(|&i| mixed_posts(lane, i)) {
                s += &format!("mixed {g} {i}\n");
            }
        }
        s + &format!("mixed: {bad} 12345\n")
    }

    #[test]
    fn mixed_runs_are_checked_line_by_line_and_for_crossed_replies() {
        let ok = mixed_output(2, 40, 0);
        assert_eq!(mixed_problems(&ok, 2, 40), Vec::<String>::new());
        let lost = ok.replacen("mixed 40 0\n", "", 1);
        assert_eq!(mixed_problems(&lost, 2, 40).len(), 1, "{lost}");
        let twice = ok.clone() + "mixed 0 0\n";
        assert!(mixed_problems(&twice, 2, 40)[0].contains("arrived 2 times"));
        let crossed = mixed_output(2, 40, 3);
        assert!(mixed_problems(&crossed, 2, 40)[0].contains("3 round trips"));
        let no_report = ok.replace("mixed: 0 12345\n", "");
        assert!(mixed_problems(&no_report, 2, 40)[0].contains("0 \"mixed\" reports"));
    }

    #[test]
    fn ping_reports_are_checked_per_thread() {
        let ok = "ping: 0 0 100\nping: 1 0 120\n";
        assert!(ping_problems(ok, 2).is_empty());
        assert_eq!(
            ping_problems("ping: 0 0 100\n", 2),
            ["1 threads did not report exactly once"]
        );
        let bad = "ping: MISMATCH thread 1 iteration 3: got thread 0 iteration 3\nping: 0 0 1\nping: 1 1 1\n";
        assert_eq!(ping_problems(bad, 2).len(), 2);
    }
}
