//! The normalisation rules and the comparison of two runs.
//!
//! Two rules, no more:
//! 1. **Panic locations** name the program's file, not the path it was compiled from:
//!    `panicked at <any path>/NAME.rs:L:C:` reads `panicked at NAME.rs:L:C:` (the host
//!    and the GPU build compile the same file under different relative paths).
//! 2. **Thread ids**: the OS thread id std prints after a panicking thread's name,
//!    `thread 'NAME' (12345) panicked`, reads `(<tid>)` (the CPU's is the kernel's tid,
//!    the GPU's its place in the grid plus one). The name itself is compared: the CPU
//!    side names its threads as the GPU names them.
//! 3. **Many threads**: when more than one thread runs, stdout and stderr are compared
//!    as sorted lists of lines (which thread prints first is the scheduler's choice, on
//!    either side). At one thread they are compared byte for byte.
//!
//! Exit codes compare as a shell reports them (death by signal N is 128 + N: an abort
//! is 134 on both sides). Files compare by relative path, kind, permission bits and
//! contents (links by target).

use crate::observe::{Entry, Observed};

/// `text` with rules 1 and 2 applied, and rule 3 when `threads > 1`.
pub fn normalise(text: &[u8], threads: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut lines: Vec<String> = text.split_inclusive('\n').map(panic_line).collect();
    if threads > 1 {
        lines.sort();
    }
    lines.concat().into_bytes()
}

/// Rules 1 and 2 on one line.
fn panic_line(line: &str) -> String {
    const AT: &str = " panicked at ";
    let Some(at) = line.find(AT) else {
        return line.to_owned();
    };
    let (head, rest) = line.split_at(at + AT.len());
    let tid = head
        .strip_suffix(AT)
        .and_then(|h| h.strip_suffix(')'))
        .and_then(|h| h.rsplit_once("' ("));
    let head = match tid {
        Some((name, tid)) if !tid.is_empty() && tid.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{name}' (<tid>){AT}")
        }
        _ => head.to_owned(),
    };
    match rest.find(".rs:") {
        Some(end) => {
            let file_start = rest[..end].rfind('/').map_or(0, |s| s + 1);
            format!("{head}{}", &rest[file_start..])
        }
        None => line.to_owned(),
    }
}

/// What differed between two runs of one program; empty when identical.
pub fn differences(cpu: &Observed, gpu: &Observed, threads: usize) -> Vec<String> {
    let mut diffs = Vec::new();
    if cpu.code != gpu.code {
        diffs.push(format!(
            "exit code {} on the CPU, {} on the GPU",
            cpu.code, gpu.code
        ));
    }
    for (stream, a, b) in [
        ("stdout", &cpu.stdout, &gpu.stdout),
        ("stderr", &cpu.stderr, &gpu.stderr),
    ] {
        let (a, b) = (normalise(a, threads), normalise(b, threads));
        if a != b {
            diffs.push(format!("{stream}: {}", first_difference(&a, &b)));
        }
    }
    for (path, entry) in &cpu.files {
        match gpu.files.get(path) {
            None => diffs.push(format!("file {path}: only the CPU made it")),
            Some(other) if other != entry => {
                diffs.push(format!("file {path}: {}", entry_difference(entry, other)))
            }
            Some(_) => {}
        }
    }
    for path in gpu.files.keys().filter(|p| !cpu.files.contains_key(*p)) {
        diffs.push(format!("file {path}: only the GPU made it"));
    }
    diffs
}

/// The first line where `a` (CPU) and `b` (GPU) part.
pub fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let mut la = a.split_inclusive('\n');
    let mut lb = b.split_inclusive('\n');
    for line in 1.. {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => return format!("line {line}: CPU {x:?}, GPU {y:?}"),
        }
    }
    unreachable!("the loop returns at the first difference")
}

fn entry_difference(cpu: &Entry, gpu: &Entry) -> String {
    match (cpu, gpu) {
        (Entry::File(m1, _), Entry::File(m2, _)) if m1 != m2 => {
            format!("mode {m1:o} on the CPU, {m2:o} on the GPU")
        }
        (Entry::File(_, a), Entry::File(_, b)) => format!("contents: {}", first_difference(a, b)),
        (a, b) => format!("{a:?} on the CPU, {b:?} on the GPU"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_lines_keep_the_name_and_file_but_not_the_tid_or_path() {
        let gpu = b"thread 'block 0 thread 0' (1) panicked at src/../../programs/p.rs:7:5:\nboom\n";
        let cpu =
            b"thread 'block 0 thread 0' (14449) panicked at conformance/src/../programs/p.rs:7:5:\nboom\n";
        assert_eq!(normalise(gpu, 1), normalise(cpu, 1));
        assert_eq!(
            String::from_utf8(normalise(cpu, 1)).unwrap(),
            "thread 'block 0 thread 0' (<tid>) panicked at p.rs:7:5:\nboom\n"
        );
        // The name is compared.
        let other = b"thread 'main' (1) panicked at p.rs:7:5:\nboom\n";
        assert_ne!(normalise(other, 1), normalise(cpu, 1));
    }

    #[test]
    fn line_order_counts_at_one_thread_only() {
        assert_ne!(normalise(b"a\nb\n", 1), normalise(b"b\na\n", 1));
        assert_eq!(normalise(b"a\nb\n", 2), normalise(b"b\na\n", 2));
        // The bytes still count: a missing newline is a difference.
        assert_ne!(normalise(b"a\nb", 2), normalise(b"b\na\n", 2));
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        let base = Observed {
            code: 0,
            stdout: b"x\n".to_vec(),
            stderr: vec![],
            files: Default::default(),
        };
        assert!(differences(&base, &base.clone(), 1).is_empty());
        let mut other = base.clone();
        other.code = 134;
        other.stdout = b"y\n".to_vec();
        other.files.insert("f".into(), Entry::File(0o644, vec![]));
        let d = differences(&base, &other, 1);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("exit code 0 on the CPU, 134 on the GPU"));
        assert!(d[1].contains("line 1"));
        assert!(d[2].contains("only the GPU"));
    }
}
