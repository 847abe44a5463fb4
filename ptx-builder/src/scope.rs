//! GPU scope for a binary's atomics.
//!
//! LLVM gives an atomic operation without a `syncscope` the system scope, so every
//! acquire, release and fence in a Rust program (an `Arc`'s drop, a `Mutex`, a channel,
//! rayon's latches and deques) becomes `.sys` PTX, ordered against the host across PCIe
//! as well as against the GPU's other threads. On an H100 that costs 300 to 540 ns more
//! each: a release store 853 ns against 315 at GPU scope, a fence 724 against 316, an
//! acquire-release read-modify-write 863 against 455, a hand-off between two SMs 992
//! against 648 (`bench/limits.cu`, one thread, 2,000 in a row).
//!
//! A binary's memory (`PtxBuilder::binary`, what `cargo gpu` runs) is the GPU's own,
//! and its atomics order its GPU threads among themselves. The one party outside the GPU
//! is the host, and it is reached only through hostcall-client, whose every hand-off with
//! it states the system scope itself in inline PTX (`Platform::fence_system`,
//! `store_release_system`, `load_acquire_system`), which this does not see. So every
//! acquire, release, acquire-release and sequentially consistent operation or fence
//! without a scope gets `syncscope("device")` (PTX `.gpu`). Relaxed ones keep the
//! system scope: a relaxed load or store costs the same at both, and the transport
//! polls host memory with them. Volatile ones are left as written. This rewrites the
//! textual IR of the optimized module, before `llc`.

/// Orderings that synchronize: an operation with one of these gets GPU scope.
const SYNCHRONIZING: [&str; 4] = ["acquire", "release", "acq_rel", "seq_cst"];
/// Every ordering keyword; the scope goes before the first.
const ORDERINGS: [&str; 6] = [
    "unordered",
    "monotonic",
    "acquire",
    "release",
    "acq_rel",
    "seq_cst",
];
/// The scope given, LLVM's name for PTX's `.gpu`.
const DEVICE: &str = "syncscope(\"device\") ";

/// `ir` with every synchronizing atomic operation and fence that names no scope at GPU
/// scope, and how many were rewritten.
pub(crate) fn gpu_scope(ir: &str) -> (String, usize) {
    let mut out = String::with_capacity(ir.len() + ir.len() / 64);
    let mut rewritten = 0;
    for line in ir.lines() {
        match scoped(line) {
            Some(l) => {
                out.push_str(&l);
                rewritten += 1;
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    (out, rewritten)
}

/// `line` with GPU scope, if it is an instruction this rewrites.
fn scoped(line: &str) -> Option<String> {
    let code = line.trim_start();
    let body = code.split_once(" = ").map_or(code, |(_, rhs)| rhs);
    let atomic = body.starts_with("load atomic ")
        || body.starts_with("store atomic ")
        || body.starts_with("atomicrmw ")
        || body.starts_with("cmpxchg ")
        || body.starts_with("fence ");
    if !atomic || body.contains("syncscope(") || body.contains(" volatile ") {
        return None;
    }
    // The orderings come before the alignment and any metadata; operands are named with
    // `%` or `@`, so a bare ordering word is the ordering.
    let operation = body.split(", align ").next().unwrap_or(body);
    let operation = operation.split(", !").next().unwrap_or(operation);
    let words: Vec<&str> = operation.split_whitespace().collect();
    if !words.iter().any(|w| SYNCHRONIZING.contains(w)) {
        return None;
    }
    let first = words.iter().position(|w| ORDERINGS.contains(w))?;
    // The byte offset of that word in `line`, found by passing the words before it.
    let mut at = line.len() - body.len();
    for w in &words[..first] {
        at = line[at..].find(w)? + at + w.len();
    }
    at = line[at..].find(words[first])? + at;
    Some(format!("{}{DEVICE}{}", &line[..at], &line[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_synchronizing_atomic_and_fence_gets_gpu_scope() {
        let ir = "\
define void @f(ptr %p, ptr %q) {
  %a = load atomic i32, ptr %p acquire, align 4
  store atomic i64 %w, ptr %q release, align 8, !noalias !3
  %b = atomicrmw add ptr %p, i32 1 acq_rel, align 4
  %c = cmpxchg weak ptr %p, i32 %b, i32 3 seq_cst monotonic, align 4
  %d = cmpxchg ptr %p, i32 %b, i32 3 monotonic acquire, align 4
  fence acquire
  fence seq_cst
  ret void
}
";
        let (out, n) = gpu_scope(ir);
        assert_eq!(n, 7);
        assert_eq!(
            out,
            "\
define void @f(ptr %p, ptr %q) {
  %a = load atomic i32, ptr %p syncscope(\"device\") acquire, align 4
  store atomic i64 %w, ptr %q syncscope(\"device\") release, align 8, !noalias !3
  %b = atomicrmw add ptr %p, i32 1 syncscope(\"device\") acq_rel, align 4
  %c = cmpxchg weak ptr %p, i32 %b, i32 3 syncscope(\"device\") seq_cst monotonic, align 4
  %d = cmpxchg ptr %p, i32 %b, i32 3 syncscope(\"device\") monotonic acquire, align 4
  fence syncscope(\"device\") acquire
  fence syncscope(\"device\") seq_cst
  ret void
}
"
        );
    }

    #[test]
    fn relaxed_volatile_scoped_and_plain_lines_are_left_as_they_are() {
        let ir = "\
  %a = load atomic i32, ptr %p monotonic, align 4
  %b = atomicrmw add ptr %p, i32 1 monotonic, align 4
  %c = load atomic volatile i32, ptr %p acquire, align 4
  fence syncscope(\"block\") release
  %d = load i32, ptr %acquire, align 4
  call void @release(ptr %seq_cst)
";
        assert_eq!(gpu_scope(ir), (ir.to_owned(), 0));
    }

    #[test]
    fn an_operand_named_like_an_ordering_does_not_move_the_scope() {
        let ir = "  %x = atomicrmw xchg ptr %acquire, ptr @release release, align 8\n";
        assert_eq!(
            gpu_scope(ir).0,
            "  %x = atomicrmw xchg ptr %acquire, ptr @release syncscope(\"device\") release, align 8\n"
        );
    }
}
