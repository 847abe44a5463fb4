//! Stack frames in global memory, for programs whose threads share their locals.
//!
//! A GPU thread's stack is local memory, private to it: the same address names a
//! different place in another thread. Rust programs hand pointers to their locals to
//! other threads all the time (`thread::scope` borrowing a local, rayon's `join` pushing
//! a job that lives on the caller's stack, std's rendezvous channel); on a GPU another
//! thread would read its own memory instead, and go wrong silently. So for a binary
//! (`PtxBuilder::binary`), whose spawned threads run on other GPU threads, every local
//! that still lives in memory after optimization moves to a frame in global memory:
//! each function that has such locals takes one frame on entry
//! ([`FRAME_PUSH`]`(size, align)`) and gives it back before each return
//! ([`FRAME_POP`]`(frame)`); libc-hostcall's `start` feature keeps one frame stack per
//! thread. This rewrites the textual IR of the optimized module, before `llc`.

use std::collections::HashMap;

use hostcall_abi::{FRAME_POP, FRAME_PUSH};

use crate::{BuildError, Result};

/// Size and alignment of a first-class IR type, on nvptx64's data layout (pointers and
/// `i64` 8 bytes; `iN` rounded up to a power-of-two byte count; arrays and vectors of
/// those). None for a type this does not know.
fn size_align(ty: &str) -> Option<(u64, u64)> {
    let ty = ty.trim();
    match ty {
        "ptr" | "double" => return Some((8, 8)),
        "float" => return Some((4, 4)),
        "half" | "bfloat" => return Some((2, 2)),
        _ => {}
    }
    if let Some(bits) = ty.strip_prefix('i').and_then(|b| b.parse::<u64>().ok()) {
        let bytes = bits.div_ceil(8).next_power_of_two();
        return Some((bytes, bytes.min(16)));
    }
    let (open, close) = (ty.chars().next()?, ty.chars().last()?);
    if (open, close) == ('[', ']') || (open, close) == ('<', '>') {
        let inner = &ty[1..ty.len() - 1];
        let (n, elem) = inner.split_once(" x ")?;
        let n: u64 = n.trim().parse().ok()?;
        let (size, align) = size_align(elem)?;
        let total = size.checked_mul(n)?;
        return Some(if open == '<' {
            let v = total.next_power_of_two().max(1);
            (v, v.min(16))
        } else {
            (total, align)
        });
    }
    None
}

/// One `%x = alloca T, align A` line, read: the value's name, the type's size and the
/// alignment.
fn parse_alloca(line: &str) -> Option<(&str, &str, u64)> {
    let (name, rest) = line.trim().split_once(" = alloca ")?;
    let (ty, align) = rest.rsplit_once(", align ")?;
    Some((name, ty, align.trim().parse().ok()?))
}

/// Rewrites `ir` so that every function but those in `exclude` keeps its in-memory
/// locals in a global-memory frame. Returns the new IR and the functions rewritten.
pub(crate) fn move_to_global(ir: &str, exclude: &[&str]) -> Result<(String, usize)> {
    let mut out = String::with_capacity(ir.len() + ir.len() / 8);
    let lines: Vec<&str> = ir.lines().collect();
    let mut rewritten = 0;
    let mut i = 0;
    let mut declared = false;
    while i < lines.len() {
        let line = lines[i];
        if !line.starts_with("define ") || !line.trim_end().ends_with('{') {
            out.push_str(line);
            out.push('\n');
            i += 1;
            continue;
        }
        let end = (i..lines.len())
            .find(|&j| lines[j] == "}")
            .ok_or_else(|| BuildError::Toolchain(format!("unterminated function: {line}")))?;
        let body = &lines[i + 1..end];
        let name = crate::ir::declared_or_defined(line).unwrap_or_default();
        let allocas: Vec<(usize, (&str, &str, u64))> = body
            .iter()
            .enumerate()
            .filter_map(|(k, l)| parse_alloca(l).map(|a| (k, a)))
            .collect();
        out.push_str(line);
        out.push('\n');
        if allocas.is_empty() || exclude.contains(&name) {
            for l in body {
                out.push_str(l);
                out.push('\n');
            }
        } else {
            // Lay the locals out in one frame.
            // Per line of an alloca: its value's name and its offset in the frame.
            let mut offsets: HashMap<usize, (&str, u64)> = HashMap::new();
            let (mut size, mut frame_align) = (0u64, 8u64);
            for (k, (value, ty, align)) in &allocas {
                let (bytes, natural) = size_align(ty).ok_or_else(|| {
                    BuildError::Toolchain(format!(
                        "moving the locals of `{name}` to global memory: unknown type `{ty}`"
                    ))
                })?;
                let align = (*align).max(natural).max(1);
                size = size.div_ceil(align) * align;
                offsets.insert(*k, (value, size));
                size += bytes.max(1);
                frame_align = frame_align.max(align);
            }
            let size = size.div_ceil(8) * 8;
            let push =
                format!("  %__frame = call ptr @{FRAME_PUSH}(i64 {size}, i64 {frame_align})\n");
            // The call opens the entry block, after its label if it has one.
            let labelled = body
                .first()
                .is_some_and(|l| !l.starts_with(' ') && l.trim_end().ends_with(':'));
            if !labelled {
                out.push_str(&push);
            }
            for (k, l) in body.iter().enumerate() {
                if labelled && k == 1 {
                    out.push_str(&push);
                }
                if let Some((value, off)) = offsets.get(&k) {
                    out.push_str(&format!(
                        "  {value} = getelementptr inbounds i8, ptr %__frame, i64 {off}\n"
                    ));
                } else if l.contains("@llvm.lifetime.") {
                    // Lifetime markers apply to allocas only; the frame lives until return.
                } else {
                    if l.trim_start().starts_with("ret ") || l.trim() == "ret void" {
                        out.push_str(&format!("  call void @{FRAME_POP}(ptr %__frame)\n"));
                    }
                    out.push_str(l);
                    out.push('\n');
                }
            }
            rewritten += 1;
            declared = true;
        }
        out.push_str("}\n");
        i = end + 1;
    }
    if declared && !ir.contains(&format!("@{FRAME_PUSH}(")) {
        return Err(BuildError::Toolchain(format!(
            "the module does not define {FRAME_PUSH} (libc-hostcall's `start` feature)"
        )));
    }
    Ok((out, rewritten))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = "\
declare void @llvm.lifetime.start.p0(ptr)
define ptr @__hostcall_frame_push(i64 %0, i64 %1) {
  %3 = alloca i64, align 8
  ret ptr null
}
define internal void @share(i64 %0) unnamed_addr #1 {
  %2 = alloca [24 x i8], align 8
  %.sroa.0 = alloca i32, align 4
  %3 = alloca <4 x i32>, align 16
  call void @llvm.lifetime.start.p0(ptr nonnull %2)
  call void @use(ptr %2, ptr %.sroa.0, ptr %3)
  br i1 true, label %4, label %5

4:
  ret void

5:
  ret void
}
define i32 @plain(i32 %0) {
  ret i32 %0
}
define void @labelled() {
start:
  %x = alloca i64, align 8
  ret void
}
";

    #[test]
    fn locals_move_to_one_frame_given_back_at_every_return() {
        let (out, n) = move_to_global(IR, &[FRAME_PUSH]).unwrap();
        assert_eq!(n, 2);
        let share = &out[out.find("@share").unwrap()..out.find("@plain").unwrap()];
        // 24 bytes at 0, 4 at 24, 16 at 32 (aligned to 16): 48 bytes, aligned to 16.
        assert!(
            share.contains("%__frame = call ptr @__hostcall_frame_push(i64 48, i64 16)"),
            "{share}"
        );
        assert!(share.contains("%2 = getelementptr inbounds i8, ptr %__frame, i64 0"));
        assert!(share.contains("%.sroa.0 = getelementptr inbounds i8, ptr %__frame, i64 24"));
        assert!(share.contains("%3 = getelementptr inbounds i8, ptr %__frame, i64 32"));
        assert!(!share.contains("alloca") && !share.contains("lifetime.start"));
        assert_eq!(
            share
                .matches("call void @__hostcall_frame_pop(ptr %__frame)\n  ret void")
                .count(),
            2
        );
        // The excluded function and one without locals are untouched.
        assert!(out.contains("  %3 = alloca i64, align 8\n  ret ptr null"));
        assert!(out.contains("define i32 @plain(i32 %0) {\n  ret i32 %0\n}"));
        // An entry block with a label takes the frame after it.
        assert!(
            out.contains("@labelled() {\nstart:\n  %__frame = call ptr"),
            "{out}"
        );
    }

    #[test]
    fn an_unknown_local_type_is_an_error_naming_the_function() {
        let ir = "define void @f() {\n  %1 = alloca %Opaque, align 8\n  ret void\n}\n\
                  define ptr @__hostcall_frame_push(i64 %0, i64 %1) {\n  ret ptr null\n}\n";
        let e = move_to_global(ir, &[]).unwrap_err().to_string();
        assert!(e.contains("`f`") && e.contains("`%Opaque`"), "{e}");
    }

    #[test]
    fn type_sizes_follow_the_data_layout() {
        assert_eq!(size_align("[3 x i64]"), Some((24, 8)));
        assert_eq!(size_align("i1"), Some((1, 1)));
        assert_eq!(size_align("i128"), Some((16, 16)));
        assert_eq!(size_align("[2 x [3 x i16]]"), Some((12, 2)));
        assert_eq!(size_align("{ i64, i64 }"), None);
    }
}
