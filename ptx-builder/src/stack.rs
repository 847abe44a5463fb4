//! The stack a module's threads need, known before launch: the deepest call path of
//! each kernel, summing the frame ptxas reports for every function on it
//! (`ptxas --verbose`: `N bytes stack frame`).
//!
//! The call graph is read from the PTX. A direct `call` names its callee. An indirect
//! one (a `dyn` method, a `fn` pointer, std's formatting machinery) names only its
//! `.callprototype`, so it may reach every function whose address the module takes
//! (named anywhere but as a call's target) and whose parameters match that prototype.
//!
//! A cycle (recursion, or formatting that formats again) has no static bound: the walk
//! takes the deepest path on which no function repeats, and a path that can reach a
//! cycle gets [`RECURSION_STACK_BYTES`] more for the repeats. ptxas itself only warns
//! there (`Stack size for entry function ... cannot be statically determined`), and CUDA
//! then keeps whatever stack the context has: a registry-crate kernel died at the
//! runtime's 16 KiB with a bare launch failure.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::link::is_ident;
use crate::{BuildError, Result};

/// What a path that can recurse gets beyond its cycles counted once. rayon recurses
/// deepest: each split of a parallel iterator is a level of `join` (536 bytes of frame
/// for the bridge's `helper` alone), and a worker waiting in a `join` runs a stolen job
/// on top of its stack, so the depth follows the scheduling, not the input. Measured on
/// an H100 with an unmodified program (`par_sort_unstable` of 10^7 `u64`s, then a
/// SHA-256 `par_iter` map over 10^6 blocks ten times; 11.4 KiB of frames counted once):
/// with 16 KiB more it faulted in 6 processes of 6, with 28, 36 and 52 KiB more it
/// passed 3 of 3 each. 48 KiB is that need with room to spare, given to all recursion
/// alike (formatting that formats again needs far less); the driver sets it aside for
/// every thread the GPU can hold (8.25 GiB more on an H100 than 16 KiB did: 2,048
/// threads x 132 SMs).
pub const RECURSION_STACK_BYTES: u64 = 48 << 10;

/// The stack one kernel needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryStack {
    /// The kernel (`.entry`).
    pub entry: String,
    /// The frames of its deepest path on which no function repeats.
    pub path_bytes: u64,
    /// Whether a cycle is reachable from it (then [`RECURSION_STACK_BYTES`] is added).
    pub recursive: bool,
    /// The functions on the deepest path, each with its frame, the kernel first.
    pub path: Vec<(String, u64)>,
}

impl EntryStack {
    /// The stack to give each thread that runs this kernel.
    pub fn bytes(&self) -> u64 {
        self.path_bytes
            + if self.recursive {
                RECURSION_STACK_BYTES
            } else {
                0
            }
    }

    /// One line for a build's progress: the stack and where it comes from.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "stack: {} bytes per GPU thread: {}'s deepest path is {} calls and {} bytes of frames",
            self.bytes(),
            self.entry,
            self.path.len(),
            self.path_bytes,
        );
        if let Some((name, bytes)) = self.path.iter().max_by_key(|(_, b)| *b) {
            line += &format!(" (largest: {name}, {bytes})");
        }
        if self.recursive {
            line += &format!(", and it can recurse: {RECURSION_STACK_BYTES} more");
        }
        line
    }
}

/// The stack every thread of a module needs (its deepest kernel's, see [`EntryStack`]),
/// from its PTX and the frames ptxas reported for each of its cubins (`frames_files`,
/// one per SM: a function's largest frame counts). None without frames: a module whose
/// PTX the driver compiles at load is not known here.
pub fn module_stack(ptx: &str, frames_files: &[PathBuf]) -> Result<Option<EntryStack>> {
    let mut all: HashMap<String, u64> = HashMap::new();
    for path in frames_files {
        let text = std::fs::read_to_string(path)
            .map_err(BuildError::io(format!("reading {}", path.display())))?;
        for (name, bytes) in frames(&text) {
            let frame = all.entry(name).or_default();
            *frame = (*frame).max(bytes);
        }
    }
    if frames_files.is_empty() {
        return Ok(None);
    }
    Ok(entries(ptx, &all).into_iter().max_by_key(EntryStack::bytes))
}

/// Each function's frame, read from ptxas's `--verbose` report.
pub(crate) fn frames(report: &str) -> HashMap<String, u64> {
    let mut frames = HashMap::new();
    let mut lines = report.lines();
    while let Some(line) = lines.next() {
        let Some((_, name)) = line.split_once("Function properties for ") else {
            continue;
        };
        let bytes = lines
            .next()
            .and_then(|l| l.trim().split_once(" bytes stack frame"))
            .and_then(|(n, _)| n.parse().ok());
        if let Some(bytes) = bytes {
            frames.insert(name.trim().to_owned(), bytes);
        }
    }
    frames
}

/// `frames` as a file in the lines ptxas reports them in (so [`frames`] reads it back),
/// by name: deterministic, unlike the report, which times each function.
pub(crate) fn frames_file(frames: &HashMap<String, u64>) -> String {
    let mut names: Vec<&String> = frames.keys().collect();
    names.sort_unstable();
    names
        .into_iter()
        .map(|n| {
            format!(
                "Function properties for {n}\n    {} bytes stack frame\n",
                frames[n]
            )
        })
        .collect()
}

/// A function's parameters and results, as types without names: what an indirect
/// call's prototype must match.
type Signature = (Vec<String>, Vec<String>);

/// One function defined in the PTX.
#[derive(Default)]
struct Function {
    entry: bool,
    signature: Signature,
    /// Callees named by direct calls.
    calls: HashSet<String>,
    /// Prototypes of its indirect calls.
    indirect: HashSet<String>,
}

/// The call graph of a module's PTX.
struct Graph {
    functions: HashMap<String, Function>,
    /// Functions whose address is taken: what an indirect call may reach.
    taken: HashSet<String>,
    /// Every `.callprototype` by label.
    prototypes: HashMap<String, Signature>,
}

/// A parameter list's types without their names (`.param .b64 x` → `.param .b64`,
/// `.param .align 8 .b8 x[16]` → `.param .align 8 .b8 [16]`).
fn types(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (ty, name) = p.rsplit_once(char::is_whitespace).unwrap_or(("", p));
            let array = name.find('[').map_or("", |at| &name[at..]);
            format!(
                "{} {array}",
                ty.split_whitespace().collect::<Vec<_>>().join(" ")
            )
        })
        .collect()
}

/// The text between the `(` at the start of `s` (after spaces) and its `)`, and what
/// follows; None if `s` does not start with `(`.
fn parenthesized(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start().strip_prefix('(')?;
    let close = s.find(')')?;
    Some((&s[..close], &s[close + 1..]))
}

/// A function header (`.visible .func (.param .b32 r) name(.param .b64 p)`, joined onto
/// one line): whether it is a kernel, its name and its signature.
fn header(text: &str) -> Option<(bool, String, Signature)> {
    let mut words = text.split_whitespace();
    let kind = words.find(|w| *w == ".func" || *w == ".entry")?;
    let after = &text[text.find(kind)? + kind.len()..];
    let (results, rest) = parenthesized(after).unwrap_or(("", after));
    let rest = rest.trim_start();
    let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
    let name = &rest[..end];
    let params = parenthesized(&rest[end..]).map_or("", |(p, _)| p);
    (!name.is_empty()).then(|| {
        (
            kind == ".entry",
            name.to_owned(),
            (types(params), types(results)),
        )
    })
}

/// The identifiers of a line of PTX.
fn idents(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty())
}

/// A `call` instruction's target: `Ok(name)` for a direct call, `Err(prototype)` for an
/// indirect one; None for any other line.
fn call_target(line: &str) -> Option<Result<&str, &str>> {
    let mut s = line.trim_start();
    if s.starts_with('@') {
        s = s.split_once(char::is_whitespace)?.1.trim_start();
    }
    let s = s
        .strip_prefix("call.uni")
        .or_else(|| s.strip_prefix("call"))?;
    if !s.starts_with(char::is_whitespace) {
        return None;
    }
    let s = parenthesized(s).map_or(s, |(_, rest)| rest.trim_start().trim_start_matches(','));
    let s = s.trim_start();
    if s.starts_with('%') {
        let at = s.rfind("prototype")?;
        let label = &s[at..];
        let end = label.find(|c: char| !is_ident(c)).unwrap_or(label.len());
        return Some(Err(&label[..end]));
    }
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    Some(Ok(&s[..end]))
}

impl Graph {
    fn parse(ptx: &str) -> Graph {
        let lines: Vec<&str> = ptx.lines().collect();
        let mut g = Graph {
            functions: HashMap::new(),
            taken: HashSet::new(),
            prototypes: HashMap::new(),
        };
        // Identifiers outside call targets, to be matched against function names once
        // all are known.
        let mut named: HashSet<&str> = HashSet::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let starts_function = !line.starts_with(char::is_whitespace)
                && line
                    .split_whitespace()
                    .any(|w| w == ".func" || w == ".entry");
            if !starts_function {
                named.extend(idents(line));
                i += 1;
                continue;
            }
            // The header runs to the `{` of a definition or the `;` of a declaration.
            let mut j = i;
            while j < lines.len() && lines[j].trim() != "{" && !lines[j].trim_end().ends_with(';') {
                j += 1;
            }
            let text = lines[i..j.min(lines.len())].join(" ");
            if j >= lines.len() || lines[j].trim() != "{" {
                i = j + 1;
                continue;
            }
            let mut depth = 0i64;
            let mut k = j;
            loop {
                depth +=
                    lines[k].matches('{').count() as i64 - lines[k].matches('}').count() as i64;
                k += 1;
                if depth <= 0 || k >= lines.len() {
                    break;
                }
            }
            if let Some((entry, name, signature)) = header(&text) {
                let mut f = Function {
                    entry,
                    signature,
                    ..Function::default()
                };
                for body in &lines[j + 1..k] {
                    if let Some((label, proto)) = body.split_once(": .callprototype") {
                        let proto = proto.trim_start();
                        let (results, rest) = parenthesized(proto).unwrap_or(("", proto));
                        let rest = rest.trim_start().trim_start_matches('_');
                        let params = parenthesized(rest).map_or("", |(p, _)| p);
                        g.prototypes
                            .insert(label.trim().to_owned(), (types(params), types(results)));
                        continue;
                    }
                    match call_target(body) {
                        Some(Ok(callee)) => {
                            f.calls.insert(callee.to_owned());
                        }
                        Some(Err(proto)) => {
                            f.indirect.insert(proto.to_owned());
                        }
                        None => named.extend(idents(body)),
                    }
                }
                g.functions.insert(name, f);
            }
            i = k;
        }
        g.taken = named
            .into_iter()
            .filter(|n| g.functions.contains_key(*n))
            .map(str::to_owned)
            .collect();
        g
    }

    /// Each function's callees, indirect calls resolved to the address-taken functions
    /// of the prototype's signature.
    fn edges(&self) -> HashMap<&str, Vec<&str>> {
        let mut by_signature: HashMap<&Signature, Vec<&str>> = HashMap::new();
        for name in &self.taken {
            by_signature
                .entry(&self.functions[name].signature)
                .or_default()
                .push(name);
        }
        self.functions
            .iter()
            .map(|(name, f)| {
                let mut to: Vec<&str> = f
                    .calls
                    .iter()
                    .filter(|c| self.functions.contains_key(*c))
                    .map(String::as_str)
                    .collect();
                for proto in &f.indirect {
                    if let Some(targets) =
                        self.prototypes.get(proto).and_then(|s| by_signature.get(s))
                    {
                        to.extend(targets);
                    }
                }
                to.sort_unstable();
                to.dedup();
                (name.as_str(), to)
            })
            .collect()
    }
}

/// What the walk of [`entries`] knows of a function.
#[derive(Clone, Copy)]
enum Seen<'a> {
    /// On the path being walked: a call to it closes a cycle.
    OnPath,
    /// Walked: the frames of its deepest path, the next function on that path, and
    /// whether a cycle is reachable from it.
    Done(u64, Option<&'a str>, bool),
}

/// Walks the calls from `entry` depth first, once per function (results are kept in
/// `seen` across kernels), taking the deepest path on which no function repeats.
fn walk<'a>(
    entry: &'a str,
    edges: &HashMap<&'a str, Vec<&'a str>>,
    frame: &dyn Fn(&str) -> u64,
    seen: &mut HashMap<&'a str, Seen<'a>>,
) {
    // Per function on the path: the next callee to look at, and the deepest callee so
    // far (its frames and name) and whether a cycle is reachable.
    struct Open<'a> {
        function: &'a str,
        next: usize,
        below: u64,
        deepest: Option<&'a str>,
        recursive: bool,
    }
    let open = |function| Open {
        function,
        next: 0,
        below: 0,
        deepest: None,
        recursive: false,
    };
    if seen.contains_key(entry) {
        return;
    }
    seen.insert(entry, Seen::OnPath);
    let mut path = vec![open(entry)];
    while let Some(mut top) = path.pop() {
        if let Some(&callee) = edges[top.function].get(top.next) {
            top.next += 1;
            match seen.get(callee).copied() {
                Some(Seen::OnPath) => top.recursive = true,
                Some(Seen::Done(depth, _, recursive)) => {
                    top.recursive |= recursive;
                    if depth > top.below || top.deepest.is_none() {
                        (top.below, top.deepest) = (depth, Some(callee));
                    }
                }
                None => {
                    seen.insert(callee, Seen::OnPath);
                    path.push(top);
                    path.push(open(callee));
                    continue;
                }
            }
            path.push(top);
            continue;
        }
        let depth = frame(top.function) + top.below;
        seen.insert(top.function, Seen::Done(depth, top.deepest, top.recursive));
        if let Some(caller) = path.last_mut() {
            caller.recursive |= top.recursive;
            if depth > caller.below || caller.deepest.is_none() {
                (caller.below, caller.deepest) = (depth, Some(top.function));
            }
        }
    }
}

/// The stack each kernel of `ptx` needs, given ptxas's `frames`; kernels in name order.
pub(crate) fn entries(ptx: &str, frames: &HashMap<String, u64>) -> Vec<EntryStack> {
    let graph = Graph::parse(ptx);
    let edges = graph.edges();
    let frame = |f: &str| frames.get(f).copied().unwrap_or(0);
    let mut kernels: Vec<&str> = graph
        .functions
        .iter()
        .filter(|(_, f)| f.entry)
        .map(|(name, _)| name.as_str())
        .collect();
    kernels.sort_unstable();
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for entry in kernels {
        walk(entry, &edges, &frame, &mut seen);
        if let Some(&Seen::Done(path_bytes, _, recursive)) = seen.get(entry) {
            let mut path = Vec::new();
            let mut at = Some(entry);
            while let Some(f) = at {
                path.push((f.to_owned(), frame(f)));
                at = match seen.get(f) {
                    Some(&Seen::Done(_, next, _)) => next,
                    _ => None,
                };
            }
            out.push(EntryStack {
                entry: entry.to_owned(),
                path_bytes,
                recursive,
                path,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module in the shape llc emits: a kernel calling `a` directly and, through a
    /// pointer, any `(.b64) -> .b32` function whose address is taken.
    const PTX: &str = r#"
.version 8.0
.target sm_90
.address_size 64

.func  (.param .b32 func_retval0) leaf
(
	.param .b64 leaf_param_0
)
;
.global .align 8 .u64 table[1] = {generic(leaf)};

.visible .entry kmain()
.maxntid 1024, 1, 1
{
	.reg .b64 	%rd<4>;
	{ // callseq 0, 0
	.param .b64 param0;
	call.uni a, (param0);
	} // callseq 0
	{ // callseq 1, 0
	.param .b64 param0;
	.param .b32 retval0;
	prototype_1 : .callprototype (.param .b32 _) _ (.param .b64 _);
	call (retval0), %rd1, (param0), prototype_1;
	} // callseq 1
	ret;
}
.func a(
	.param .b64 a_param_0
)
{
	ret;
}
.func  (.param .b32 func_retval0) leaf(
	.param .b64 leaf_param_0
)
{
	ret;
}
.func  (.param .b32 func_retval0) unreached(
	.param .b64 unreached_param_0
)
{
	ret;
}
"#;

    fn frames_of(pairs: &[(&str, u64)]) -> HashMap<String, u64> {
        pairs.iter().map(|(n, b)| (n.to_string(), *b)).collect()
    }

    #[test]
    fn ptxas_reports_are_read_per_function() {
        let report = "ptxas info    : Compiling entry function 'kmain' for 'sm_90'\n\
                      ptxas info    : Function properties for kmain\n    \
                      32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
                      ptxas info    : Function properties for a\n    \
                      1256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n";
        let read = frames(report);
        assert_eq!(read, frames_of(&[("kmain", 32), ("a", 1256)]));
        assert_eq!(frames(&frames_file(&read)), read);
    }

    #[test]
    fn an_indirect_call_reaches_address_taken_functions_of_its_signature_only() {
        let f = frames_of(&[
            ("kmain", 16),
            ("a", 100),
            ("leaf", 300),
            ("unreached", 5000),
        ]);
        let e = entries(PTX, &f);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].entry, "kmain");
        assert_eq!((e[0].path_bytes, e[0].recursive), (316, false));
        assert_eq!(
            e[0].path,
            [("kmain".to_owned(), 16), ("leaf".to_owned(), 300)]
        );
        assert_eq!(e[0].bytes(), 316);
    }

    #[test]
    fn a_cycle_counts_each_member_once_and_adds_the_recursion_allowance() {
        // `a` and `b` call each other: a cycle below the kernel.
        let ptx = "
.visible .entry kmain()
{
\tcall.uni a, ();
\tret;
}
.func a()
{
\t@%p1 call.uni b, ();
\tret;
}
.func b()
{
\tcall.uni a, ();
\tret;
}
";
        let f = frames_of(&[("kmain", 16), ("a", 100), ("b", 300)]);
        let e = &entries(ptx, &f)[0];
        assert!(e.recursive);
        assert_eq!(e.path_bytes, 416);
        assert_eq!(e.bytes(), 416 + RECURSION_STACK_BYTES);
        let names: Vec<&str> = e.path.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["kmain", "a", "b"]);
    }

    #[test]
    fn headers_and_calls_are_read_as_llc_writes_them() {
        assert_eq!(
            header(
                ".visible .func  (.param .b64 func_retval0) f(.param .b64 f_param_0, .param .align 8 .b8 f_param_1[16])"
            ),
            Some((
                false,
                "f".to_owned(),
                (
                    vec![
                        ".param .b64 ".to_owned(),
                        ".param .align 8 .b8 [16]".to_owned()
                    ],
                    vec![".param .b64 ".to_owned()]
                )
            ))
        );
        assert_eq!(call_target("\tcall.uni g, (param0);"), Some(Ok("g")));
        assert_eq!(call_target("\t@%p3 call (retval0), g, ();"), Some(Ok("g")));
        assert_eq!(
            call_target("\tcall (retval0), %rd64, (param0, param1), prototype_40;"),
            Some(Err("prototype_40"))
        );
        assert_eq!(call_target("\tcallx;"), None);
        assert_eq!(call_target("\tmov.u64 %rd1, g;"), None);
    }
}
