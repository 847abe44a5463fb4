//! Unwinding as ordinary returns, for binaries built with `panic = "unwind"`.
//!
//! The GPU has no unwind tables and no way to leave several frames at once, and NVPTX
//! cannot lower `invoke`, `landingpad` or `resume`. So this rewrites the textual IR of
//! the optimized module, before `llc` (the protocol is `hostcall_abi::unwind`'s):
//!
//! - `_Unwind_RaiseException(e)`, where panic_unwind starts a panic, and `resume` store
//!   the exception in the thread's word ([`UNWIND_RESUME`]) and leave the function;
//! - a call that may unwind (neither it nor its callee `nounwind`) is followed by a look
//!   at the word ([`UNWINDING`]): set, the function leaves (returning zeros, which its
//!   caller, looking too, never reads); an `invoke` becomes such a call whose look
//!   branches to its landing pad;
//! - a `landingpad` takes the exception from the word ([`UNWIND_TAKE`]): Rust's pads
//!   either catch everything (`catch_unwind`), clean up and `resume`, or abort
//!   (`filter`, a function that must not unwind), so the selector is never read.
//!
//! Optimization ran on the real unwinding IR first, so its inlining and its proofs of
//! `nounwind` decide which calls still need a look. A call followed by `ret` needs none
//! (the caller looks); one followed by `unreachable` can only come back unwinding. The
//! personality routine, now unused, is removed with the unwinder's declarations.

use std::collections::{HashMap, HashSet};

use hostcall_abi::{UNWIND_RESUME, UNWIND_TAKE, UNWINDERS, UNWINDING};

use crate::ir::{
    Attrs, Call, attribute_groups, declared_or_defined, entry_label, function_attrs, label_of,
    next_instruction, personality, read_call, return_type,
};

use crate::{BuildError, Result};

/// The unwinder's entry point that starts unwinding (panic_unwind calls it), `i32 (ptr)`
/// as [`UNWIND_RESUME`] is: calls to it call that instead.
const RAISE: &str = "_Unwind_RaiseException";

/// The block every unwinding path of a function leaves through.
const UNWOUND: &str = "__unwound";

/// What [`lower`] changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Lowered {
    /// Functions rewritten.
    pub functions: usize,
    /// Calls followed by a look at the exception word.
    pub looks: usize,
    /// Landing pads made ordinary blocks.
    pub pads: usize,
}

/// Lowers every `invoke`, `landingpad` and `resume` of `ir`, and puts a look after every
/// call that may unwind.
pub(crate) fn lower(ir: &str) -> Result<(String, Lowered)> {
    let groups = attribute_groups(ir);
    let functions = function_attrs(ir, &groups);
    let personalities: HashSet<&str> = ir
        .lines()
        .filter(|l| l.starts_with("define "))
        .filter_map(|l| personality(l).map(|(_, name)| name))
        .collect();
    let mut out = String::with_capacity(ir.len() + ir.len() / 8);
    let mut done = Lowered::default();
    let lines: Vec<&str> = ir.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(name) = declared_or_defined(line) {
            let removed = name == RAISE || personalities.contains(name);
            if removed && line.starts_with("declare ") {
                i += 1;
                continue;
            }
            if line.starts_with("define ") && line.trim_end().ends_with('{') {
                let end = (i..lines.len()).find(|&j| lines[j] == "}").ok_or_else(|| {
                    BuildError::Toolchain(format!("unterminated function: {line}"))
                })?;
                if !removed {
                    let body = &lines[i + 1..end];
                    lower_function(line, body, &groups, &functions, &mut out, &mut done)?;
                }
                i = end + 1;
                continue;
            }
        }
        if let Some(rest) = line.strip_prefix("attributes #") {
            out.push_str("attributes #");
            out.push_str(&without_noreturn(rest));
        } else {
            out.push_str(line);
        }
        out.push('\n');
        i += 1;
    }
    if done.functions > 0 {
        for f in [UNWINDING, UNWIND_TAKE, UNWIND_RESUME, UNWINDERS] {
            if !ir.contains(&format!("@{f}(")) && !ir.contains(&format!("@{f} = ")) {
                return Err(BuildError::Toolchain(format!(
                    "the module does not define {f} (libc-hostcall's unwinding)"
                )));
            }
        }
    }
    Ok((out, done))
}

/// A group's attributes with `noreturn` dropped unless it is also `nounwind`: a function
/// that leaves by unwinding now returns. A group cannot be empty, so one that held
/// `noreturn` alone says so in a string attribute, which means nothing to LLVM.
fn without_noreturn(group: &str) -> String {
    let words: Vec<&str> = group.split(' ').collect();
    if !words.contains(&"noreturn") || words.contains(&"nounwind") {
        return group.to_owned();
    }
    let kept = words
        .into_iter()
        .map(|w| if w == "noreturn" { "\"unwinds\"" } else { w })
        .collect::<Vec<_>>();
    kept.join(" ")
}

/// Whether `call` may unwind, and whether it may come back normally.
fn may_unwind(call: &Call<'_>, functions: &HashMap<&str, Attrs>) -> (bool, bool) {
    let callee = call
        .callee
        .map(|c| functions.get(c).copied().unwrap_or_default())
        .unwrap_or_default();
    let intrinsic = call.callee.is_some_and(|c| c.starts_with("llvm."));
    let unwinds = !intrinsic && !call.attrs.nounwind && !callee.nounwind;
    (unwinds, !(call.attrs.noreturn || callee.noreturn))
}

/// Lowers one function (`define` line and body, without its `}`) into `out`.
fn lower_function(
    define: &str,
    body: &[&str],
    groups: &HashMap<u32, Attrs>,
    functions: &HashMap<&str, Attrs>,
    out: &mut String,
    done: &mut Lowered,
) -> Result<()> {
    let name = declared_or_defined(define).unwrap_or_default();
    let unreadable = |line: &str| BuildError::Toolchain(format!("`{name}`: unreadable `{line}`"));
    let mut lines: Vec<String> = Vec::with_capacity(body.len() + 8);
    // Blocks split after a call: the original label, and the label that ends it now.
    let mut moved: HashMap<String, String> = HashMap::new();
    let mut block = match body.first().and_then(|l| label_of(l)) {
        Some(l) => l.to_owned(),
        None => entry_label(define),
    };
    // The label of the block being written: `block`, or the piece of it after a split.
    let mut current = block.clone();
    let (mut looks, mut pads, mut leaves, mut fresh) = (0usize, 0usize, false, 0usize);
    let mut k = 0;
    while k < body.len() {
        let line = body[k];
        if let Some(label) = label_of(line) {
            block = label.to_owned();
            current = block.clone();
            lines.push(line.to_owned());
            k += 1;
            continue;
        }
        let trimmed = line.trim_start();
        let (result, instruction) = match trimmed.split_once(" = ") {
            Some((r, i)) if r.starts_with('%') && !r.contains(' ') => (Some(r), i),
            _ => (None, trimmed),
        };
        let opcode = instruction.split(' ').next().unwrap_or_default();
        if ["catchswitch", "cleanuppad", "catchpad", "callbr"].contains(&opcode) {
            return Err(BuildError::Toolchain(format!(
                "`{name}` uses `{opcode}`, which the GPU's unwinding does not lower"
            )));
        }
        let prefix = result.map_or("  ".to_owned(), |r| format!("  {r} = "));
        match opcode {
            "resume" => {
                let (ty, v) = instruction["resume ".len()..]
                    .rsplit_once(' ')
                    .ok_or_else(|| unreadable(line))?;
                fresh += 1;
                lines.push(format!("  %__ex.{fresh} = extractvalue {ty} {v}, 0"));
                lines.push(format!(
                    "  %__rc.{fresh} = call i32 @{UNWIND_RESUME}(ptr %__ex.{fresh})"
                ));
                lines.push(format!("  br label %{UNWOUND}"));
                leaves = true;
                k += 1;
            }
            "landingpad" => {
                let ty = &instruction["landingpad ".len()..];
                fresh += 1;
                lines.push(format!("  %__ex.{fresh} = call ptr @{UNWIND_TAKE}()"));
                lines.push(format!(
                    "{prefix}insertvalue {ty} {{ ptr poison, i32 0 }}, ptr %__ex.{fresh}, 0"
                ));
                pads += 1;
                k += 1;
                // Its clauses, one per line.
                while body.get(k).is_some_and(|l| {
                    let c = l.trim_start();
                    c == "cleanup" || c.starts_with("catch ") || c.starts_with("filter ")
                }) {
                    k += 1;
                }
            }
            "invoke" => {
                let call =
                    read_call(instruction, "invoke ", groups).ok_or_else(|| unreadable(line))?;
                // `to label %a unwind label %b` and the metadata, on the next line.
                let next = body.get(k + 1).map(|l| l.trim_start()).unwrap_or_default();
                let (normal, unwind) = next
                    .strip_prefix("to label ")
                    .and_then(|r| r.split_once(" unwind label "))
                    .map(|(n, u)| (n, u.split([',', ' ']).next().unwrap_or(u)))
                    .ok_or_else(|| unreadable(line))?;
                let metadata = next.find(", !").map_or("", |m| &next[m..]);
                let as_call = as_called(&instruction.replacen("invoke ", "call ", 1), &call);
                lines.push(format!("{prefix}{as_call}{metadata}"));
                match may_unwind(&call, functions) {
                    _ if call.callee == Some(RAISE) => lines.push(format!("  br label {unwind}")),
                    (false, _) => lines.push(format!("  br label {normal}")),
                    (true, false) => lines.push(format!("  br label {unwind}")),
                    (true, true) => {
                        fresh += 1;
                        looks += 1;
                        let join = look(&mut lines, fresh, &current, unwind, normal);
                        moved.insert(block.clone(), join.clone());
                        current = join;
                    }
                }
                k += 2;
            }
            _ => {
                let Some(call) = read_call(instruction, "call ", groups) else {
                    if opcode == "call" || instruction.starts_with("tail call ") {
                        return Err(unreadable(line));
                    }
                    lines.push(line.to_owned());
                    k += 1;
                    continue;
                };
                let raises = call.callee == Some(RAISE);
                if !raises && !may_unwind(&call, functions).0 {
                    lines.push(line.to_owned());
                    k += 1;
                    continue;
                }
                lines.push(format!("{prefix}{}", as_called(instruction, &call)));
                let next = next_instruction(body, k);
                let next_text = next.map(|(_, l)| l.trim_start()).unwrap_or_default();
                if next_text.starts_with("ret") && !raises {
                    // The caller looks after this function returns.
                    k += 1;
                } else if next_text == "unreachable" || raises {
                    // Only an unwinding call comes back here.
                    lines.push(format!("  br label %{UNWOUND}"));
                    leaves = true;
                    match next {
                        Some((j, _)) if next_text == "unreachable" => k = j + 1,
                        _ => {
                            // What followed the raise cannot be reached; it stays a block.
                            fresh += 1;
                            let label = format!("__dead.{fresh}");
                            lines.push(format!("{label}:"));
                            moved.insert(block.clone(), label.clone());
                            current = label;
                            k += 1;
                        }
                    }
                } else {
                    fresh += 1;
                    looks += 1;
                    leaves = true;
                    let label = format!("__cont.{fresh}");
                    look(
                        &mut lines,
                        fresh,
                        &current,
                        &format!("%{UNWOUND}"),
                        &format!("%{label}"),
                    );
                    lines.push(format!("{label}:"));
                    moved.insert(block.clone(), label.clone());
                    current = label;
                    k += 1;
                }
            }
        }
    }
    let personality_clause = personality(define).map(|(c, _)| c);
    if !leaves && pads == 0 && looks == 0 && personality_clause.is_none() {
        out.push_str(define);
        out.push('\n');
        for l in body {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str("}\n");
        return Ok(());
    }
    match personality_clause {
        Some(c) => out.push_str(&define.replacen(c, "", 1)),
        None => out.push_str(define),
    }
    out.push('\n');
    for l in &lines {
        if !moved.is_empty() && l.contains(" = phi ") && !l.starts_with(LOOK_PREFIX) {
            out.push_str(&retarget_phi(l, &moved));
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    if leaves {
        let ret_ty = return_type(define).ok_or_else(|| unreadable(define))?;
        out.push_str(&format!("\n{UNWOUND}:\n"));
        if ret_ty == "void" {
            out.push_str("  ret void\n");
        } else {
            out.push_str(&format!("  ret {ret_ty} zeroinitializer\n"));
        }
    }
    out.push_str("}\n");
    done.functions += 1;
    done.looks += looks;
    done.pads += pads;
    Ok(())
}

/// The start of the lines a look writes, whose `phi` names its blocks as they are.
const LOOK_PREFIX: &str = "  %__uw.";

/// Writes look `n`, in the block labelled `from`, to `lines`: the count of unwinding
/// threads ([`UNWINDERS`], almost always 0: one load that stays in L1) and only when it is
/// not 0 the thread's own word ([`UNWINDING`]); then a branch to `unwind` or `normal`
/// (labels with their `%`). Returns the label of the block that branches.
fn look(lines: &mut Vec<String>, n: usize, from: &str, unwind: &str, normal: &str) -> String {
    let (ask, join) = (format!("__ask.{n}"), format!("__join.{n}"));
    lines.push(format!("  %__uc.{n} = load i32, ptr @{UNWINDERS}, align 4"));
    lines.push(format!("  %__ua.{n} = icmp ne i32 %__uc.{n}, 0"));
    lines.push(format!("  br i1 %__ua.{n}, label %{ask}, label %{join}"));
    lines.push(format!("{ask}:"));
    lines.push(format!("  %__uo.{n} = call i1 @{UNWINDING}()"));
    lines.push(format!("  br label %{join}"));
    lines.push(format!("{join}:"));
    lines.push(format!(
        "{LOOK_PREFIX}{n} = phi i1 [ false, %{from} ], [ %__uo.{n}, %{ask} ]"
    ));
    lines.push(format!("  br i1 %__uw.{n}, label {unwind}, label {normal}"));
    join
}

/// A call instruction with `_Unwind_RaiseException` replaced by [`UNWIND_RESUME`].
fn as_called(instruction: &str, call: &Call<'_>) -> String {
    if call.callee == Some(RAISE) {
        instruction.replacen(&format!("@{RAISE}("), &format!("@{UNWIND_RESUME}("), 1)
    } else {
        instruction.to_owned()
    }
}

/// A `phi` whose incoming blocks that were split now name the block that ends them.
fn retarget_phi(line: &str, moved: &HashMap<String, String>) -> String {
    let mut out = line.to_owned();
    for (from, to) in moved {
        out = out.replace(&format!(", %{from} ]"), &format!(", %{to} ]"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module as `opt` leaves a Rust binary built with `panic = "unwind"`: a catch
    /// (`__rust_try`), a cleanup that resumes, calls that may and may not unwind, and
    /// the runtime's functions.
    const IR: &str = r#"%Pair = type { i64, i64 }
@__hostcall_unwinders = global i32 0

define internal i32 @__rust_try(ptr %0, ptr %1, ptr %2) unnamed_addr #0 personality ptr @rust_eh_personality {
  invoke void %0(ptr %1)
          to label %ok unwind label %caught, !noalias !1

ok:
  ret i32 0

caught:
  %x = landingpad { ptr, i32 }
          catch ptr null
  %p = extractvalue { ptr, i32 } %x, 0
  call void %2(ptr %1, ptr %p) #1
  ret i32 1
}

define internal { i64, i64 } @cleans_up(i64 %0) unnamed_addr #0 personality ptr @rust_eh_personality {
  %2 = icmp eq i64 %0, 0
  br i1 %2, label %3, label %4

3:
  invoke void @may_panic(i64 %0)
          to label %4 unwind label %6

4:
  %5 = phi i64 [ 1, %1 ], [ 2, %3 ]
  call void @may_panic(i64 %5)
  call void @pure(i64 %5)
  %r = insertvalue { i64, i64 } zeroinitializer, i64 %5, 0
  br label %7

6:
  %lp = landingpad { ptr, i32 }
          cleanup
  call void @drop(i64 %0) #1
  resume { ptr, i32 } %lp

7:
  %8 = phi i64 [ %5, %4 ]
  ret { i64, i64 } %r
}

define internal void @may_panic(i64 %0) unnamed_addr #0 {
  %2 = icmp ugt i64 %0, 9
  br i1 %2, label %3, label %4

3:
  tail call void @panic_fmt(i64 %0) #2
  unreachable

4:
  tail call void @inner(i64 %0)
  ret void
}

define internal void @panic_fmt(i64 %0) unnamed_addr #3 {
  %e = call ptr @alloc_exception(i64 %0) #1
  %c = call i32 @_Unwind_RaiseException(ptr %e)
  call void @abort() #1
  unreachable
}

define internal void @inner(i64 %0) unnamed_addr #0 {
  call void asm sideeffect "trap;", ""()
  call void @llvm.assume(i1 true)
  ret void
}

define internal i32 @rust_eh_personality(i32 %0) unnamed_addr #1 {
  %2 = call ptr @_Unwind_GetLanguageSpecificData(ptr null)
  ret i32 0
}

declare i32 @_Unwind_RaiseException(ptr)
declare ptr @_Unwind_GetLanguageSpecificData(ptr)
declare void @pure(i64) #1
declare void @drop(i64) #1
declare void @abort() #4
declare ptr @alloc_exception(i64) #1
declare void @llvm.assume(i1)

define zeroext i1 @__hostcall_unwinding() #1 {
  ret i1 false
}
define ptr @__hostcall_unwind_take() #1 {
  ret ptr null
}
define i32 @__hostcall_unwind_resume(ptr %0) #1 {
  ret i32 0
}

attributes #0 = { uwtable "target-cpu"="sm_90" }
attributes #1 = { nounwind }
attributes #2 = { noreturn }
attributes #3 = { cold noreturn uwtable }
attributes #4 = { noreturn nounwind }

!1 = !{}
"#;

    /// The definition of `name` in `ir`.
    fn function<'a>(ir: &'a str, name: &str) -> &'a str {
        let head = ir
            .lines()
            .find(|l| l.starts_with("define ") && l.contains(&format!("@{name}(")))
            .unwrap();
        let start = ir.find(head).unwrap();
        &ir[start..start + ir[start..].find("\n}\n").unwrap() + 2]
    }

    #[test]
    fn a_catch_takes_the_exception_its_call_left() {
        let (out, done) = lower(IR).unwrap();
        let f = function(&out, "__rust_try");
        assert!(!f.contains("personality") && !f.contains("invoke"), "{f}");
        assert!(f.contains("  call void %0(ptr %1), !noalias !1\n"), "{f}");
        // The look: the count of unwinding threads, then the thread's own word.
        assert!(
            f.contains("load i32, ptr @__hostcall_unwinders")
                && f.contains("call i1 @__hostcall_unwinding()")
                && f.contains("label %caught, label %ok"),
            "{f}"
        );
        assert!(
            f.contains("call ptr @__hostcall_unwind_take()")
                && f.contains("%x = insertvalue { ptr, i32 } { ptr poison, i32 0 }, ptr %__ex."),
            "{f}"
        );
        assert!(!f.contains("catch ptr null"), "{f}");
        assert_eq!(done.pads, 2);
    }

    #[test]
    fn a_cleanup_resumes_and_its_function_returns_zeros() {
        let (out, _) = lower(IR).unwrap();
        let f = function(&out, "cleans_up");
        assert!(
            f.contains("call i32 @__hostcall_unwind_resume(ptr %__ex.")
                && f.contains("__unwound:\n  ret { i64, i64 } zeroinitializer\n"),
            "{f}"
        );
        // The plain call that may unwind is looked after, splitting its block; the phi
        // of its successor names the block that now ends it. A nounwind call is not.
        assert!(
            f.contains("  call void @may_panic(i64 %5)\n  %__uc."),
            "{f}"
        );
        assert!(
            f.contains("  call void @pure(i64 %5)\n  %r = insertvalue"),
            "{f}"
        );
        let cont = f.lines().find(|l| l.starts_with("__cont.")).unwrap();
        let cont = cont.trim_end_matches(':');
        assert!(f.contains(&format!("%8 = phi i64 [ %5, %{cont} ]")), "{f}");
        // The entry block, unlabelled, is `%1` after one unnamed parameter, and the
        // first phi's blocks were not split.
        assert!(f.contains("%5 = phi i64 [ 1, %1 ], [ 2, %__join."), "{f}");
    }

    #[test]
    fn calls_before_ret_or_unreachable_need_no_look() {
        let (out, _) = lower(IR).unwrap();
        let f = function(&out, "may_panic");
        // A call that cannot come back but by unwinding leaves at once.
        assert!(
            f.contains("tail call void @panic_fmt(i64 %0) #2\n  br label %__unwound"),
            "{f}"
        );
        // A call before `ret` is looked after by the caller.
        assert!(
            f.contains("tail call void @inner(i64 %0)\n  ret void"),
            "{f}"
        );
        assert_eq!(f.matches("@__hostcall_unwinders").count(), 0, "{f}");
        // Inline assembly and intrinsics do not unwind: `inner` is unchanged.
        assert!(function(IR, "inner") == function(&out, "inner"));
    }

    #[test]
    fn raising_stores_the_exception_and_leaves() {
        let (out, _) = lower(IR).unwrap();
        let f = function(&out, "panic_fmt");
        assert!(
            f.contains("%c = call i32 @__hostcall_unwind_resume(ptr %e)\n  br label %__unwound"),
            "{f}"
        );
        assert!(!out.contains("_Unwind_RaiseException"), "{out}");
        // The personality routine and what only it called are gone; `noreturn` goes
        // from groups that may unwind and stays on `nounwind` ones.
        assert!(!out.contains("@rust_eh_personality"), "{out}");
        assert!(out.contains("attributes #2 = { \"unwinds\" }"), "{out}");
        assert!(
            out.contains("attributes #3 = { cold \"unwinds\" uwtable }"),
            "{out}"
        );
        assert!(
            out.contains("attributes #4 = { noreturn nounwind }"),
            "{out}"
        );
    }

    #[test]
    fn the_lowered_module_is_valid_ir_without_exception_handling() {
        let (out, _) = lower(IR).unwrap();
        for word in ["invoke ", "landingpad", "resume ", "personality"] {
            assert!(!out.contains(word), "{word} left in:\n{out}");
        }
        let tc = crate::tools::Toolchain::detect().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ll = dir.path().join("m.ll");
        std::fs::write(&ll, &out).unwrap();
        crate::tools::run(
            std::process::Command::new(tc.llvm("llvm-as"))
                .arg(&ll)
                .arg("-o")
                .arg(dir.path().join("m.bc")),
        )
        .unwrap_or_else(|e| panic!("{e}\n{out}"));
    }

    #[test]
    fn a_module_without_the_runtime_is_refused() {
        let ir = IR.replace("define i32 @__hostcall_unwind_resume", "define i32 @other");
        let e = lower(&ir).unwrap_err().to_string();
        assert!(e.contains("__hostcall_unwind_resume"), "{e}");
    }
}
