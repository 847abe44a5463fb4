//! The GPU's file system view: pre-opened host directories mounted at guest paths, and a
//! virtual working directory. The GPU names files by guest path only; the host never
//! tells it a host path.
//!
//! Each mount is a directory handle opened once, when the host is built (`cap-std`).
//! A guest path is first made absolute against the virtual cwd and normalised lexically
//! (`.` dropped, `..` removed with the component before it, never above `/`); its
//! longest mount prefix picks the handle, and the rest is resolved beneath that handle
//! by the kernel (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or
//! cap-std's component-by-component walk where that is missing). So a symlink, dangling
//! or not, or a directory swapped for one between two calls, can never lead outside:
//! there is no check separate from the use.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use hostcall_abi::errno::{EACCES, EINVAL, ENAMETOOLONG, ENOENT};
use hostcall_abi::{NAME_MAX, PATH_MAX};

use crate::guest_log::{GuestLog, Kind};

/// How the GPU may use a pre-opened directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Open, create, write and stat files below it.
    ReadWrite,
    /// Open for reading and stat only: anything that would write answers `EROFS`.
    ReadOnly,
}

/// Host directories no pre-open may be, or be below: the whole file system, and the
/// kernel's and devices' views of the machine.
const REFUSED_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// A pre-opened directory as the embedder asked for it, before it is opened.
#[derive(Clone, Debug)]
pub(crate) struct MountSpec {
    pub host: PathBuf,
    pub guest: String,
    pub access: Access,
}

/// A pre-opened directory.
pub(crate) struct Mount {
    /// The guest path's components (none for a mount at `/`).
    guest: Vec<Vec<u8>>,
    /// The handle everything below the mount is resolved beneath.
    pub dir: Dir,
    /// The canonical host path, for reports and checks; never shown to the GPU.
    pub host: PathBuf,
    pub access: Access,
    /// Device and inode of the directory itself, to recognise it by any path or fd.
    root_id: (u64, u64),
}

/// Why a pre-open was refused.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The host directory could not be opened.
    #[error("pre-opened dir {path}: {source}")]
    Open {
        /// The directory as given.
        path: PathBuf,
        /// What opening it said.
        source: std::io::Error,
    },
    /// The host directory is one the GPU must never get.
    #[error(
        "pre-opened dir {0} is refused: `/`, /proc, /sys and /dev (and anything below them) cannot be granted"
    )]
    Refused(PathBuf),
    /// The guest path is not an absolute, normal path.
    #[error("guest path {0:?} must be absolute, without `.` or `..`, and at most PATH_MAX bytes")]
    Guest(String),
    /// Two pre-opens are mounted at one guest path.
    #[error("two pre-opened dirs are mounted at {0}")]
    Duplicate(String),
    /// One pre-open lies inside another with a different access, so that one would
    /// undo the other's promise (a read-only dir written through a writable one).
    #[error(
        "pre-opened dir {inner} ({inner_access:?}) lies inside pre-opened dir {outer} ({outer_access:?}); grants that nest must have the same access"
    )]
    Overlap {
        /// The enclosing directory.
        outer: PathBuf,
        /// Its access.
        outer_access: Access,
        /// The directory inside it.
        inner: PathBuf,
        /// Its access.
        inner_access: Access,
    },
    /// A file system is mounted below a pre-opened dir: resolution beneath the grant
    /// would cross into it (a bind mount can bring any host directory inside).
    #[error(
        "{mount_point} is a mount point inside pre-opened dir {grant}: paths below the grant would cross into another file system (grant the directories around it instead, or allow it with HostBuilder::allow_mount_points_inside)"
    )]
    MountInside {
        /// The pre-opened directory.
        grant: PathBuf,
        /// The mount point below it.
        mount_point: PathBuf,
    },
}

/// The mounts and the virtual cwd.
pub(crate) struct Sandbox {
    /// Longest guest path first, so the first prefix found is the longest.
    mounts: Vec<Mount>,
    cwd: Vec<Vec<u8>>,
    /// Whether mount points below a grant are allowed (and crossed).
    mount_points_inside: bool,
}

/// A guest path resolved to a mount and the path below it (`.` for the mount itself).
pub(crate) struct Resolved<'a> {
    pub mount: &'a Mount,
    pub rel: PathBuf,
}

impl Sandbox {
    /// Opens every pre-open; `cwd` is the virtual working directory (a guest path).
    /// A grant with a mount point below it is refused unless `mount_points_inside`.
    pub fn open(
        specs: &[MountSpec],
        cwd: &str,
        mount_points_inside: bool,
    ) -> Result<Sandbox, MountError> {
        let mut mounts: Vec<Mount> = Vec::new();
        for spec in specs {
            let opened = |e| MountError::Open {
                path: spec.host.clone(),
                source: e,
            };
            let host = spec.host.canonicalize().map_err(opened)?;
            if host == Path::new("/") || REFUSED_ROOTS.iter().any(|r| host.starts_with(r)) {
                return Err(MountError::Refused(host));
            }
            let guest = guest_components(&spec.guest)?;
            if mounts.iter().any(|m| m.guest == guest) {
                return Err(MountError::Duplicate(spec.guest.clone()));
            }
            let dir = Dir::open_ambient_dir(&host, ambient_authority()).map_err(opened)?;
            let root_id = {
                use cap_std::fs::MetadataExt;
                let m = dir.dir_metadata().map_err(opened)?;
                (m.dev(), m.ino())
            };
            log::debug!(
                "GPU path {} is {} ({:?})",
                spec.guest,
                host.display(),
                spec.access
            );
            mounts.push(Mount {
                guest,
                dir,
                host,
                access: spec.access,
                root_id,
            });
        }
        for (i, a) in mounts.iter().enumerate() {
            for b in &mounts[i + 1..] {
                let (outer, inner) = if b.host.starts_with(&a.host) {
                    (a, b)
                } else if a.host.starts_with(&b.host) {
                    (b, a)
                } else {
                    continue;
                };
                if outer.access != inner.access {
                    return Err(MountError::Overlap {
                        outer: outer.host.clone(),
                        outer_access: outer.access,
                        inner: inner.host.clone(),
                        inner_access: inner.access,
                    });
                }
            }
        }
        mounts.sort_by_key(|m| std::cmp::Reverse(m.guest.len()));
        let sandbox = Sandbox {
            mounts,
            cwd: guest_components(cwd)?,
            mount_points_inside,
        };
        sandbox.check_mount_points()?;
        Ok(sandbox)
    }

    /// Refuses a grant with a mount point below it, as the host's mount table says now
    /// (a GPU program cannot mount anything; checked when the host is built and again
    /// before each run). Without a readable mount table, says so and allows it.
    pub fn check_mount_points(&self) -> Result<(), MountError> {
        if self.mount_points_inside || self.mounts.is_empty() {
            return Ok(());
        }
        let table = match std::fs::read("/proc/self/mountinfo") {
            Ok(t) => t,
            Err(e) => {
                log::warn!(
                    "cannot read /proc/self/mountinfo ({e}): mount points inside pre-opened dirs are not checked"
                );
                return Ok(());
            }
        };
        for mount_point in mount_points(&table) {
            if let Some(m) = self
                .mounts
                .iter()
                .find(|m| mount_point != m.host && mount_point.starts_with(&m.host))
            {
                return Err(MountError::MountInside {
                    grant: m.host.clone(),
                    mount_point,
                });
            }
        }
        Ok(())
    }

    /// The virtual working directory, as the GPU sees it.
    pub fn cwd(&self) -> Vec<u8> {
        join_guest(&self.cwd)
    }

    /// The mounts, longest guest path first.
    #[cfg(feature = "fuzzing")]
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Resolves a guest path to the mount it lies in; `Err(errno)` for a path too long
    /// (`ENAMETOOLONG`), empty (`ENOENT`), holding a NUL (`EINVAL`), or outside every
    /// mount (`EACCES`, whether or not something exists there on the host).
    pub fn resolve(&self, raw: &[u8]) -> Result<Resolved<'_>, i32> {
        if raw.len() >= PATH_MAX {
            return Err(ENAMETOOLONG);
        }
        if raw.is_empty() {
            return Err(ENOENT);
        }
        if raw.contains(&0) {
            return Err(EINVAL);
        }
        let mut parts: Vec<&[u8]> = if raw[0] == b'/' {
            Vec::new()
        } else {
            self.cwd.iter().map(Vec::as_slice).collect()
        };
        for c in raw.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    parts.pop();
                }
                name if name.len() > NAME_MAX => return Err(ENAMETOOLONG),
                name => parts.push(name),
            }
        }
        let mount = self
            .mounts
            .iter()
            .find(|m| {
                m.guest.len() <= parts.len() && m.guest.iter().zip(&parts).all(|(a, b)| a == b)
            })
            .ok_or(EACCES)?;
        let below = &parts[mount.guest.len()..];
        let rel = if below.is_empty() {
            PathBuf::from(".")
        } else {
            use std::os::unix::ffi::OsStrExt;
            PathBuf::from(std::ffi::OsStr::from_bytes(&below.join(&b'/')))
        };
        Ok(Resolved { mount, rel })
    }

    /// The guest path of an absolute host path, if it lies in a mount (the longest
    /// guest path wins where grants nest).
    pub fn guest_of_host(&self, host: &Path) -> Option<Vec<u8>> {
        self.mounts.iter().find_map(|m| {
            let rel = host.strip_prefix(&m.host).ok()?;
            Some(self.guest_path(m, rel))
        })
    }

    /// Whether `m` is the metadata of a pre-opened directory itself.
    pub fn is_mount_root(&self, m: &cap_std::fs::Metadata) -> bool {
        use cap_std::fs::MetadataExt;
        self.mounts.iter().any(|r| r.root_id == (m.dev(), m.ino()))
    }

    /// The guest path of `rel` (a canonical path below `mount`).
    pub fn guest_path(&self, mount: &Mount, rel: &Path) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let mut parts = mount.guest.clone();
        parts.extend(
            rel.components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .map(|c| c.as_os_str().as_bytes().to_vec()),
        );
        join_guest(&parts)
    }
}

/// The mount points of a `/proc/self/mountinfo` table (the fifth field of each line,
/// with its octal escapes decoded).
fn mount_points(table: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(|field| {
            let mut out = Vec::with_capacity(field.len());
            let mut i = 0;
            while i < field.len() {
                let octal = field.get(i + 1..i + 4).and_then(|d| {
                    let d = std::str::from_utf8(d).ok()?;
                    u8::from_str_radix(d, 8).ok()
                });
                match (field[i], octal) {
                    (b'\\', Some(b)) => {
                        out.push(b);
                        i += 4;
                    }
                    (b, _) => {
                        out.push(b);
                        i += 1;
                    }
                }
            }
            PathBuf::from(std::ffi::OsString::from_vec(out))
        })
        .collect()
}

/// The components of an absolute, normal guest path.
fn guest_components(guest: &str) -> Result<Vec<Vec<u8>>, MountError> {
    let bad = || MountError::Guest(guest.to_owned());
    if !guest.starts_with('/') || guest.len() >= PATH_MAX || guest.contains('\0') {
        return Err(bad());
    }
    guest
        .split('/')
        .filter(|c| !c.is_empty())
        .map(|c| match c {
            "." | ".." => Err(bad()),
            c if c.len() > NAME_MAX => Err(bad()),
            c => Ok(c.as_bytes().to_vec()),
        })
        .collect()
}

fn join_guest(parts: &[Vec<u8>]) -> Vec<u8> {
    if parts.is_empty() {
        return b"/".to_vec();
    }
    parts
        .iter()
        .flat_map(|p| [b"/".as_slice(), p])
        .flatten()
        .copied()
        .collect()
}

impl Mount {
    /// The errno for a failure of a resolution beneath this mount: an attempted escape
    /// (cap-std reports it without an OS error) reads as `EACCES`, as a path outside
    /// every mount does, and is logged for the operator.
    pub fn errno(&self, e: &std::io::Error, log: &GuestLog) -> i32 {
        if e.raw_os_error().is_none() && e.kind() == ErrorKind::PermissionDenied {
            log.warn(
                Kind::Escape,
                format_args!(
                    "a GPU path tried to leave the pre-opened dir {}: {e}",
                    self.host.display()
                ),
            );
            return EACCES;
        }
        super::errno_of(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(dir: &Path) -> Sandbox {
        let spec = MountSpec {
            host: dir.to_path_buf(),
            guest: "/data/in".into(),
            access: Access::ReadWrite,
        };
        Sandbox::open(&[spec], "/data/in", false).unwrap()
    }

    #[test]
    fn mount_points_are_read_with_their_escapes() {
        let table = b"36 35 98:0 /mnt1 /mnt/parent rw - ext3 /dev/root rw\n\
                      37 36 0:5 / /a\\040b\\011c rw - tmpfs none rw\n";
        assert_eq!(
            mount_points(table),
            [PathBuf::from("/mnt/parent"), PathBuf::from("/a b\tc")]
        );
    }

    #[test]
    fn guest_paths_are_normalised_then_matched_to_the_longest_mount() {
        let d = tempfile::tempdir().unwrap();
        let s = sandbox(d.path());
        let rel = |p: &[u8]| s.resolve(p).map(|r| r.rel.to_str().unwrap().to_owned());
        assert_eq!(rel(b"/data/in/a/./b//c").unwrap(), "a/b/c");
        assert_eq!(rel(b"x").unwrap(), "x", "relative to the virtual cwd");
        assert_eq!(rel(b"/data/in").unwrap(), ".");
        assert_eq!(rel(b"a/../../in/y").unwrap(), "y");
        assert_eq!(
            rel(b"../../../data/in/z").unwrap(),
            "z",
            "`..` stops at `/`"
        );
        assert_eq!(rel(b"/data"), Err(EACCES), "above the mount");
        assert_eq!(
            rel(b"/data/inside"),
            Err(EACCES),
            "a prefix of a name is not a mount"
        );
        assert_eq!(rel(b"/etc/passwd"), Err(EACCES));
        assert_eq!(rel(b""), Err(ENOENT));
        assert_eq!(rel(b"a\0b"), Err(EINVAL));
        assert_eq!(rel(&[b'a'; PATH_MAX]), Err(ENAMETOOLONG));
        assert_eq!(rel(&[b'a'; NAME_MAX + 1]), Err(ENAMETOOLONG));
        assert_eq!(s.cwd(), b"/data/in");
    }

    #[test]
    fn dangerous_roots_and_bad_guest_paths_are_refused() {
        for root in ["/", "/proc", "/proc/self", "/sys", "/dev"] {
            let spec = MountSpec {
                host: root.into(),
                guest: "/x".into(),
                access: Access::ReadOnly,
            };
            assert!(
                matches!(
                    Sandbox::open(&[spec], "/", false),
                    Err(MountError::Refused(_))
                ),
                "{root}"
            );
        }
        let d = tempfile::tempdir().unwrap();
        for guest in ["relative", "/a/../b", "/a/./b"] {
            let spec = MountSpec {
                host: d.path().into(),
                guest: guest.into(),
                access: Access::ReadOnly,
            };
            assert!(
                matches!(
                    Sandbox::open(&[spec], "/", false),
                    Err(MountError::Guest(_))
                ),
                "{guest}"
            );
        }
    }
}
