//! The fixups of `fixups/` (embedded, so the builder works from any checkout or crate
//! download) and the patched copy of rust-src's `library/` they produce.
//!
//! A fixup is a unified diff preceded by a `Why:` line. Hunks apply by exact context
//! match; a hunk whose context is missing or ambiguous is an error naming the patch,
//! never a silent mis-patch.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::tools::Toolchain;
use crate::{BuildError, Result};

/// The patches, in application order.
pub const PATCHES: &[(&str, &str)] = &[
    (
        "0001-alloc-min-align.patch",
        include_str!("../fixups/0001-alloc-min-align.patch"),
    ),
    (
        "0002-linux-raw-stat.patch",
        include_str!("../fixups/0002-linux-raw-stat.patch"),
    ),
    (
        "0003-personality-data-reg.patch",
        include_str!("../fixups/0003-personality-data-reg.patch"),
    ),
    (
        "0004-gpu-print-without-stdout-lock.patch",
        include_str!("../fixups/0004-gpu-print-without-stdout-lock.patch"),
    ),
    (
        "0005-gpu-args.patch",
        include_str!("../fixups/0005-gpu-args.patch"),
    ),
    (
        "0006-gpu-environ.patch",
        include_str!("../fixups/0006-gpu-environ.patch"),
    ),
    (
        "0007-gpu-thread-name.patch",
        include_str!("../fixups/0007-gpu-thread-name.patch"),
    ),
    (
        "0008-gpu-thread-handle-name.patch",
        include_str!("../fixups/0008-gpu-thread-handle-name.patch"),
    ),
    (
        "0009-gpu-panic-exit-code.patch",
        include_str!("../fixups/0009-gpu-panic-exit-code.patch"),
    ),
    (
        "0010-gpu-thread-panic-lands.patch",
        include_str!("../fixups/0010-gpu-thread-panic-lands.patch"),
    ),
    (
        "0011-gpu-thread-start-arms-landing.patch",
        include_str!("../fixups/0011-gpu-thread-start-arms-landing.patch"),
    ),
    (
        "0012-gpu-libm.patch",
        include_str!("../fixups/0012-gpu-libm.patch"),
    ),
];

/// Extra rustc flags for the crates that need them (libc and unwind), one per line.
pub const LIBC_RUSTFLAGS: &str = include_str!("../fixups/libc.rustflags");

/// The target spec the GPU crates build for.
pub const TARGET_SPEC: &str = include_str!("../target_specs/nvptx64-linux-gnu.json");

/// The flags of [`LIBC_RUSTFLAGS`], comments dropped.
pub fn libc_rustflags() -> Vec<&'static str> {
    LIBC_RUSTFLAGS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// One hunk: the lines it expects and the lines it leaves.
struct Hunk {
    old: String,
    new: String,
}

/// A parsed fixup: the file it patches and its hunks.
struct Patch {
    file: String,
    hunks: Vec<Hunk>,
}

fn parse(name: &str, text: &str) -> Result<Patch> {
    let bad = |why: &str| BuildError::Fixup {
        patch: name.into(),
        file: "?".into(),
        why: why.into(),
    };
    let file = text
        .lines()
        .find_map(|l| l.strip_prefix("+++ b/"))
        .ok_or_else(|| bad("no `+++ b/<file>` line"))?
        .trim()
        .to_owned();
    let mut hunks = Vec::new();
    let mut cur: Option<Hunk> = None;
    for line in text.lines().skip_while(|l| !l.starts_with("@@")) {
        if line.starts_with("@@") {
            hunks.extend(cur.take());
            cur = Some(Hunk {
                old: String::new(),
                new: String::new(),
            });
            continue;
        }
        let h = cur.as_mut().ok_or_else(|| bad("a line outside any hunk"))?;
        let (tag, body) = line.split_at(line.len().min(1));
        match tag {
            " " | "" => {
                h.old.push_str(body);
                h.old.push('\n');
                h.new.push_str(body);
                h.new.push('\n');
            }
            "-" => {
                h.old.push_str(body);
                h.old.push('\n');
            }
            "+" => {
                h.new.push_str(body);
                h.new.push('\n');
            }
            _ => return Err(bad(&format!("unexpected line {line:?}"))),
        }
    }
    hunks.extend(cur);
    if hunks.is_empty() {
        return Err(bad("no hunks"));
    }
    Ok(Patch { file, hunks })
}

/// Applies `text` (a fixup named `name`) to the contents of its file.
pub(crate) fn apply(name: &str, text: &str, contents: &str) -> Result<String> {
    let p = parse(name, text)?;
    let mut out = contents.to_owned();
    for (i, h) in p.hunks.iter().enumerate() {
        let fail = |why: String| BuildError::Fixup {
            patch: name.into(),
            file: p.file.clone(),
            why,
        };
        match out.matches(h.old.as_str()).count() {
            1 => out = out.replacen(h.old.as_str(), &h.new, 1),
            0 => return Err(fail(format!("hunk {} found no match", i + 1))),
            n => return Err(fail(format!("hunk {} matches {n} places", i + 1))),
        }
    }
    Ok(out)
}

/// The file a fixup patches, relative to `library/`.
pub(crate) fn target_file(name: &str, text: &str) -> Result<String> {
    Ok(parse(name, text)?.file)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(BuildError::io(format!("creating {}", to.display())))?;
    for entry in
        fs::read_dir(from).map_err(BuildError::io(format!("reading {}", from.display())))?
    {
        let entry = entry.map_err(BuildError::io(format!("reading {}", from.display())))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry
            .file_type()
            .map_err(BuildError::io(format!("stat {}", src.display())))?
            .is_dir()
        {
            copy_dir(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(BuildError::io(format!("copying {}", src.display())))?;
        }
    }
    Ok(())
}

/// Copies the `library/` of `toolchain`'s rust-src to `dest` and applies every fixup.
pub(crate) fn patch_library(toolchain: &Toolchain, dest: &Path) -> Result<()> {
    copy_dir(&toolchain.library(), dest)?;
    for (name, text) in PATCHES {
        let file = dest.join(target_file(name, text)?);
        let contents = fs::read_to_string(&file)
            .map_err(BuildError::io(format!("reading {}", file.display())))?;
        let patched = apply(name, text, &contents)?;
        fs::write(&file, patched).map_err(BuildError::io(format!("writing {}", file.display())))?;
    }
    Ok(())
}

/// The patched `library/` for `toolchain`, made once per toolchain and fixup set in the
/// machine's cache ([`crate::cache`]; the key hashes `rustc -vV` and every fixup), so
/// that every build compiles std from the same path and makes the same PTX.
pub(crate) fn patched_library(toolchain: &Toolchain) -> Result<PathBuf> {
    let cache_root = crate::cache::root().join("std");
    fs::create_dir_all(&cache_root)
        .map_err(BuildError::io(format!("creating {}", cache_root.display())))?;
    let mut h = Sha256::new();
    h.update(toolchain.version.as_bytes());
    for (name, text) in PATCHES {
        h.update(name.as_bytes());
        h.update(text.as_bytes());
    }
    let key: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let root = cache_root.join(format!("rust-src-{key}"));
    let library = root.join("library");
    if root.join(".complete").exists() {
        return Ok(library);
    }
    let staging = cache_root.join(format!("rust-src-{key}.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    patch_library(toolchain, &staging.join("library"))?;
    fs::write(staging.join(".complete"), key.as_bytes())
        .map_err(BuildError::io(format!("writing {}", staging.display())))?;
    // A folder left without `.complete` is from an interrupted run; a complete one may
    // be in use by another build, and has the same contents as ours.
    if root.exists() && !root.join(".complete").exists() {
        let _ = fs::remove_dir_all(&root);
    }
    let renamed = fs::rename(&staging, &root);
    let _ = fs::remove_dir_all(&staging);
    if root.join(".complete").exists() {
        return Ok(library);
    }
    renamed.map_err(BuildError::io(format!("renaming {}", staging.display())))?;
    Ok(library)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_fixups_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixups");
        let mut on_disk: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".patch"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = PATCHES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(on_disk, embedded, "register new fixups in PATCHES");
        for (name, text) in PATCHES {
            assert!(
                text.starts_with("Why: "),
                "{name} must open with a `Why:` line"
            );
        }
    }

    #[test]
    fn patch_applies_once_and_refuses_missing_or_ambiguous_context() {
        let patch = "Why: test\n--- a/x.rs\n+++ b/x.rs\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
        assert_eq!(apply("t", patch, "z\na\nb\n").unwrap(), "z\na\nc\n");
        assert!(
            matches!(apply("t", patch, "a\nx\n"), Err(BuildError::Fixup { why, .. }) if why.contains("no match"))
        );
        assert!(
            matches!(apply("t", patch, "a\nb\na\nb\n"), Err(BuildError::Fixup { why, .. }) if why.contains("2 places"))
        );
    }

    #[test]
    fn libc_flags_set_the_x86_64_cfg() {
        assert_eq!(
            libc_rustflags(),
            [
                "--cfg",
                "target_arch=\"x86_64\"",
                "-Aexplicit_builtin_cfgs_in_flags"
            ]
        );
    }
}
