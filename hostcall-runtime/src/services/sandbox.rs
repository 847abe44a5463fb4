//! The GPU's file system view: pre-opened host directories mounted at guest paths, and a
//! virtual working directory for each run. The GPU names files by guest path only; the
//! host never tells it a host path.
//!
//! Each mount is a directory handle opened once, when the host is built (`cap-std`).
//! A guest path is first made absolute against the run's working directory and
//! normalised lexically (`.` dropped, `..` removed with the component before it, never
//! above `/`); its longest mount prefix picks the handle, and the rest is resolved
//! beneath that handle by the kernel (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or
//! cap-std's component-by-component walk where that is missing). So a symlink, dangling
//! or not, or a directory swapped for one between two calls, can never lead outside:
//! there is no check separate from the use.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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

/// The mounts, where each run's working directory starts, and the program's executable.
pub(crate) struct Sandbox {
    /// Longest guest path first, so the first prefix found is the longest.
    mounts: Vec<Mount>,
    /// The working directory each run starts in (a guest path's components), which
    /// need not lie in a grant.
    start: Vec<Vec<u8>>,
    /// The program's executable (a canonical host path), which `/proc/self/exe` names
    /// where a grant holds it.
    executable: Option<PathBuf>,
    /// Whether mount points below a grant are allowed (and crossed).
    mount_points_inside: bool,
}

/// The guest path `/proc/self/exe`, whose link Linux's `current_exe` reads.
const SELF_EXE: [&[u8]; 3] = [b"proc", b"self", b"exe"];

/// One run's working directory, which `chdir` moves: a guest path's components. A run
/// is a process, so each starts at the host's ([`Sandbox::working_dir`]) and its
/// launches share one.
pub(crate) struct WorkingDir(Mutex<Vec<Vec<u8>>>);

impl WorkingDir {
    /// Its components now.
    pub fn components(&self) -> Vec<Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Its guest path now, as `getcwd` answers it.
    pub fn path(&self) -> Vec<u8> {
        join_guest(&self.components())
    }

    /// Moves it to `to` (components [`Sandbox::chdir_target`] approved).
    pub fn set(&self, to: Vec<Vec<u8>>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = to;
    }
}

/// Where a `chdir` goes, as far as lexical resolution tells.
pub(crate) enum ChdirTarget<'a> {
    /// Into a mount: the directory must exist there, and is named by its canonical path.
    Beneath(Resolved<'a>),
    /// A directory of the program's view outside every grant: the run's starting one,
    /// or one on the way to a grant (`/` to reach `/data`). Nothing is there to list or
    /// open, but a program may stand there, as it started there or passes through.
    Outside(Vec<Vec<u8>>),
}

/// A guest path resolved to a mount and the path below it (`.` for the mount itself).
pub(crate) struct Resolved<'a> {
    pub mount: &'a Mount,
    pub rel: PathBuf,
}

impl Sandbox {
    /// Opens every pre-open; `cwd` is where each run's working directory starts (a guest
    /// path), `executable` the program's file on the host, if it has one. A grant with a
    /// mount point below it is refused unless `mount_points_inside`.
    pub fn open(
        specs: &[MountSpec],
        cwd: &str,
        executable: Option<&Path>,
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
            start: guest_components(cwd)?,
            // A path that does not resolve now is kept as given: it is only ever
            // compared with the grants.
            executable: executable.map(|e| e.canonicalize().unwrap_or_else(|_| e.to_owned())),
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

    /// A run's working directory, where the host's starts.
    pub fn working_dir(&self) -> WorkingDir {
        WorkingDir(Mutex::new(self.start.clone()))
    }

    /// The mounts, longest guest path first.
    #[cfg(feature = "fuzzing")]
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Resolves a guest path, relative ones from `cwd`, to the mount it lies in;
    /// `Err(errno)` for a path too long (`ENAMETOOLONG`), empty (`ENOENT`), holding a
    /// NUL (`EINVAL`), or outside every mount (`EACCES`, whether or not something exists
    /// there on the host).
    pub fn resolve(&self, cwd: &WorkingDir, raw: &[u8]) -> Result<Resolved<'_>, i32> {
        let parts = normalise(cwd, raw)?;
        self.in_mount(&parts).ok_or(EACCES)
    }

    /// Where `chdir(raw)` goes: beneath a mount, or to a directory outside the grants
    /// that the program's view has ([`ChdirTarget::Outside`]); `EACCES` elsewhere,
    /// as any path outside the grants.
    pub fn chdir_target(&self, cwd: &WorkingDir, raw: &[u8]) -> Result<ChdirTarget<'_>, i32> {
        let parts = normalise(cwd, raw)?;
        if let Some(at) = self.in_mount(&parts) {
            return Ok(ChdirTarget::Beneath(at));
        }
        let leads_to_a_grant =
            |m: &Mount| m.guest.len() > parts.len() && m.guest.starts_with(&parts);
        if parts == self.start || self.mounts.iter().any(leads_to_a_grant) {
            Ok(ChdirTarget::Outside(parts))
        } else {
            Err(EACCES)
        }
    }

    /// The target of the link `raw` when it is `/proc/self/exe`: the executable's guest
    /// path, or `EACCES` where no grant holds it (as any path outside the grants);
    /// `None` for any other path.
    pub fn self_exe(&self, cwd: &WorkingDir, raw: &[u8]) -> Option<Result<Vec<u8>, i32>> {
        let parts = normalise(cwd, raw).ok()?;
        (parts == SELF_EXE).then(|| {
            self.executable
                .as_deref()
                .and_then(|e| self.guest_of_host(e))
                .ok_or(EACCES)
        })
    }

    /// The mount `parts` (a normal absolute guest path) lies in, and the path below it.
    fn in_mount(&self, parts: &[Vec<u8>]) -> Option<Resolved<'_>> {
        let mount = self
            .mounts
            .iter()
            .find(|m| m.guest.len() <= parts.len() && m.guest[..] == parts[..m.guest.len()])?;
        let below = &parts[mount.guest.len()..];
        let rel = if below.is_empty() {
            PathBuf::from(".")
        } else {
            use std::os::unix::ffi::OsStrExt;
            PathBuf::from(std::ffi::OsStr::from_bytes(&below.join(&b'/')))
        };
        Some(Resolved { mount, rel })
    }

    /// The components of the canonical path `rel` below `mount`, for a working directory.
    pub fn components_of(&self, mount: &Mount, rel: &Path) -> Vec<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt;
        let mut parts = mount.guest.clone();
        parts.extend(
            rel.components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .map(|c| c.as_os_str().as_bytes().to_vec()),
        );
        parts
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
        join_guest(&self.components_of(mount, rel))
    }
}

/// The components of the guest path `raw`, relative ones from `cwd`, normalised
/// lexically (`.` dropped, `..` removing the one before, never above `/`);
/// `ENAMETOOLONG`, `ENOENT` (empty) or `EINVAL` (a NUL) as [`Sandbox::resolve`] says.
fn normalise(cwd: &WorkingDir, raw: &[u8]) -> Result<Vec<Vec<u8>>, i32> {
    if raw.len() >= PATH_MAX {
        return Err(ENAMETOOLONG);
    }
    if raw.is_empty() {
        return Err(ENOENT);
    }
    if raw.contains(&0) {
        return Err(EINVAL);
    }
    let mut parts = if raw[0] == b'/' {
        Vec::new()
    } else {
        cwd.components()
    };
    for c in raw.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            name if name.len() > NAME_MAX => return Err(ENAMETOOLONG),
            name => parts.push(name.to_vec()),
        }
    }
    Ok(parts)
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
        Sandbox::open(&[spec], "/data/in", None, false).unwrap()
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
        let cwd = s.working_dir();
        let rel = |p: &[u8]| {
            s.resolve(&cwd, p)
                .map(|r| r.rel.to_str().unwrap().to_owned())
        };
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
        assert_eq!(cwd.path(), b"/data/in");
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
                    Sandbox::open(&[spec], "/", None, false),
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
                    Sandbox::open(&[spec], "/", None, false),
                    Err(MountError::Guest(_))
                ),
                "{guest}"
            );
        }
    }
}
