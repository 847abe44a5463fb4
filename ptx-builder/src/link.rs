//! From the staticlib's bitcode to PTX: `llvm-ar`, `llvm-link`, `opt`, `llc`, and the
//! check for functions left undefined.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hostcall_abi::{FRAME_POP, FRAME_PUSH, START_KERNEL, THREAD_EXIT_KERNEL};

use crate::tools::{Toolchain, run};
use crate::{BuildError, Result, Unresolved};

/// Puts the bitcode of `inputs` (archives' members, and objects) into `members` and
/// links it into `linked`.
pub(crate) fn link(
    tc: &Toolchain,
    inputs: &[PathBuf],
    members: &Path,
    linked: &Path,
) -> Result<()> {
    let _ = std::fs::remove_dir_all(members);
    std::fs::create_dir_all(members)
        .map_err(BuildError::io(format!("creating {}", members.display())))?;
    for input in inputs {
        if input.extension().is_some_and(|x| x == "o") {
            // rustc names objects after their crate, as it names archive members.
            let to = members.join(input.file_name().unwrap_or_default());
            std::fs::copy(input, &to)
                .map_err(BuildError::io(format!("copying {}", input.display())))?;
        } else {
            extract(tc, input, members)?;
        }
    }
    let mut objects: Vec<PathBuf> = std::fs::read_dir(members)
        .map_err(BuildError::io(format!("reading {}", members.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    run(Command::new(tc.llvm("llvm-link"))
        .args(&objects)
        .arg("-o")
        .arg(linked))?;
    Ok(())
}

/// Extracts the members of the archive `staticlib` (bitcode objects) into the existing
/// `dir`.
pub(crate) fn extract(tc: &Toolchain, staticlib: &Path, dir: &Path) -> Result<()> {
    let staticlib = staticlib
        .canonicalize()
        .map_err(BuildError::io(format!("resolving {}", staticlib.display())))?;
    run(Command::new(tc.llvm("llvm-ar"))
        .arg("x")
        .arg(staticlib)
        .current_dir(dir))?;
    Ok(())
}

/// Names of the `ptx_kernel` functions the module defines.
fn find_kernels(tc: &Toolchain, linked: &Path) -> Result<Vec<String>> {
    let out = run(Command::new(tc.llvm("llvm-dis"))
        .arg(linked)
        .args(["-o", "-"]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter(|l| l.starts_with("define ") && l.contains(" ptx_kernel "))
        .filter_map(|l| {
            let at = l.find('@')? + 1;
            let end = l[at..].find('(')? + at;
            Some(l[at..end].trim_matches('"').to_owned())
        })
        .collect())
}

/// Symbols the host looks up in every module, kept through internalization.
const HOST_VISIBLE: [&str; 2] = ["__hostcall_config", "__hostcall_abi_version"];

/// Optimizes `linked` into `optimized` with everything internalized but the host-visible
/// symbols, `keep`, and the kernels: `chosen`, or else every `ptx_kernel` function; its
/// float math intrinsics become C calls first (`crate::math`). Returns the kernels.
pub(crate) fn optimize_kernels(
    tc: &Toolchain,
    linked: &Path,
    chosen: Option<&[String]>,
    keep: &[&str],
    optimized: &Path,
) -> Result<Vec<String>> {
    let lowered = crate::math::lower(tc, linked)?;
    let linked = lowered.as_deref().unwrap_or(linked);
    let kernels = match chosen {
        Some(k) => k.to_vec(),
        None => find_kernels(tc, linked)?,
    };
    if kernels.is_empty() {
        return Err(BuildError::NoKernels);
    }
    let mut public: Vec<&str> = kernels
        .iter()
        .map(String::as_str)
        .chain(HOST_VISIBLE)
        .chain(keep.iter().copied())
        .collect();
    let slots = used_service_slots(tc, linked, &public, optimized)?;
    public.extend(slots.iter().map(String::as_str));
    optimize(tc, linked, &public, optimized)?;
    crate::math::check(tc, optimized)?;
    Ok(kernels)
}

/// The slots of the declared services (`__HOSTCALL__*` globals) that the kernels reach:
/// kept visible, so that the host finds them and the compiler cannot fold their ids to
/// the unbound value they start with. A declaration crate defines a slot for every
/// method, so those of services no kernel calls are first dropped (`globaldce`, with
/// everything but `public` internalized) and only the rest listed. Modules without
/// slots skip this.
fn used_service_slots(
    tc: &Toolchain,
    linked: &Path,
    public: &[&str],
    scratch: &Path,
) -> Result<Vec<String>> {
    const PREFIX: &str = "__HOSTCALL__";
    let bytes =
        std::fs::read(linked).map_err(BuildError::io(format!("reading {}", linked.display())))?;
    if !bytes.windows(PREFIX.len()).any(|w| w == PREFIX.as_bytes()) {
        return Ok(Vec::new());
    }
    run(Command::new(tc.llvm("opt"))
        .arg("--passes=internalize,globaldce")
        .arg(format!(
            "--internalize-public-api-list={}",
            public.join(",")
        ))
        .arg(linked)
        .arg("-o")
        .arg(scratch))?;
    let out = run(Command::new(tc.llvm("llvm-dis"))
        .arg(scratch)
        .args(["-o", "-"]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(slot_definitions(&text, PREFIX))
}

/// Globals named `prefix...` that `ir` (textual LLVM IR) defines.
fn slot_definitions(ir: &str, prefix: &str) -> Vec<String> {
    let at = format!("@{prefix}");
    ir.lines()
        .filter(|l| l.starts_with(&at) && l.contains(" = "))
        .filter_map(|l| Some(l[1..l.find(' ')?].trim_matches('"').to_owned()))
        .collect()
}

/// Internalizes everything but `public` in `linked`, and optimizes it into `optimized`.
fn optimize(tc: &Toolchain, linked: &Path, public: &[&str], optimized: &Path) -> Result<()> {
    run(Command::new(tc.llvm("opt"))
        .arg("--passes=internalize,globaldce,default<O2>,globaldce")
        .arg(format!(
            "--internalize-public-api-list={}",
            public.join(",")
        ))
        .arg(linked)
        .arg("-o")
        .arg(optimized))?;
    Ok(())
}

/// Lowers `optimized` to PTX for `sm` at `ptx`, its kernels bounded to `max_threads`
/// threads per block.
pub(crate) fn emit_ptx(
    tc: &Toolchain,
    optimized: &Path,
    sm: u32,
    ptx_version: u32,
    max_threads: u32,
    ptx: &Path,
) -> Result<()> {
    run(Command::new(tc.llvm("llc"))
        .arg("-mtriple=nvptx64-nvidia-cuda")
        .arg(format!("-mcpu=sm_{sm}"))
        .arg(format!("-mattr=+ptx{ptx_version}"))
        .arg(optimized)
        .arg("-o")
        .arg(ptx))?;
    let io = |what: &str| BuildError::io(format!("{what} {}", ptx.display()));
    let text = std::fs::read_to_string(ptx).map_err(io("reading"))?;
    let text = word_pad_globals(&bound_threads_per_block(
        &own_system_call_names(&text),
        max_threads,
    ));
    std::fs::write(ptx, text).map_err(io("writing"))?;
    Ok(())
}

/// Functions of PTX's system calls, which ptxas and nvJitLink supply themselves when a
/// module only declares them (CUDA's device `malloc` has an 8 MiB heap).
const SYSTEM_CALLS: [&str; 4] = ["malloc", "free", "vprintf", "__assertfail"];

/// What a module's own function of a system call's name is called instead.
const OWN_PREFIX: &str = "__hostcall_own_";

/// `ptx` with the module's own functions named as PTX's system calls (libc-hostcall's
/// `malloc`) renamed, [`OWN_PREFIX`] before the name: a module compiled in parts
/// (`crate::split`) declares them in every part but one, and a declared `malloc` is
/// CUDA's, not the module's (seen on an H200: rayon's registry got a null pointer from
/// it). The module defines every function it names ([`unresolved_in_ptx`]), so each such
/// name here is its own.
fn own_system_call_names(ptx: &str) -> String {
    if !SYSTEM_CALLS.iter().any(|n| ptx.contains(n)) {
        return ptx.to_owned();
    }
    let mut out = String::with_capacity(ptx.len() + 4096);
    for line in ptx.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(|c: char| is_ident(c)) {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            let word = &rest[..end];
            if SYSTEM_CALLS.contains(&word) {
                out.push_str(OWN_PREFIX);
            }
            out.push_str(word);
            rest = &rest[end..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// Whether `c` may be part of a PTX identifier (as llc names Rust's symbols).
pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// `ptx` with every global of alignment 1 or 2 aligned to 4 and padded with zeros to a
/// whole number of 4-byte words.
///
/// LLVM lowers an 8- or 16-bit atomic read-modify-write (`AtomicU8::compare_exchange`,
/// as std's `panic::get_backtrace_style` does) to a 32-bit compare-and-swap on the word
/// that holds it, so it reads up to 3 bytes past a 1-byte global. When the linker puts
/// that global last in the module's memory, the read faults (`CUDA_ERROR_ILLEGAL_ADDRESS`:
/// seen on an H100 with the panic path of a linked cubin). Padded, the word is the
/// global's own.
pub fn word_pad_globals(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    for line in ptx.lines() {
        out.push_str(&pad_global(line).unwrap_or_else(|| line.to_owned()));
        out.push('\n');
    }
    out
}

/// One global declaration, padded as [`word_pad_globals`] says; `None` if it needs nothing.
fn pad_global(line: &str) -> Option<String> {
    let (head, rest) = line.split_once(".global .align ")?;
    if !matches!(head, "" | ".visible " | ".weak ") {
        return None;
    }
    let (align, rest) = rest.split_once(' ')?;
    if !matches!(align, "1" | "2") {
        return None;
    }
    let (ty, rest) = rest.split_once(' ')?;
    let elem = match ty {
        ".b8" | ".u8" | ".s8" => 1,
        ".b16" | ".u16" | ".s16" => 2,
        _ => return None,
    };
    let body = rest.strip_suffix(';')?;
    let (decl, init) = match body.split_once(" = ") {
        Some((d, i)) => (d, Some(i)),
        None => (body, None),
    };
    let (name, count) = match decl.split_once('[') {
        Some((n, c)) => (n, c.strip_suffix(']')?.parse::<usize>().ok()?),
        None => (decl, 1),
    };
    let words = (count * elem).div_ceil(4).max(1);
    let padded = words * 4 / elem;
    let mut values: Vec<&str> = match init {
        Some(i) => match i.strip_prefix('{').and_then(|i| i.strip_suffix('}')) {
            // All zero or undefined: LLVM writes no value at all.
            Some("") => vec!["0"],
            Some(list) => list.split(", ").collect(),
            None => vec![i],
        },
        None => Vec::new(),
    };
    let init = if values.is_empty() {
        String::new()
    } else {
        values.resize(padded, "0");
        format!(" = {{{}}}", values.join(", "))
    };
    Some(format!(
        "{head}.global .align 4 {ty} {name}[{padded}]{init};"
    ))
}

/// `ptx` with every kernel entry declaring that it runs with at most `max` threads per
/// block (`.maxntid`): ptxas and the driver's JIT then keep its registers within what a
/// block of `max` threads can have, so such a launch never fails for lack of them.
pub fn bound_threads_per_block(ptx: &str, max: u32) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut in_entry = false;
    for line in ptx.lines() {
        if line.contains(".entry ") {
            in_entry = true;
        }
        if in_entry && line.trim_start().starts_with('{') {
            out.push_str(&format!(".maxntid {max}, 1, 1\n"));
            in_entry = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Functions the PTX declares but does not define: `.extern .func` and `.weak .func`
/// declarations alike (the JIT rejects both).
pub fn unresolved_in_ptx(ptx: &str) -> Vec<String> {
    let mut declared = BTreeSet::new();
    let mut defined = BTreeSet::new();
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(name) = func_name(line) else {
            continue;
        };
        // Walk to the end of the signature: `;` means a declaration, `{` a definition.
        for next in std::iter::once(line).chain(lines.by_ref()) {
            if next.contains('{') {
                defined.insert(name);
                break;
            }
            if next.trim_end().ends_with(';') {
                declared.insert(name);
                break;
            }
        }
    }
    declared.difference(&defined).cloned().collect()
}

/// The function a PTX line starts to declare or define (`.extern`, `.weak`, `.visible`
/// or plain `.func`, with or without a return parameter), by its exact name.
fn func_name(line: &str) -> Option<String> {
    let rest = [".extern ", ".weak ", ".visible "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .unwrap_or(line)
        .strip_prefix(".func")?
        .trim_start();
    let rest = if rest.starts_with('(') {
        &rest[rest.find(')')? + 1..]
    } else {
        rest
    };
    let name: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Which crates' bitcode (the archive members in `members`) references each missing
/// symbol.
pub(crate) fn attribute(tc: &Toolchain, members: &Path, missing: &[String]) -> Vec<Unresolved> {
    let mut list: Vec<Unresolved> = missing
        .iter()
        .map(|s| Unresolved {
            symbol: s.clone(),
            needed_by: Vec::new(),
        })
        .collect();
    let Ok(entries) = std::fs::read_dir(members) else {
        return list;
    };
    for member in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let Ok(out) = run(Command::new(tc.llvm("llvm-nm"))
            .args(["-u", "--no-sort"])
            .arg(&member))
        else {
            continue;
        };
        let undefined = String::from_utf8_lossy(&out.stdout);
        let file = member
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let krate = file.split('-').next().unwrap_or(&file).to_owned();
        for u in &mut list {
            if undefined
                .lines()
                .any(|l| l.split_whitespace().last() == Some(u.symbol.as_str()))
                && !u.needed_by.contains(&krate)
            {
                u.needed_by.push(krate.clone());
            }
        }
    }
    for u in &mut list {
        u.needed_by.sort();
    }
    list
}

/// What [`rewrite_binary`] changed.
pub(crate) struct BinaryRewrite {
    /// What lowering unwinding changed.
    pub unwound: crate::unwind::Lowered,
    /// Functions whose locals moved to global-memory frames.
    pub framed: usize,
    /// Atomic operations and fences given GPU scope.
    pub scoped: usize,
}

/// Rewrites a binary's `optimized` module into `rewritten`: unwinding becomes returns
/// ([`crate::unwind`]), its in-memory locals move to global-memory frames
/// ([`crate::frames`]), and its synchronizing atomics get GPU scope
/// ([`crate::scope`]).
pub(crate) fn rewrite_binary(
    tc: &Toolchain,
    optimized: &Path,
    rewritten: &Path,
) -> Result<BinaryRewrite> {
    let out = run(Command::new(tc.llvm("llvm-dis"))
        .arg(optimized)
        .args(["-o", "-"]))?;
    let ir = String::from_utf8(out.stdout)
        .map_err(|_| BuildError::Toolchain("llvm-dis wrote IR that is not UTF-8".into()))?;
    let (ir, unwound) = crate::unwind::lower(&ir)?;
    let exclude = [FRAME_PUSH, FRAME_POP, START_KERNEL, THREAD_EXIT_KERNEL];
    let (ir, framed) = crate::frames::move_to_global(&ir, &exclude)?;
    let (ir, scoped) = crate::scope::gpu_scope(&ir);
    let text = rewritten.with_extension("ll");
    std::fs::write(&text, ir).map_err(BuildError::io(format!("writing {}", text.display())))?;
    run(Command::new(tc.llvm("llvm-as"))
        .arg(&text)
        .arg("-o")
        .arg(rewritten))?;
    Ok(BinaryRewrite {
        unwound,
        framed,
        scoped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modules_own_malloc_is_renamed_so_no_part_takes_cudas() {
        let ptx = ".func  (.param .b64 func_retval0) malloc(\n\
                   \t.param .b64 malloc_param_0\n\
                   )\n\
                   {\n\
                   \tcall.uni (retval0), malloc, (param0);\n\
                   \tmov.u64 %rd1, free;\n\
                   \tcall.uni my_malloc2, (param0);\n\
                   }\n";
        let renamed = own_system_call_names(ptx);
        assert_eq!(
            renamed,
            ".func  (.param .b64 func_retval0) __hostcall_own_malloc(\n\
             \t.param .b64 malloc_param_0\n\
             )\n\
             {\n\
             \tcall.uni (retval0), __hostcall_own_malloc, (param0);\n\
             \tmov.u64 %rd1, __hostcall_own_free;\n\
             \tcall.uni my_malloc2, (param0);\n\
             }\n"
        );
        assert_eq!(own_system_call_names("no such names\n"), "no such names\n");
    }

    #[test]
    fn slot_definitions_are_read_from_ir() {
        let ir = "@__HOSTCALL__Kv__get = internal global <{ [61 x i8] }> zeroinitializer, align 8\n\
                  @other = global i32 0\n\
                  %x = load i32, ptr @__HOSTCALL__Kv__get, align 8\n";
        assert_eq!(
            slot_definitions(ir, "__HOSTCALL__"),
            ["__HOSTCALL__Kv__get"]
        );
    }

    #[test]
    fn every_entry_gets_its_thread_bound_and_nothing_else_changes() {
        let ptx = "\
.func helper()
{
\tret;
}
.visible .entry kmain(
\t.param .u32 kmain_param_0
)                                       // @kmain
{
\tret;
}
.visible .entry other()
{
\tret;
}
";
        let bounded = bound_threads_per_block(ptx, 1024);
        assert_eq!(
            bounded.matches(".maxntid 1024, 1, 1\n{").count(),
            2,
            "{bounded}"
        );
        assert_eq!(bounded.replace(".maxntid 1024, 1, 1\n", ""), ptx);
    }

    #[test]
    fn small_globals_are_word_aligned_and_padded_with_zeros() {
        let ptx = "\
.global .align 1 .b8 SHOULD_CAPTURE[1];
.global .align 1 .u8 SAVED_$_0 = 1;
.global .align 1 .u8 PLAIN;
.global .align 1 .b8 text[5] = {104, 101, 108, 108, 111};
.global .align 2 .b16 pair[3] = {1, 2, 3};
.visible .global .align 1 .b8 words[8];
.global .align 4 .b8 __hostcall_abi_version[4] = {4, 0, 0, 0};
.global .align 8 .u64 table[2] = {0, generic(x)};
\tld.relaxed.sys.global.b8 %rs1, [SHOULD_CAPTURE];
";
        assert_eq!(
            word_pad_globals(ptx),
            "\
.global .align 4 .b8 SHOULD_CAPTURE[4];
.global .align 4 .u8 SAVED_$_0[4] = {1, 0, 0, 0};
.global .align 4 .u8 PLAIN[4];
.global .align 4 .b8 text[8] = {104, 101, 108, 108, 111, 0, 0, 0};
.global .align 4 .b16 pair[4] = {1, 2, 3, 0};
.visible .global .align 4 .b8 words[8];
.global .align 4 .b8 __hostcall_abi_version[4] = {4, 0, 0, 0};
.global .align 8 .u64 table[2] = {0, generic(x)};
\tld.relaxed.sys.global.b8 %rs1, [SHOULD_CAPTURE];
"
        );
    }

    /// LLVM writes a constant whose bytes are all zero or undefined (std's
    /// `<{ [1 x i8] zeroinitializer, [1 x i8] undef }>`, from a `None::<u8>`) as `{}`;
    /// padded, its list must not begin with an empty value, which ptxas cannot parse.
    #[test]
    fn an_empty_initializer_pads_to_zeros() {
        assert_eq!(
            word_pad_globals(".global .align 1 .b8 anon_0[2] = {};\n"),
            ".global .align 4 .b8 anon_0[4] = {0, 0, 0, 0};\n"
        );
    }

    #[test]
    fn extern_and_weak_declarations_are_unresolved_definitions_are_not() {
        let ptx = "\
.extern .func  (.param .b32 func_retval0) pause
(
\t.param .b32 x
)
;
.extern .func free
(
\t.param .b64 p
)
;
.weak .func  (.param .b32 func_retval0) gettid
()
;
.weak .func  (.param .b32 func_retval0) defined_weak()
{
\tret;
}
.visible .entry kmain()
{
}
";
        assert_eq!(unresolved_in_ptx(ptx), ["free", "gettid", "pause"]);
    }

    #[test]
    fn a_definition_whose_name_contains_a_missing_one_does_not_hide_it() {
        // std's own `sys::fs::rename` is defined; libc's `rename` is not.
        let ptx = "\
.extern .func  (.param .b32 func_retval0) rename
(
\t.param .b64 a
)
;
.func  (.param .b64 func_retval0) _RNvNtNtCs9_3std3sys2fs6rename(
\t.param .b64 p
)
{
\tret;
}
";
        assert_eq!(unresolved_in_ptx(ptx), ["rename"]);
    }
}
