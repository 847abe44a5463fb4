//! The seeded root the fuzz cases run against, made once per process: a read-write
//! mount with links that lead outside on purpose, a read-only one, a FIFO, and the
//! checks that nothing the GPU did reached past them.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hostcall_runtime::{Host, HostBuilder, Unserved};

use crate::{GRANTED_VAR, SECRET_VALUE, SECRET_VAR};

/// The seeded directories, made once per process.
pub struct World {
    _tmp: tempfile::TempDir,
    /// Mounted read-write at `/data`.
    pub root: PathBuf,
    /// Mounted read-only at `/ro`.
    pub ro: PathBuf,
    /// Outside every mount: must only ever hold `secret`.
    pub outside: PathBuf,
    /// An end of the FIFO at `/data/fifo`, held open for reading and writing so that
    /// opening either end never waits, and pumped so reads and writes finish.
    fifo: File,
}

impl World {
    fn new() -> World {
        // SAFETY: set before any thread of this process reads the environment for the
        // fuzzer (the first case), never changed after.
        unsafe {
            std::env::set_var(SECRET_VAR, std::str::from_utf8(SECRET_VALUE).unwrap());
            std::env::set_var(GRANTED_VAR, "granted");
        }
        let tmp = tempfile::tempdir().expect("a temporary dir");
        let base = tmp.path().canonicalize().expect("canonical");
        let (root, ro, outside) = (base.join("root"), base.join("ro"), base.join("outside"));
        // Modes set explicitly: the invariant on modes must not depend on the umask.
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("seeding")
        };
        for d in [&root, &ro, &outside, &root.join("sub")] {
            std::fs::create_dir_all(d).expect("seeding");
            mode(d, 0o755);
        }
        std::fs::write(outside.join("secret"), "outside").expect("seeding");
        std::fs::write(root.join("inside.txt"), "inside").expect("seeding");
        std::fs::write(ro.join("inside.txt"), "read only").expect("seeding");
        mode(&root.join("inside.txt"), 0o644);
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).expect("seeding")
        };
        link(&outside.join("new"), "out"); // dangling, absolute, outside
        link(Path::new("../outside"), "up"); // relative, outside
        link(&outside.join("secret"), "secret"); // existing, outside
        link(Path::new("loop2"), "loop1");
        link(Path::new("loop1"), "loop2");
        link(Path::new("/proc/self/root"), "magic");
        link(Path::new("/proc/self/cwd"), "magiccwd");
        link(Path::new("."), "selfdir");
        link(&root.join("inside.txt"), "absinside");
        rustix::fs::mkfifoat(rustix::fs::CWD, root.join("fifo"), 0o600.into()).expect("mkfifo");
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(root.join("fifo"))
            .expect("opening the FIFO");
        World {
            _tmp: tmp,
            root,
            ro,
            outside,
            fifo,
        }
    }

    /// The host every case runs against.
    pub fn builder(&self) -> HostBuilder {
        Host::builder()
            // Unknown ids are part of the input: answered ENOSYS, the bench goes on.
            .unserved(Unserved::Enosys)
            .preopen_dir(&self.root, "/data")
            .preopen_dir_readonly(&self.ro, "/ro")
            .cwd("/data/sub")
            .env("GIVEN", "value")
            .inherit_env(GRANTED_VAR)
            .max_open_files(64)
            .blocking_threads(2)
    }

    /// Keeps the FIFO between empty and full, so a read or write of it always ends.
    pub(crate) fn tend_fifo(&self) {
        let mut buf = [0u8; 1 << 16];
        let _ = (&self.fifo).read(&mut buf);
        let _ = (&self.fifo).write(&[b'f'; 512]);
    }

    /// Links below the root that break the rule for GPU-made links, and entries with
    /// group or other write, other than the seeded ones.
    pub(crate) fn widened(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![self.root.clone()];
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                let Ok(m) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if m.is_symlink() {
                    let target = std::fs::read_link(&path).unwrap_or_default();
                    let seeded = path.parent() == Some(&*self.root)
                        && SEEDED_LINKS.contains(&&*e.file_name().to_string_lossy());
                    let below = target.components().all(|c| {
                        matches!(
                            c,
                            std::path::Component::Normal(_) | std::path::Component::CurDir
                        )
                    });
                    if !below && !seeded {
                        found.push(format!("{} -> {}", path.display(), target.display()));
                    }
                    continue;
                }
                if m.permissions().mode() & 0o022 != 0 && !m.file_type().is_fifo() {
                    found.push(format!(
                        "{} mode {:o}",
                        path.display(),
                        m.permissions().mode()
                    ));
                }
                if m.is_dir() {
                    dirs.push(path);
                }
            }
        }
        let root_mode = std::fs::metadata(&self.root).map(|m| m.permissions().mode() & 0o777);
        if root_mode.as_ref().ok() != Some(&0o755) {
            found.push(format!("the root's mode is {root_mode:?}"));
        }
        found
    }

    pub(crate) fn outside_is_untouched(&self) -> bool {
        let names: Vec<_> = std::fs::read_dir(&self.outside)
            .expect("listing outside")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names == ["secret"]
    }
}

/// The process's world.
pub fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(World::new)
}

/// The links seeded in the root (several lead outside on purpose).
const SEEDED_LINKS: &[&str] = &[
    "out",
    "up",
    "secret",
    "loop1",
    "loop2",
    "magic",
    "magiccwd",
    "selfdir",
    "absinside",
];
