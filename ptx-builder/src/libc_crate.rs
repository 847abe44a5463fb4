//! Where a binary's libc-hostcall comes from, and the package through which it is built.
//!
//! libc-hostcall holds the kernel that runs `main` (its `start` feature), and a binary
//! that never names it gets it from the builder. It is found, in this order: at
//! `$HOSTCALL_LIBC_DIR` (Buck2 names its copy so), beside this builder's sources (a
//! checkout), else in the registry at exactly this builder's version (an installed
//! `cargo gpu`, whose package has no checkout beside it). Whichever it is, a package of
//! one dependency on it is written into the builder's output folder and built, so that
//! the three differ only in that dependency's line.

use std::path::{Path, PathBuf};

use crate::cache::{short_hash, write_if_changed};
use crate::{BuildError, Result};

/// The variable that names the libc-hostcall folder a binary is built with, when not the
/// one beside this builder's sources (Buck2 builds the builder from a copy of them).
const LIBC_DIR_VAR: &str = "HOSTCALL_LIBC_DIR";

/// The crate's name, as Cargo reports its targets.
pub(crate) const CRATE: &str = "libc_hostcall";

/// The folder of the libc-hostcall to build by path: `$HOSTCALL_LIBC_DIR`, else a
/// checkout's beside this builder; `None` for the registry's.
fn local_dir() -> Result<Option<PathBuf>> {
    let sibling = Path::new(env!("CARGO_MANIFEST_DIR")).join("../libc-hostcall");
    let dir = match std::env::var_os(LIBC_DIR_VAR) {
        Some(d) => PathBuf::from(d),
        None if sibling.join("Cargo.toml").is_file() => sibling,
        None => return Ok(None),
    };
    dir.canonicalize().map(Some).map_err(BuildError::io(format!(
        "resolving libc-hostcall's folder {}",
        dir.display()
    )))
}

/// The dependency line on libc-hostcall, with its `start` feature: by path from `dir`,
/// else from the registry at exactly `version`.
fn dependency(dir: Option<&Path>, version: &str) -> String {
    match dir {
        Some(d) => format!(
            "{{ path = {:?}, features = [\"start\"] }}",
            d.display().to_string()
        ),
        None => format!("{{ version = \"={version}\", features = [\"start\"] }}"),
    }
}

/// Writes (once per content) the package that builds libc-hostcall into `out`, and
/// returns its manifest.
pub(crate) fn package(out: &Path) -> Result<PathBuf> {
    let manifest = format!(
        "# Written by ptx-builder: builds a binary's libc-hostcall (libc_crate.rs).\n\
         [package]\nname = \"ptx-builder-libc\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[lib]\npath = \"lib.rs\"\n\n[dependencies]\n\
         libc-hostcall = {}\n\n[workspace]\n",
        dependency(local_dir()?.as_deref(), env!("CARGO_PKG_VERSION"))
    );
    let dir = out.join(format!("libc-{}", short_hash(manifest.as_bytes(), 4)));
    let toml = dir.join("Cargo.toml");
    write_if_changed(&dir.join("lib.rs"), "#![no_std]\n")?;
    write_if_changed(&toml, &manifest)?;
    Ok(toml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_hostcall_comes_by_path_else_from_the_registry_at_this_version() {
        assert_eq!(
            dependency(Some(Path::new("/src/libc-hostcall")), "1.2.3"),
            "{ path = \"/src/libc-hostcall\", features = [\"start\"] }"
        );
        assert_eq!(
            dependency(None, "1.2.3"),
            "{ version = \"=1.2.3\", features = [\"start\"] }"
        );
    }

    #[test]
    fn the_package_is_written_once_per_content() {
        let out = tempfile::tempdir().unwrap();
        let manifest = package(out.path()).unwrap();
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(
            text.contains("[dependencies]\nlibc-hostcall = { "),
            "{text}"
        );
        assert!(manifest.parent().unwrap().join("lib.rs").is_file());
        assert_eq!(package(out.path()).unwrap(), manifest);
    }
}
