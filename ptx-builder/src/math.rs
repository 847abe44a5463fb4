//! Float math on the GPU. LLVM has no NVPTX lowering for its transcendental math
//! intrinsics (`llvm.sin.f64`, `llvm.pow.f32`, `llvm.powi.f64.i32`, ...): llc aborts with
//! a stack dump. So before `opt`, each call of one becomes a call of the C function of
//! the same meaning (`sin`, `powf`, `__powidf2`), the names glibc and compiler-rt give
//! them, which compiler-builtins defines on this target (its libm, enabled for nvptx64 by
//! the fixup `0012-gpu-libm.patch`). The C names std and crates call directly (`cbrt`,
//! `tgamma`, `lgamma_r`, ...) come from the same place.
//!
//! LLVM's own lowering of `frem` (Rust's `%` on floats) is inexact and loses the sign of
//! a zero result, so it becomes a call of `fmod`/`fmodf` too; that it appears nowhere in
//! a module's names is why every module is disassembled for this step.
//!
//! `opt` never makes these intrinsics anew: LLVM knows of no C library on NVPTX, so it
//! turns no `sin` call back into `llvm.sin`. A module that still holds one after `opt`
//! (a form no rewrite covers, such as a vector `llvm.sin.v4f64`) is refused before llc
//! with a sentence naming the intrinsic and the functions that call it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{Toolchain, run};
use crate::{BuildError, Result};

/// The intrinsics rewritten, by operation: `llvm.OP.f64` becomes a call of the first C
/// name, `llvm.OP.f32` of the second; `args` is how many floats each takes.
const OPERATIONS: &[Operation] = &[
    Operation::new("sin", "sin", "sinf", 1),
    Operation::new("cos", "cos", "cosf", 1),
    Operation::new("tan", "tan", "tanf", 1),
    Operation::new("asin", "asin", "asinf", 1),
    Operation::new("acos", "acos", "acosf", 1),
    Operation::new("atan", "atan", "atanf", 1),
    Operation::new("atan2", "atan2", "atan2f", 2),
    Operation::new("sinh", "sinh", "sinhf", 1),
    Operation::new("cosh", "cosh", "coshf", 1),
    Operation::new("tanh", "tanh", "tanhf", 1),
    Operation::new("exp", "exp", "expf", 1),
    Operation::new("exp2", "exp2", "exp2f", 1),
    Operation::new("exp10", "exp10", "exp10f", 1),
    Operation::new("log", "log", "logf", 1),
    Operation::new("log2", "log2", "log2f", 1),
    Operation::new("log10", "log10", "log10f", 1),
    Operation::new("pow", "pow", "powf", 2),
];

/// `llvm.powi.f64.i32` / `llvm.powi.f32.i32`: compiler-rt's names, as on the CPU.
const POWI: [(&str, &str, &str); 2] = [
    ("llvm.powi.f64.i32", "__powidf2", "double"),
    ("llvm.powi.f32.i32", "__powisf2", "float"),
];

/// Intrinsics llc cannot lower that no rewrite covers in any form; a module holding one
/// is refused (vector forms of [`OPERATIONS`] are refused too).
const UNLOWERED: [&str; 5] = [
    "llvm.sincos.",
    "llvm.lrint.",
    "llvm.llrint.",
    "llvm.lround.",
    "llvm.llround.",
];

/// One math operation and the C functions that compute it.
struct Operation {
    op: &'static str,
    f64_name: &'static str,
    f32_name: &'static str,
    args: usize,
}

impl Operation {
    const fn new(
        op: &'static str,
        f64_name: &'static str,
        f32_name: &'static str,
        args: usize,
    ) -> Self {
        Operation {
            op,
            f64_name,
            f32_name,
            args,
        }
    }
}

/// One rewrite: calls of `intrinsic` (`None`: the scalar `frem`s of type `ret`) become
/// calls of `function`, of type `ret (params)`.
struct Rewrite {
    intrinsic: Option<String>,
    function: &'static str,
    ret: &'static str,
    params: String,
}

/// Every scalar rewrite this module makes. `frem` of `double` and `float` becomes a call
/// of C's `fmod` and `fmodf`: LLVM lowers `frem` on NVPTX as `x - trunc(x / y) * y`,
/// which loses the sign of a zero result (`(-0.0) % 2.5` gives `0.0`, glibc `-0.0`) and
/// is inexact where the quotient is large; `fmod` is exact, as on the CPU.
fn rewrites() -> Vec<Rewrite> {
    let mut all = Vec::new();
    for o in OPERATIONS {
        for (suffix, name, ty) in [("f64", o.f64_name, "double"), ("f32", o.f32_name, "float")] {
            all.push(Rewrite {
                intrinsic: Some(format!("llvm.{}.{suffix}", o.op)),
                function: name,
                ret: ty,
                params: vec![ty; o.args].join(", "),
            });
        }
    }
    for (intrinsic, function, ty) in POWI {
        all.push(Rewrite {
            intrinsic: Some(intrinsic.to_owned()),
            function,
            ret: ty,
            params: format!("{ty}, i32"),
        });
    }
    for (function, ty) in [("fmod", "double"), ("fmodf", "float")] {
        all.push(Rewrite {
            intrinsic: None,
            function,
            ret: ty,
            params: format!("{ty}, {ty}"),
        });
    }
    all
}

/// Whether `ir` has a scalar `frem` of type `ty` (`frem double`, `frem fast double`).
fn has_frem(ir: &str, ty: &str) -> bool {
    ir.match_indices(" = frem ")
        .any(|(at, _)| frem_parts(&ir[at + 1..]).is_some_and(|(_, t, _)| t == ty))
}

/// The fast-math flags, type and operands of the `frem` that `text` (`= frem ...`) starts.
fn frem_parts(text: &str) -> Option<(&str, &str, &str)> {
    let rest = text.strip_prefix("= frem ")?;
    let line = rest.lines().next()?;
    for ty in ["double ", "float "] {
        if let Some(at) = line.find(ty) {
            let flags = line[..at].trim();
            if flags.split(' ').all(|f| {
                matches!(
                    f,
                    "" | "fast" | "nnan" | "ninf" | "nsz" | "arcp" | "contract" | "afn" | "reassoc"
                )
            }) {
                return Some((flags, ty.trim_end(), &line[at + ty.len()..]));
            }
        }
    }
    None
}

/// The line of a scalar `frem` as a call of `fmod`/`fmodf` with the same flags and
/// operands; `None` for any other line.
fn frem_as_call(line: &str) -> Option<String> {
    let at = line.find(" = frem ")?;
    let (flags, ty, operands) = frem_parts(&line[at + 1..])?;
    let (a, rest) = operands.split_once(", ")?;
    // Metadata after the operands (`, !dbg !7`) stays on the call.
    let (b, tail) = match rest.split_once(", ") {
        Some((b, tail)) => (b, format!(", {tail}")),
        None => (rest, String::new()),
    };
    let function = if ty == "double" { "fmod" } else { "fmodf" };
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!("{flags} ")
    };
    Some(format!(
        "{} = call {flags}{ty} @{function}({ty} {a}, {ty} {b}){tail}",
        &line[..at]
    ))
}

/// Whether the bitcode `bytes` may name a math intrinsic: function names sit in the
/// bitcode's string table as plain bytes, so the check after `opt` disassembles only a
/// module that names one.
fn may_name_math(bytes: &[u8]) -> bool {
    let has = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    OPERATIONS.iter().any(|o| has(&format!("llvm.{}.", o.op)))
        || has("llvm.powi.")
        || UNLOWERED.iter().any(|u| has(u))
}

/// `linked` with its math intrinsics turned into C calls, as a new bitcode file beside it
/// (`NAME.linked.math.bc`, its path returned); `None` when it has nothing to rewrite.
pub(crate) fn lower(tc: &Toolchain, linked: &Path) -> Result<Option<PathBuf>> {
    let out = run(Command::new(tc.llvm("llvm-dis"))
        .arg(linked)
        .args(["-o", "-"]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(rewritten) = rewrite(&text) else {
        return Ok(None);
    };
    let ll = linked.with_extension("math.ll");
    let bc = linked.with_extension("math.bc");
    std::fs::write(&ll, rewritten).map_err(BuildError::io(format!("writing {}", ll.display())))?;
    run(Command::new(tc.llvm("llvm-as")).arg(&ll).arg("-o").arg(&bc))?;
    let _ = std::fs::remove_file(&ll);
    Ok(Some(bc))
}

/// `ir` (textual LLVM IR) with every call of a scalar math intrinsic made a call of its C
/// function, every scalar `frem` a call of `fmod`/`fmodf`, the intrinsics' declarations
/// dropped and the functions declared where the module does not already have them;
/// `None` if `ir` has none of these.
fn rewrite(ir: &str) -> Option<String> {
    let used: Vec<Rewrite> = rewrites()
        .into_iter()
        .filter(|r| match &r.intrinsic {
            Some(name) => ir.contains(&format!("@{name}(")),
            None => has_frem(ir, r.ret),
        })
        .collect();
    if used.is_empty() {
        return None;
    }
    // Each intrinsic's name as it appears in a call, and its function's.
    let calls: Vec<(String, String)> = used
        .iter()
        .filter_map(|r| {
            let name = r.intrinsic.as_ref()?;
            Some((format!("@{name}("), format!("@{}(", r.function)))
        })
        .collect();
    let mut out = String::with_capacity(ir.len());
    for line in ir.lines() {
        if let Some(call) = frem_as_call(line) {
            out.push_str(&call);
            out.push('\n');
            continue;
        }
        if line.starts_with("declare ") && calls.iter().any(|(from, _)| line.contains(from)) {
            continue;
        }
        let mut line = line.to_owned();
        for (from, to) in &calls {
            if line.contains(from) {
                line = line.replace(from, to);
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    let mut declared: Vec<&str> = Vec::new();
    for r in &used {
        let named = format!("@{}(", r.function);
        let present = ir
            .lines()
            .any(|l| (l.starts_with("define ") || l.starts_with("declare ")) && l.contains(&named));
        if !present && !declared.contains(&r.function) {
            out.push_str(&format!(
                "declare {} @{}({})\n",
                r.ret, r.function, r.params
            ));
            declared.push(r.function);
        }
    }
    Some(out)
}

/// Refuses an optimized module that still calls a math intrinsic llc cannot lower,
/// naming it and its callers, rather than letting llc abort.
pub(crate) fn check(tc: &Toolchain, optimized: &Path) -> Result<()> {
    let bytes = std::fs::read(optimized)
        .map_err(BuildError::io(format!("reading {}", optimized.display())))?;
    if !may_name_math(&bytes) {
        return Ok(());
    }
    let out = run(Command::new(tc.llvm("llvm-dis"))
        .arg(optimized)
        .args(["-o", "-"]))?;
    let left = unlowered_calls(&String::from_utf8_lossy(&out.stdout));
    if left.is_empty() {
        return Ok(());
    }
    Err(BuildError::MathIntrinsics(left))
}

/// The math intrinsics `ir` still calls, each with the functions that call it.
fn unlowered_calls(ir: &str) -> Vec<(String, Vec<String>)> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    let mut current = "";
    for line in ir.lines() {
        if line.starts_with("define ") {
            current = crate::ir::declared_or_defined(line).unwrap_or("");
            continue;
        }
        let Some(at) = line.find("@llvm.") else {
            continue;
        };
        if line.starts_with("declare ") {
            continue;
        }
        let name = &line[at + 1..];
        let name = &name[..name.find('(').unwrap_or(name.len())];
        if !unlowerable(name) {
            continue;
        }
        let caller = crate::ir::demangle(current);
        match found.iter_mut().find(|(n, _)| n == name) {
            Some((_, callers)) if !callers.contains(&caller) => callers.push(caller),
            Some(_) => {}
            None => found.push((name.to_owned(), vec![caller])),
        }
    }
    found
}

/// Whether llc has no lowering for the intrinsic `name` (after the rewrites: any form
/// of [`OPERATIONS`] or `powi` still present, and [`UNLOWERED`]).
fn unlowerable(name: &str) -> bool {
    OPERATIONS
        .iter()
        .any(|o| name.starts_with(&format!("llvm.{}.", o.op)))
        || name.starts_with("llvm.powi.")
        || UNLOWERED.iter().any(|u| name.starts_with(u))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = "\
define double @f(double %x, float %y, i32 %n) {
  %a = tail call double @llvm.sin.f64(double %x)
  %b = call fast float @llvm.pow.f32(float %y, float %y)
  %c = call double @llvm.powi.f64.i32(double %a, i32 %n)
  %d = call double @llvm.sqrt.f64(double %c)
  ret double %d
}

define weak float @powf(float %x, float %y) {
  ret float %x
}

declare double @llvm.sin.f64(double) #0
declare float @llvm.pow.f32(float, float) #0
declare double @llvm.powi.f64.i32(double, i32) #0
declare double @llvm.sqrt.f64(double) #0
";

    #[test]
    fn scalar_intrinsics_become_c_calls_declared_once() {
        let out = rewrite(IR).unwrap();
        assert!(out.contains("tail call double @sin(double %x)"), "{out}");
        assert!(
            out.contains("call fast float @powf(float %y, float %y)"),
            "{out}"
        );
        assert!(
            out.contains("call double @__powidf2(double %a, i32 %n)"),
            "{out}"
        );
        assert!(
            out.contains("call double @llvm.sqrt.f64(double %c)"),
            "{out}"
        );
        assert!(!out.contains("@llvm.sin.f64"), "{out}");
        assert!(out.contains("declare double @sin(double)\n"), "{out}");
        assert!(
            out.contains("declare double @__powidf2(double, i32)\n"),
            "{out}"
        );
        // The module defines powf (compiler-builtins' libm): not declared again.
        assert!(!out.contains("declare float @powf"), "{out}");
        assert!(
            out.contains("declare double @llvm.sqrt.f64(double) #0"),
            "{out}"
        );
    }

    #[test]
    fn float_remainders_become_fmod_calls_keeping_flags_and_metadata() {
        let ir = "\
define double @r(double %x, float %y) {
  %a = frem double %x, 2.500000e+00
  %b = frem fast float %y, %y, !dbg !7
  %c = frem <2 x double> %v, %v
  ret double %a
}
";
        let out = rewrite(ir).unwrap();
        assert!(
            out.contains("  %a = call double @fmod(double %x, double 2.500000e+00)\n"),
            "{out}"
        );
        assert!(
            out.contains("  %b = call fast float @fmodf(float %y, float %y), !dbg !7\n"),
            "{out}"
        );
        assert!(out.contains("  %c = frem <2 x double> %v, %v\n"), "{out}");
        assert!(
            out.contains("declare double @fmod(double, double)\n"),
            "{out}"
        );
        assert!(
            out.contains("declare float @fmodf(float, float)\n"),
            "{out}"
        );
    }

    #[test]
    fn a_module_without_math_is_left_alone() {
        assert!(rewrite("define void @f() {\n  ret void\n}\n").is_none());
        assert!(!may_name_math(b"BC\xc0\xdellvm.sqrt.f64llvm.memcpy.p0"));
        assert!(may_name_math(b"BC\xc0\xde__rustllvm.exp2.f32"));
    }

    #[test]
    fn vector_and_other_forms_left_are_named_with_their_callers() {
        let ir = "\
define void @_ZN4demo5wavey17h0123456789abcdefE(<2 x double> %v) {
  %a = call <2 x double> @llvm.sin.v2f64(<2 x double> %v)
  %b = call { double, double } @llvm.sincos.f64(double 1.0)
  %c = call double @llvm.sqrt.f64(double 2.0)
  ret void
}
declare <2 x double> @llvm.sin.v2f64(<2 x double>)
";
        let left = unlowered_calls(ir);
        assert_eq!(
            left,
            vec![
                ("llvm.sin.v2f64".to_owned(), vec!["demo::wavey".to_owned()]),
                ("llvm.sincos.f64".to_owned(), vec!["demo::wavey".to_owned()]),
            ]
        );
        let msg = BuildError::MathIntrinsics(left).to_string();
        assert!(
            msg.contains("llvm.sin.v2f64 (called by demo::wavey)"),
            "{msg}"
        );
        assert!(msg.lines().count() <= 4, "{msg}");
    }
}
