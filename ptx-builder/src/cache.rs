//! The builder's cache on this machine, shared by every checkout, Cargo profile and
//! Buck2 action: the patched rust-src (`std/`) and the cubins (`cubins/`), each under a
//! key that hashes everything its content depends on, so an entry is never stale and a
//! module is never compiled twice.
//!
//! Why one place for both: std's crates are hashed into every symbol name by the path of
//! their sources, so a module's PTX is byte-identical across builds only when std comes
//! from the same folder; identical PTX is what lets a cubin made by one build serve all.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{BuildError, Result};

/// The variable that moves the cache (`off` turns the cubin cache off).
pub const CACHE_VAR: &str = "HOSTCALL_CACHE";

/// The cache's root: `$HOSTCALL_CACHE`, else `$XDG_CACHE_HOME/hostcall`, else
/// `$HOME/.cache/hostcall`, else the temporary folder's `hostcall-cache`.
pub fn root() -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    match var(CACHE_VAR) {
        Some(dir) if dir != "off" => PathBuf::from(dir),
        _ => var("XDG_CACHE_HOME")
            .map(|d| PathBuf::from(d).join("hostcall"))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/hostcall")))
            .unwrap_or_else(|| std::env::temp_dir().join("hostcall-cache")),
    }
}

/// Whether cubins are cached (`HOSTCALL_CACHE=off` makes every build run ptxas).
pub(crate) fn cubins_enabled() -> bool {
    std::env::var_os(CACHE_VAR).is_none_or(|v| v != "off")
}

/// Where the cubin of `key` (a hex SHA-256) lives.
pub(crate) fn cubin_path(key: &str) -> PathBuf {
    root()
        .join("cubins")
        .join(&key[..2])
        .join(format!("{key}.cubin"))
}

/// Writes `bytes` to `path` so that no reader ever sees part of it: a file beside it,
/// then a rename (concurrent writers of one key write the same bytes).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str, p: &Path| BuildError::io(format!("{what} {}", p.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
    f.write_all(bytes).map_err(io("writing", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io("renaming", &tmp))
}

/// Writes `text` to `path` unless it already holds exactly that (a file many builds
/// share, written once per content); returns whether it wrote.
pub(crate) fn write_if_changed(path: &Path, text: &str) -> Result<bool> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(false);
    }
    write_atomically(path, text.as_bytes())?;
    Ok(true)
}

/// The first `bytes` bytes of `data`'s SHA-256, in hex: a name that changes with content.
pub(crate) fn short_hash(data: &[u8], bytes: usize) -> String {
    Sha256::digest(data)
        .iter()
        .take(bytes)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/k.cubin");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn a_cubin_key_is_spread_over_folders_by_its_first_byte() {
        let key = "ab".repeat(32);
        let p = cubin_path(&key);
        assert!(
            p.ends_with(format!("cubins/ab/{key}.cubin")),
            "{}",
            p.display()
        );
    }
}
