//! Reading the textual IR `llvm-dis` writes, line by line, as the rewrites of a binary's
//! optimized module need it (`crate::unwind`, `crate::frames`): function names, calls
//! and their callees, attribute groups, return types and block labels; and Rust symbols
//! as the paths a message names.

use std::collections::HashMap;

/// The attributes of a function or call that decide how it leaves (`crate::unwind`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Attrs {
    /// It never unwinds.
    pub nounwind: bool,
    /// It never returns normally.
    pub noreturn: bool,
}

/// `attributes #N = { ... }` lines: each group's number and what it says.
pub(crate) fn attribute_groups(ir: &str) -> HashMap<u32, Attrs> {
    ir.lines()
        .filter_map(|l| {
            let (n, rest) = l.strip_prefix("attributes #")?.split_once(" = {")?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            Some((
                n.parse().ok()?,
                Attrs {
                    nounwind: words.contains(&"nounwind"),
                    noreturn: words.contains(&"noreturn"),
                },
            ))
        })
        .collect()
}

/// The attributes of `text` (the part of a line after a parameter or argument list):
/// its `#N` groups and attributes written in place.
fn attrs_of(text: &str, groups: &HashMap<u32, Attrs>) -> Attrs {
    let mut a = Attrs::default();
    for word in text.split([' ', ',']) {
        let found = match word.strip_prefix('#').and_then(|n| n.parse().ok()) {
            Some(n) => groups.get(&n).copied().unwrap_or_default(),
            None => Attrs {
                nounwind: word == "nounwind",
                noreturn: word == "noreturn",
            },
        };
        a.nounwind |= found.nounwind;
        a.noreturn |= found.noreturn;
    }
    a
}

/// Every declared or defined function's attributes, by name.
pub(crate) fn function_attrs<'a>(
    ir: &'a str,
    groups: &HashMap<u32, Attrs>,
) -> HashMap<&'a str, Attrs> {
    ir.lines()
        .filter_map(|l| {
            let name = declared_or_defined(l)?;
            let (_, open) = callee_at(l)?;
            let close = matching_paren(l, open)?;
            Some((name, attrs_of(&l[close + 1..], groups)))
        })
        .collect()
}

/// The function a `define` or `declare` line names.
pub(crate) fn declared_or_defined(line: &str) -> Option<&str> {
    if !line.starts_with("define ") && !line.starts_with("declare ") {
        return None;
    }
    let (at, _) = callee_at(line)?;
    Some(symbol(&line[at..])?.0)
}

/// A global name at the start of `text` (after its sigil): the name without quotes and
/// the bytes it takes, sigil included.
fn symbol(text: &str) -> Option<(&str, usize)> {
    let rest = text.strip_prefix(['@', '%'])?;
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find('"')?;
        return Some((&quoted[..end], end + 3));
    }
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-$._".contains(c)))
        .unwrap_or(rest.len());
    (end > 0).then_some((&rest[..end], end + 1))
}

/// The first `@name(` or `%name(` of `text` outside string literals: where the name
/// starts and where its `(` is. That is the callee of a call or the function of a
/// `define` (return types and attributes come before it and hold no such pair).
fn callee_at(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i += text[i + 1..].find('"')? + 2,
            b'@' | b'%' => {
                let (_, len) = symbol(&text[i..])?;
                if bytes.get(i + len) == Some(&b'(') {
                    return Some((i, i + len));
                }
                i += len;
            }
            _ => i += 1,
        }
    }
    None
}

/// The `)` that closes the `(` at `open`, outside string literals.
fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, open);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += text[i + 1..].find('"')? + 2;
                continue;
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A `define` line's personality clause and the routine it names.
pub(crate) fn personality(line: &str) -> Option<(&str, &str)> {
    let at = line.find(" personality ptr @")?;
    let rest = &line[at + " personality ptr ".len()..];
    let (name, len) = symbol(rest)?;
    Some((&line[at..at + " personality ptr ".len() + len], name))
}

/// One call instruction, read.
pub(crate) struct Call<'a> {
    /// The callee, when called directly.
    pub callee: Option<&'a str>,
    /// The call's own attributes (after its arguments).
    pub attrs: Attrs,
}

/// `text` (an instruction, without its result) read as a call, if it is one: `call`,
/// with `tail`, `musttail` or `notail` before it, or `invoke`.
pub(crate) fn read_call<'a>(
    text: &'a str,
    keyword: &str,
    groups: &HashMap<u32, Attrs>,
) -> Option<Call<'a>> {
    let rest = ["", "tail ", "musttail ", "notail "]
        .iter()
        .find_map(|p| text.strip_prefix(p)?.strip_prefix(keyword))?;
    let asm = rest
        .find(" asm ")
        .or_else(|| rest.starts_with("asm ").then_some(0));
    let (at, open) = match (callee_at(rest), asm) {
        (Some(c), a) if a.is_none_or(|a| c.0 < a) => c,
        // Inline assembly unwinds only when it says so.
        (_, Some(_)) => {
            return Some(Call {
                callee: None,
                attrs: Attrs {
                    nounwind: !rest.contains(" asm unwind "),
                    noreturn: false,
                },
            });
        }
        _ => return None,
    };
    let close = matching_paren(rest, open)?;
    let callee = rest[at..]
        .starts_with('@')
        .then(|| symbol(&rest[at..]).map(|(n, _)| n))
        .flatten();
    Some(Call {
        callee,
        attrs: attrs_of(&rest[close + 1..], groups),
    })
}

/// The return type of a `define` line.
pub(crate) fn return_type(line: &str) -> Option<&str> {
    let (at, _) = callee_at(line)?;
    let head = line[..at].trim_end();
    let start = match head.chars().last()? {
        close @ ('}' | ']' | '>' | '"') => {
            let open = match close {
                '}' => '{',
                ']' => '[',
                '>' => '<',
                _ => '"',
            };
            let mut depth = 0i32;
            let mut start = None;
            for (k, c) in head.char_indices().rev() {
                if c == close && (close != '"' || depth == 0) {
                    depth += 1;
                } else if c == open {
                    depth -= 1;
                }
                if depth == 0 {
                    start = Some(k);
                    break;
                }
            }
            let s = start?;
            // `<{ ... }>`, and a quoted name's sigil.
            if (close == '>' && head[..s].ends_with('<')) || close == '"' {
                s - 1
            } else {
                s
            }
        }
        _ => head.rfind(' ').map_or(0, |k| k + 1),
    };
    Some(&head[start..])
}

/// The label of the entry block when it has none written: the number after the
/// unnamed parameters.
pub(crate) fn entry_label(define: &str) -> String {
    let unnamed = callee_at(define)
        .and_then(|(_, open)| Some(&define[open..=matching_paren(define, open)?]))
        .map_or(0, |params| {
            params
                .split([' ', ')', ','])
                .filter(|w| {
                    w.strip_prefix('%')
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
        });
    unnamed.to_string()
}

/// A block label line's label (`5:` or `bb7:`, with or without its comment).
pub(crate) fn label_of(line: &str) -> Option<&str> {
    if line.starts_with([' ', ';']) || line.is_empty() {
        return None;
    }
    let end = line.find(':')?;
    Some(line[..end].trim_matches('"'))
}

/// The next line after `k` that is an instruction (debug records skipped).
pub(crate) fn next_instruction<'a>(body: &[&'a str], k: usize) -> Option<(usize, &'a str)> {
    (k + 1..body.len())
        .map(|j| (j, body[j]))
        .find(|(_, l)| !l.trim_start().starts_with("#dbg_"))
}

/// A Rust symbol as a path without its hash (`std::io::stdio::_print`); other names as
/// they are.
pub(crate) fn demangle(symbol: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(symbol))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_types_are_read_whole() {
        let t = |l: &str| return_type(l).unwrap().to_owned();
        assert_eq!(
            t("define internal { i64, i64 } @f(i64 %0) {"),
            "{ i64, i64 }"
        );
        assert_eq!(t("define noundef zeroext i1 @f() #3 {"), "i1");
        assert_eq!(t("define <{ i8, [3 x i8] }> @f() {"), "<{ i8, [3 x i8] }>");
        assert_eq!(t("define [2 x i64] @\"a b\"() {"), "[2 x i64]");
        assert_eq!(t("define %\"x y\" @f() {"), "%\"x y\"");
        assert_eq!(t("define range(i64 1, 17) i64 @f() {"), "i64");
    }

    #[test]
    fn rust_symbols_are_named_as_paths() {
        assert_eq!(
            demangle("_ZN3std2io5stdio6_print17h0123456789abcdefE"),
            "std::io::stdio::_print"
        );
        assert_eq!(demangle("kmain"), "kmain");
        assert_eq!(
            demangle(
                "_RNvNtNtNtCs66oLnnzkhFA_17compiler_builtins4math9libm_math14rem_pio2_large14rem_pio2_large"
            ),
            "compiler_builtins::math::libm_math::rem_pio2_large::rem_pio2_large"
        );
    }
}
