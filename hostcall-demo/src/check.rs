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
