//! A module's PTX cut into parts that ptxas compiles separately, each in a process of its
//! own, and nvJitLink links back into one cubin.
//!
//! ptxas holds what it compiled until it exits: on the registry program's 638k lines,
//! compiling separately (`-c`) in one process, it grew steadily to 18 GB in 123 s, though
//! `examples/rayon-json`'s 153k lines took 0.67 GB. In parts of at most [`PART_LINES`]
//! lines each process stays small, and the parts compile on every core at once.
//!
//! Each part holds the module's header, a declaration of every function (`.visible` for
//! those it defines, `.extern` for the others), its share of the function definitions
//! (made `.visible`, so that the other parts' calls resolve at the link), and the
//! module's variables: defined (made `.visible`) in the first part, declared `.extern`
//! in the others. Kernels keep their own linkage. A function the module names as one of
//! PTX's system calls (libc-hostcall's `malloc`) must be renamed before
//! (`link::own_system_call_names`): a part that only declares `malloc` gets CUDA's.

/// The most lines of function bodies one part holds.
pub(crate) const PART_LINES: usize = 60_000;

/// A top-level item of llc's PTX.
enum Item<'a> {
    /// A function or kernel definition: its header lines (to the `{`, comments dropped)
    /// and its whole text.
    Definition { header: String, text: &'a [&'a str] },
    /// A variable (`.global ...;`), on its lines.
    Variable(&'a [&'a str]),
    /// llc's forward declaration of a function (each part writes its own).
    Declaration,
    /// Anything else at the top: the header, comments.
    Other(&'a [&'a str]),
}

/// A line without its `//` comment.
fn code(line: &str) -> &str {
    line.split_once("//").map_or(line, |(c, _)| c).trim_end()
}

/// Whether a top-level line starts a function or kernel.
fn starts_function(line: &str) -> bool {
    !line.starts_with(char::is_whitespace)
        && code(line)
            .split_whitespace()
            .any(|w| w == ".func" || w == ".entry")
}

/// The module's top-level items, in order.
fn items<'a>(lines: &'a [&'a str]) -> Vec<Item<'a>> {
    let mut items = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if starts_function(line) {
            // The header runs to the `{` of a definition or the `;` of a declaration.
            let mut j = i;
            while j < lines.len() && code(lines[j]).trim() != "{" && !code(lines[j]).ends_with(';')
            {
                j += 1;
            }
            if j >= lines.len() || code(lines[j]).trim() != "{" {
                items.push(Item::Declaration);
                i = j + 1;
                continue;
            }
            let mut depth = 0i64;
            let mut k = j;
            loop {
                let c = code(lines[k]);
                depth += c.matches('{').count() as i64 - c.matches('}').count() as i64;
                k += 1;
                if depth <= 0 || k >= lines.len() {
                    break;
                }
            }
            let header = lines[i..j]
                .iter()
                .map(|l| code(l))
                .collect::<Vec<_>>()
                .join("\n");
            items.push(Item::Definition {
                header,
                text: &lines[i..k],
            });
            i = k;
        } else if code(line).starts_with(".global") || code(line).starts_with(".visible .global") {
            let mut j = i;
            while j + 1 < lines.len() && !code(lines[j]).ends_with(';') {
                j += 1;
            }
            items.push(Item::Variable(&lines[i..=j]));
            i = j + 1;
        } else {
            items.push(Item::Other(&lines[i..=i]));
            i += 1;
        }
    }
    items
}

/// `text` (a header or a variable) with its leading linkage (`.visible`, `.extern`) set
/// to `linkage` (with its trailing space, or empty for none).
fn with_linkage(text: &str, linkage: &str) -> String {
    let bare = text
        .trim_start()
        .trim_start_matches(".visible ")
        .trim_start_matches(".extern ")
        .trim_start();
    format!("{linkage}{bare}")
}

/// A variable's `.extern` declaration: its definition without the initializer.
fn declaration(variable: &str) -> String {
    let head = variable
        .split_once(" = ")
        .map_or(variable.trim_end().trim_end_matches(';'), |(h, _)| h);
    format!("{};", with_linkage(head.trim_end(), ".extern "))
}

/// `ptx` in parts of at most about `part_lines` lines of definitions, each a module
/// ptxas compiles with `-c`; one part when it is that small.
pub(crate) fn split(ptx: &str, part_lines: usize) -> Vec<String> {
    let lines: Vec<&str> = ptx.lines().collect();
    let items = items(&lines);
    let total: usize = items
        .iter()
        .map(|i| match i {
            Item::Definition { text, .. } => text.len(),
            _ => 0,
        })
        .sum();
    let parts = total.div_ceil(part_lines.max(1)).max(1);
    let share = total.div_ceil(parts);
    // The part of each definition, in order, each part filled to its share.
    let mut owner = Vec::new();
    let (mut part, mut filled) = (0, 0);
    for item in &items {
        if let Item::Definition { text, .. } = item {
            if filled >= share && part + 1 < parts {
                part += 1;
                filled = 0;
            }
            owner.push(part);
            filled += text.len();
        }
    }
    let used = owner.last().map_or(1, |last| last + 1);
    (0..used)
        .map(|p| {
            let mut out = String::with_capacity(ptx.len() / used + 4096);
            let mut header_done = false;
            // Declarations of every function, then the variables, then the definitions.
            let mut declarations = String::new();
            let mut variables = String::new();
            let mut definitions = String::new();
            let mut d = 0;
            for item in &items {
                match item {
                    Item::Other(text) if !header_done => {
                        for l in *text {
                            out.push_str(l);
                            out.push('\n');
                        }
                    }
                    Item::Other(_) | Item::Declaration => {}
                    Item::Variable(text) => {
                        header_done = true;
                        let v = text.join("\n");
                        if p == 0 {
                            variables.push_str(&with_linkage(&v, ".visible "));
                        } else {
                            variables.push_str(&declaration(&v));
                        }
                        variables.push('\n');
                    }
                    Item::Definition { header, text } => {
                        header_done = true;
                        let mine = owner[d] == p;
                        d += 1;
                        let kernel = header.split_whitespace().any(|w| w == ".entry");
                        if kernel {
                            if mine {
                                definitions.push_str(&text.join("\n"));
                                definitions.push('\n');
                            }
                            continue;
                        }
                        let linkage = if mine { ".visible " } else { ".extern " };
                        declarations.push_str(&with_linkage(header, linkage));
                        declarations.push_str(";\n");
                        if mine {
                            definitions.push_str(&with_linkage(&text[0..1].join(""), ".visible "));
                            definitions.push('\n');
                            definitions.push_str(&text[1..].join("\n"));
                            definitions.push('\n');
                        }
                    }
                }
            }
            out.push_str(&declarations);
            out.push_str(&variables);
            out.push_str(&definitions);
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "\
//
// Generated by LLVM NVPTX Back-End
//

.version 8.0
.target sm_90
.address_size 64

.func  (.param .b32 func_retval0) callee
(
\t.param .b64 callee_param_0
)
;
.global .align 8 .u64 table[2] = {generic(name), 3};
.global .align 1 .b8 name[3] = {104, 105, 0};
.visible .global .align 8 .b8 config[16];
                                        // .globl\tcallee
.func  (.param .b32 func_retval0) callee(
\t.param .b64 callee_param_0
)                                       // -- Begin function callee
{
\tret;
}
.func stop()
.noreturn                               // -- Begin function stop
{
prototype_1 : .callprototype ()_ ();
\ttrap;
}
.visible .entry kmain()
.maxntid 1024, 1, 1
{
\tcall.uni (retval0), callee, (param0);
}
";

    #[test]
    fn a_small_module_is_one_part_with_its_functions_made_visible() {
        let parts = split(MODULE, 1000);
        assert_eq!(parts.len(), 1);
        let p = &parts[0];
        assert!(p.starts_with("//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n"));
        assert!(p.contains(
            ".visible .func  (.param .b32 func_retval0) callee(\n\t.param .b64 callee_param_0\n);\n"
        ));
        assert!(p.contains(".visible .func stop()\n.noreturn;\n"));
        assert!(p.contains(".visible .global .align 8 .u64 table[2] = {generic(name), 3};\n"));
        assert!(p.contains(".visible .global .align 8 .b8 config[16];\n"));
        assert!(p.contains(".visible .entry kmain()\n.maxntid 1024, 1, 1\n{\n"));
        assert!(p.contains("prototype_1 : .callprototype ()_ ();\n\ttrap;\n}\n"));
        // llc's forward declaration is replaced by the part's own.
        assert_eq!(p.matches("callee_param_0\n)\n;").count(), 0);
    }

    #[test]
    fn each_part_defines_its_share_and_declares_the_rest() {
        // 17 lines of definitions (6, 6 and 5), in parts of about 4: one each.
        let parts = split(MODULE, 4);
        assert_eq!(parts.len(), 3);
        assert!(parts[0].contains(".visible .func  (.param .b32 func_retval0) callee(\n"));
        assert!(parts[1].contains(".visible .func stop()\n.noreturn  "));
        assert!(parts[2].contains(".visible .entry kmain()"));
        for (i, p) in parts.iter().enumerate() {
            let variables_defined = p.contains("table[2] = {");
            assert_eq!(variables_defined, i == 0, "part {i}");
            if i > 0 {
                assert!(
                    p.contains(".extern .global .align 8 .u64 table[2];\n"),
                    "{p}"
                );
                assert!(
                    p.contains(".extern .global .align 8 .b8 config[16];\n"),
                    "{p}"
                );
            }
        }
        let defined = |needle: &str| parts.iter().filter(|p| p.contains(needle)).count();
        assert_eq!(defined("\tret;"), 1);
        assert_eq!(defined("\ttrap;"), 1);
        assert_eq!(defined(".entry kmain()"), 1);
        assert_eq!(defined(".extern .func stop()\n.noreturn;"), 2);
    }
}
