//! std's `Fs` services on the host, all of them in one `impl Fs for Files`: opening,
//! closing, seeking and stating fds, and opening, changing or listing the directory
//! tree, with the open flags and the `struct stat` they answer in. Paths resolve beneath
//! a mount's handle, or beneath a directory fd the GPU opened there. Reading and
//! writing are named here and done in `fs`, beside the waits of sockets, pipes and
//! stdio they share with the stdio's ordered output.

use std::io::{Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirEntryExt, FileTypeExt as _, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_fs_ext::{AccessType, DirExt as _};
use cap_primitives::fs::AccessModes;
use cap_std::fs::{Dir, FileTypeExt, Metadata, MetadataExt, Permissions};
use hostcall_abi::dirent::{Record, kind};
use hostcall_abi::errno::{
    EACCES, EBADF, EINVAL, ENAMETOOLONG, ENOENT, ENOSYS, ENOTDIR, EPERM, ERANGE, EROFS, ESPIPE,
    EXDEV,
};
use hostcall_abi::fcntl;
use hostcall_abi::stat::{FileStat, STAT_SIZE};
use hostcall_abi::std_services::Fs;
use hostcall_abi::typed::{Errno, Filled};
use hostcall_abi::{AT_FDCWD, AT_REMOVEDIR, NAME_MAX, PATH_MAX};

use crate::guest_log::GuestLog;

use super::errno_of;
use super::fd_table::FifoOpen;
use super::fs::{Files, Listing, is_stdio};
use super::open_flags::{access_of, fifo_to_wait_on, open_beneath};
use super::sandbox::{Access, ChdirTarget, Mount};

// The open flags on the wire are the host's own (`hostcall_abi::fcntl`): pinned here
// against the OS's values, so a wrong one does not compile.
const _: () = {
    use rustix::fs::{AtFlags as At, OFlags as O};
    let pins: [(i32, u32); 16] = [
        (fcntl::O_WRONLY, O::WRONLY.bits()),
        (fcntl::O_RDWR, O::RDWR.bits()),
        (fcntl::O_ACCMODE, O::RWMODE.bits()),
        (fcntl::O_CREAT, O::CREATE.bits()),
        (fcntl::O_EXCL, O::EXCL.bits()),
        (fcntl::O_NOCTTY, O::NOCTTY.bits()),
        (fcntl::O_TRUNC, O::TRUNC.bits()),
        (fcntl::O_APPEND, O::APPEND.bits()),
        (fcntl::O_NONBLOCK, O::NONBLOCK.bits()),
        (fcntl::O_LARGEFILE, O::LARGEFILE.bits()),
        (fcntl::O_DIRECTORY, O::DIRECTORY.bits()),
        (fcntl::O_NOFOLLOW, O::NOFOLLOW.bits()),
        (fcntl::O_CLOEXEC, O::CLOEXEC.bits()),
        (fcntl::O_TMPFILE, O::TMPFILE.bits()),
        (fcntl::AT_SYMLINK_NOFOLLOW, At::SYMLINK_NOFOLLOW.bits()),
        (fcntl::AT_REMOVEDIR, At::REMOVEDIR.bits()),
    ];
    let mut i = 0;
    while i < pins.len() {
        assert!(
            pins[i].0 as u32 == pins[i].1,
            "an fcntl flag differs from the OS's"
        );
        i += 1;
    }
    assert!(fcntl::O_RDONLY as u32 == O::RDONLY.bits());
    assert!(fcntl::AT_SYMLINK_FOLLOW as u32 == At::SYMLINK_FOLLOW.bits());
    assert!(fcntl::AT_EMPTY_PATH as u32 == At::EMPTY_PATH.bits());
};

/// Where a path of an `*at` call resolves: beneath a mount, or beneath a directory fd.
struct Beneath<'a> {
    dir: DirRef<'a>,
    rel: PathBuf,
    access: Access,
}

enum DirRef<'a> {
    /// A mount's own handle (errors go through [`Mount::errno`]).
    Mount(&'a Mount),
    /// A handle made from a GPU directory fd.
    Fd(Dir),
}

impl Beneath<'_> {
    fn dir(&self) -> &Dir {
        match &self.dir {
            DirRef::Mount(m) => &m.dir,
            DirRef::Fd(d) => d,
        }
    }

    fn errno(&self, e: &std::io::Error, log: &GuestLog) -> i32 {
        match &self.dir {
            DirRef::Mount(m) => m.errno(e, log),
            DirRef::Fd(_) => errno_of(e),
        }
    }

    fn writable(&self) -> Result<(), i32> {
        match self.access {
            Access::ReadWrite => Ok(()),
            Access::ReadOnly => Err(EROFS),
        }
    }
}

/// Whether a link target keeps the rule for links the GPU makes or moves: relative, and
/// no `..` component. Such a link resolves below its own directory wherever it is
/// moved, renamed or hard-linked, so no host program that follows it later (the
/// embedder's own `fs::write` after the run) is led outside the grant.
fn stays_below(target: &Path) -> bool {
    !target.as_os_str().is_empty()
        && target
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// `d_type` of an entry.
fn kind_of(t: cap_std::fs::FileType) -> u8 {
    if t.is_dir() {
        kind::DT_DIR
    } else if t.is_symlink() {
        kind::DT_LNK
    } else if t.is_file() {
        kind::DT_REG
    } else if t.is_fifo() {
        kind::DT_FIFO
    } else if t.is_socket() {
        kind::DT_SOCK
    } else if t.is_char_device() {
        kind::DT_CHR
    } else if t.is_block_device() {
        kind::DT_BLK
    } else {
        kind::DT_UNKNOWN
    }
}

impl Files {
    /// Resolves `path` for an `*at` call: an absolute path, or `AT_FDCWD`, in the sandbox
    /// as a path without a `dirfd` is; otherwise beneath the directory open as `dirfd`.
    fn beneath(&self, dirfd: i32, path: &[u8]) -> Result<Beneath<'_>, i32> {
        if dirfd == AT_FDCWD || path.first() == Some(&b'/') {
            let at = self.sandbox.resolve(&self.cwd, path)?;
            return Ok(Beneath {
                dir: DirRef::Mount(at.mount),
                rel: at.rel,
                access: at.mount.access,
            });
        }
        if path.len() >= PATH_MAX {
            return Err(ENAMETOOLONG);
        }
        if path.contains(&0) {
            return Err(EINVAL);
        }
        if path.split(|b| *b == b'/').any(|c| c.len() > NAME_MAX) {
            return Err(ENAMETOOLONG);
        }
        if is_stdio(dirfd) {
            return Err(ENOTDIR);
        }
        let (file, access) = {
            let mut t = self.table();
            let e = t.entry(dirfd)?;
            (e.file.clone(), e.access)
        };
        if !file.metadata().map_err(|e| errno_of(&e))?.is_dir() {
            return Err(ENOTDIR);
        }
        let dir = Dir::from_std_file(file.try_clone().map_err(|e| errno_of(&e))?);
        let rel = if path.is_empty() {
            PathBuf::from(".")
        } else {
            PathBuf::from(std::ffi::OsStr::from_bytes(path))
        };
        Ok(Beneath {
            dir: DirRef::Fd(dir),
            rel,
            access,
        })
    }

    /// `rename` (`hard` false) or `link` (`hard` true) of `first` to `second`, both in
    /// one grant.
    pub(super) fn rename_or_link(
        &self,
        first: &[u8],
        second: &[u8],
        hard: bool,
    ) -> Result<(), i32> {
        let from = self.sandbox.resolve(&self.cwd, first)?;
        let to = self.sandbox.resolve(&self.cwd, second)?;
        if !std::ptr::eq(from.mount, to.mount) {
            return Err(EXDEV);
        }
        if from.mount.access == Access::ReadOnly {
            return Err(EROFS);
        }
        let dir = &from.mount.dir;
        if let Ok(m) = dir.symlink_metadata(&from.rel)
            && m.is_symlink()
            && !dir
                .read_link_contents(&from.rel)
                .is_ok_and(|t| stays_below(&t))
        {
            return Err(EPERM);
        }
        let r = if hard {
            dir.hard_link(&from.rel, dir, &to.rel)
        } else {
            dir.rename(&from.rel, dir, &to.rel)
        };
        r.map_err(|e| from.mount.errno(&e, &self.log))
    }

    /// Opens `fifo` (resolved from `b`) with `flags`, which waits for its other end:
    /// noted meanwhile, so that the run's end can end the wait. The open goes through
    /// the FIFO's handle, so what the run's end releases is what this waits on, whatever
    /// the FIFO is named by then.
    fn open_fifo(&self, b: &Beneath<'_>, fifo: OwnedFd, flags: i32) -> Result<std::fs::File, i32> {
        use rustix::fs::OFlags;
        let (read, write) =
            access_of(b.access, flags).map_err(|e| e.map_or(EINVAL, |e| b.errno(&e, &self.log)))?;
        let mut o = match (read, write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        // What else an open of an existing FIFO heeds (`O_CREAT` and `O_TRUNC` do
        // nothing to one).
        o |= OFlags::from_bits_retain((flags & (fcntl::O_APPEND | fcntl::O_NOCTTY)) as u32);
        let open = FifoOpen::new(fifo);
        let key = self.table().opening(open.clone())?;
        let opened = open.open(o);
        self.table().opened(key);
        opened.map_err(|e| b.errno(&e, &self.log))
    }

    /// The open file `fd` and the access of its mount (stdio has no file here).
    fn fd_file(&self, fd: i32) -> Result<(std::sync::Arc<std::fs::File>, Access), i32> {
        if is_stdio(fd) {
            return Err(EINVAL);
        }
        let mut t = self.table();
        let e = t.entry(fd)?;
        Ok((e.file.clone(), e.access))
    }
}

/// A listing of the directory open as `file`, nothing read yet.
fn start_listing(file: &std::fs::File) -> Result<Listing, i32> {
    if !file.metadata().map_err(|e| errno_of(&e))?.is_dir() {
        return Err(ENOTDIR);
    }
    let dir = Dir::from_std_file(file.try_clone().map_err(|e| errno_of(&e))?);
    Ok(Listing {
        entries: dir.entries().map_err(|e| errno_of(&e))?,
        pending: None,
    })
}

/// std's `Fs` on the host: each method of `hostcall_abi::std_services::Fs` is done
/// here, where a reader finds it.
impl Fs for Files {
    fn openat(&self, dirfd: i32, path: &[u8], flags: i32, mode: u32) -> Result<i32, Errno> {
        let b = self.beneath(dirfd, path)?;
        let f = match fifo_to_wait_on(b.dir(), &b.rel, flags) {
            Some(fifo) => self.open_fifo(&b, fifo, flags)?,
            None => open_beneath(b.dir(), &b.rel, b.access, flags, self.mode_of(mode))
                .map_err(|e| e.map_or(EINVAL, |e| b.errno(&e, &self.log)))?,
        };
        // A FIFO, a terminal or a socket may keep a read or write waiting: it is made
        // non-blocking on the host (its description is the runtime's own) and waited
        // for by readiness, the GPU's own `O_NONBLOCK` kept apart.
        let t = f.metadata().map_err(|e| errno_of(&e))?.file_type();
        if t.is_fifo() || t.is_char_device() || t.is_socket() {
            let fl = rustix::fs::fcntl_getfl(&f).map_err(|e| e.raw_os_error())?;
            rustix::fs::fcntl_setfl(&f, fl | rustix::fs::OFlags::NONBLOCK)
                .map_err(|e| e.raw_os_error())?;
            let nonblocking = flags & hostcall_abi::fcntl::O_NONBLOCK != 0;
            return self
                .table()
                .insert_waitable(f, b.access, nonblocking)
                .map_err(Errno);
        }
        self.table().insert(f, b.access).map_err(Errno)
    }

    /// Closes `fd`: out of the table, then closed outside its lock. Calls other GPU
    /// threads wait in on it, if no other fd refers to its file, answer `EBADF` (Linux
    /// would leave them waiting on a file nothing can make ready).
    fn close(&self, fd: i32) -> Result<(), Errno> {
        if is_stdio(fd) {
            return Ok(());
        }
        let (entry, last) = self.table().remove(fd)?;
        if let Some(token) = last {
            self.reactor.cancel(token, EBADF);
        }
        drop(entry);
        Ok(())
    }

    fn lseek(&self, fd: i32, off: i64, whence: i32) -> Result<i64, Errno> {
        if is_stdio(fd) {
            return Err(Errno(ESPIPE));
        }
        let pos = match whence {
            0 if off >= 0 => SeekFrom::Start(off as u64),
            1 => SeekFrom::Current(off),
            2 => SeekFrom::End(off),
            _ => return Err(Errno(EINVAL)),
        };
        let p = (&*self.file(fd)?).seek(pos).map_err(|e| errno_of(&e))?;
        i64::try_from(p).map_err(|_| Errno(EINVAL))
    }

    fn fstat(&self, fd: i32, out: &mut [u8]) -> Result<(), Errno> {
        if is_stdio(fd) {
            // A character device, as a terminal or pipe would look to std.
            let s = FileStat {
                mode: 0o020620,
                nlink: 1,
                blksize: 4096,
                ..FileStat::default()
            };
            return put_stat(out, s).map_err(Errno);
        }
        let m = Metadata::from_file(&*self.file(fd)?).map_err(|e| errno_of(&e))?;
        put_stat(out, stat_of(&m)).map_err(Errno)
    }

    fn statat(&self, dirfd: i32, path: &[u8], follow: u32, out: &mut [u8]) -> Result<(), Errno> {
        let b = self.beneath(dirfd, path)?;
        let m = if follow != 0 {
            b.dir().metadata(&b.rel)
        } else {
            b.dir().symlink_metadata(&b.rel)
        };
        let m = m.map_err(|e| b.errno(&e, &self.log))?;
        put_stat(out, stat_of(&m)).map_err(Errno)
    }

    fn getcwd(&self, out: &mut [u8]) -> Result<usize, Errno> {
        put_path(out, &self.cwd.path())
    }

    fn chdir(&self, path: &[u8]) -> Result<(), Errno> {
        let to = match self.sandbox.chdir_target(&self.cwd, path)? {
            ChdirTarget::Outside(to) => to,
            ChdirTarget::Beneath(at) => {
                let errno = |e: std::io::Error| at.mount.errno(&e, &self.log);
                // Linux's working directory is the directory itself, links resolved, and
                // `getcwd` names it so.
                let rel = at.mount.dir.canonicalize(&at.rel).map_err(errno)?;
                if !at.mount.dir.metadata(&rel).map_err(errno)?.is_dir() {
                    return Err(Errno(ENOTDIR));
                }
                let search = AccessModes {
                    readable: false,
                    writable: false,
                    executable: true,
                };
                at.mount
                    .dir
                    .access(&rel, AccessType::Access(search))
                    .map_err(errno)?;
                self.sandbox.components_of(at.mount, &rel)
            }
        };
        self.cwd.set(to);
        Ok(())
    }

    fn realpath(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> {
        let at = self.sandbox.resolve(&self.cwd, path)?;
        let rel = at
            .mount
            .dir
            .canonicalize(&at.rel)
            .map_err(|e| at.mount.errno(&e, &self.log))?;
        put_path(out, &self.sandbox.guest_path(at.mount, &rel))
    }

    /// A link's target never names the host above the grant: an absolute one is
    /// answered as its guest path where it lies in a grant, a relative one as it stands
    /// while its `..` components stay in the link's grant; anything else is `EACCES`, as
    /// a path outside the grants is.
    fn readlink(&self, path: &[u8], out: &mut [u8]) -> Result<usize, Errno> {
        if let Some(exe) = self.sandbox.self_exe(&self.cwd, path) {
            return put_link(out, &exe?);
        }
        let at = self.sandbox.resolve(&self.cwd, path)?;
        let errno = |e: std::io::Error| at.mount.errno(&e, &self.log);
        let target = at.mount.dir.read_link_contents(&at.rel).map_err(errno)?;
        let target = if target.is_absolute() {
            self.sandbox
                .guest_of_host(&lexical(&target))
                .ok_or(Errno(EACCES))?
        } else {
            // Counted from the link's own directory, the links on the way to it
            // resolved, as the kernel follows the target.
            let dir = at.rel.parent().filter(|d| !d.as_os_str().is_empty());
            let dir = at.mount.dir.canonicalize(dir.unwrap_or(Path::new(".")));
            let depth = (dir.map_err(errno)?.components())
                .filter(|c| matches!(c, Component::Normal(_)))
                .count();
            if !stays_in_grant(depth, &target) {
                return Err(Errno(EACCES));
            }
            target.into_os_string().into_vec()
        };
        put_link(out, &target)
    }

    fn unlinkat(&self, dirfd: i32, path: &[u8], flags: i32) -> Result<(), Errno> {
        if flags & !AT_REMOVEDIR != 0 {
            return Err(Errno(EINVAL));
        }
        let b = self.beneath(dirfd, path)?;
        b.writable()?;
        let r = if flags != 0 {
            b.dir().remove_dir(&b.rel)
        } else {
            b.dir().remove_file(&b.rel)
        };
        r.map_err(|e| Errno(b.errno(&e, &self.log)))
    }

    fn mkdir(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let at = self.sandbox.resolve(&self.cwd, path)?;
        if at.mount.access == Access::ReadOnly {
            return Err(Errno(EROFS));
        }
        let mut builder = cap_std::fs::DirBuilder::new();
        cap_std::fs::DirBuilderExt::mode(&mut builder, self.mode_of(mode));
        at.mount
            .dir
            .create_dir_with(&at.rel, &builder)
            .map_err(|e| Errno(at.mount.errno(&e, &self.log)))
    }

    fn chmod(&self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let at = self.sandbox.resolve(&self.cwd, path)?;
        if at.mount.access == Access::ReadOnly {
            return Err(Errno(EROFS));
        }
        let m = at
            .mount
            .dir
            .metadata(&at.rel)
            .map_err(|e| at.mount.errno(&e, &self.log))?;
        if self.sandbox.is_mount_root(&m) {
            return Err(Errno(EPERM));
        }
        at.mount
            .dir
            .set_permissions(
                &at.rel,
                Permissions::from_std(std::fs::Permissions::from_mode(self.mode_of(mode))),
            )
            .map_err(|e| Errno(at.mount.errno(&e, &self.log)))
    }

    fn fchmod(&self, fd: i32, mode: u32) -> Result<(), Errno> {
        let (f, access) = self.fd_file(fd)?;
        if access == Access::ReadOnly {
            return Err(Errno(EROFS));
        }
        let m = cap_std::fs::Metadata::from_file(&f).map_err(|e| errno_of(&e))?;
        if self.sandbox.is_mount_root(&m) {
            return Err(Errno(EPERM));
        }
        f.set_permissions(std::fs::Permissions::from_mode(self.mode_of(mode)))
            .map_err(|e| Errno(errno_of(&e)))
    }

    fn rename(&self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        self.rename_or_link(from, to, false).map_err(Errno)
    }

    fn link(&self, existing: &[u8], new: &[u8]) -> Result<(), Errno> {
        self.rename_or_link(existing, new, true).map_err(Errno)
    }

    fn symlink(&self, target: &[u8], link: &[u8]) -> Result<(), Errno> {
        if target.is_empty() {
            return Err(Errno(ENOENT));
        }
        let at = self.sandbox.resolve(&self.cwd, link)?;
        if at.mount.access == Access::ReadOnly {
            return Err(Errno(EROFS));
        }
        let target = Path::new(std::ffi::OsStr::from_bytes(target));
        if !stays_below(target) {
            return Err(Errno(EPERM));
        }
        at.mount
            .dir
            .symlink_contents(target, &at.rel)
            .map_err(|e| Errno(at.mount.errno(&e, &self.log)))
    }

    fn ftruncate(&self, fd: i32, len: i64) -> Result<(), Errno> {
        let (f, _) = self.fd_file(fd)?;
        let len = u64::try_from(len).map_err(|_| Errno(EINVAL))?;
        f.set_len(len).map_err(|e| Errno(errno_of(&e)))
    }

    fn fsync(&self, fd: i32) -> Result<(), Errno> {
        let (f, _) = self.fd_file(fd)?;
        f.sync_all().map_err(|e| Errno(errno_of(&e)))
    }

    fn getdents(&self, fd: i32, out: &mut [u8]) -> Result<usize, Errno> {
        if is_stdio(fd) {
            return Err(Errno(ENOTDIR));
        }
        let (file, listing) = {
            let mut t = self.table();
            let e = t.entry(fd)?;
            (e.file.clone(), e.listing.clone())
        };
        let listing = match listing {
            Some(l) => l,
            None => {
                let started = Arc::new(Mutex::new(start_listing(&file)?));
                let mut t = self.table();
                t.entry(fd)?.listing.get_or_insert(started).clone()
            }
        };
        let mut l = listing.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = 0;
        loop {
            let (ino, kind, name) = match l.pending.take() {
                Some(e) => e,
                None => match l.entries.next() {
                    None => break,
                    Some(Err(e)) if n == 0 => return Err(Errno(errno_of(&e))),
                    Some(Err(_)) => break,
                    Some(Ok(e)) => {
                        let kind = e.file_type().map(kind_of).unwrap_or(kind::DT_UNKNOWN);
                        (e.ino(), kind, e.file_name().into_vec())
                    }
                },
            };
            let r = Record {
                ino,
                kind,
                name: &name,
            };
            match r.encode(&mut out[n..]) {
                Some(len) => n += len,
                None => {
                    l.pending = Some((ino, kind, name));
                    if n == 0 {
                        return Err(Errno(EINVAL));
                    }
                    break;
                }
            }
        }
        Ok(n)
    }

    fn dup(&self, fd: i32) -> Result<i32, Errno> {
        if is_stdio(fd) {
            return Err(Errno(ENOSYS));
        }
        self.table().dup(fd).map_err(Errno)
    }

    fn read(&self, fd: i32, buf: &mut [u8]) -> Result<Filled, Errno> {
        self.read_fd(fd, buf).map(Filled)
    }

    fn write(&self, fd: i32, data: &[u8]) -> Result<usize, Errno> {
        self.write_fd(fd, data)
    }

    fn read_to_device(&self, fd: i32, addr: u64, len: u64) -> Result<usize, Errno> {
        self.read_fd_to_device(fd, addr, len)
    }

    fn write_from_device(&self, fd: i32, addr: u64, len: u64) -> Result<usize, Errno> {
        self.write_fd_from_device(fd, addr, len)
    }
}

fn stat_of(m: &Metadata) -> FileStat {
    FileStat {
        dev: m.dev(),
        ino: m.ino(),
        nlink: m.nlink(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev(),
        size: i64::try_from(m.size()).unwrap_or(i64::MAX),
        blksize: i64::try_from(m.blksize()).unwrap_or(i64::MAX),
        blocks: i64::try_from(m.blocks()).unwrap_or(i64::MAX),
        atime: (m.atime(), m.atime_nsec()),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    }
}

/// Writes `s` into `out` as the x86_64 `struct stat`.
fn put_stat(out: &mut [u8], s: FileStat) -> Result<(), i32> {
    out.get_mut(..STAT_SIZE)
        .ok_or(EINVAL)?
        .copy_from_slice(&s.encode());
    Ok(())
}

/// Writes the path `b` into `out` and returns its length; `ERANGE` when it does not fit,
/// as `getcwd` answers.
/// A link's target into `out`, what fits, as readlink(2) answers: a caller whose
/// buffer it fills tries a larger one.
fn put_link(out: &mut [u8], target: &[u8]) -> Result<usize, Errno> {
    let n = target.len().min(out.len());
    out[..n].copy_from_slice(&target[..n]);
    Ok(n)
}

/// Whether the relative link target `target`, in a directory `depth` components below
/// its grant, stays in the grant as written: no `..` climbs above the grant's root, so
/// no name in it is one of the host's directories above the grant. Judged lexically, as
/// the target is text: a name inside it that is itself a link is read on its own.
fn stays_in_grant(mut depth: usize, target: &Path) -> bool {
    target.components().all(|c| match c {
        Component::ParentDir => depth.checked_sub(1).map(|up| depth = up).is_some(),
        Component::Normal(_) => {
            depth += 1;
            true
        }
        Component::CurDir | Component::RootDir | Component::Prefix(_) => true,
    })
}

/// The absolute host path `path` with `.` and `..` taken lexically (never above `/`),
/// so that a target written through a grant does not pass for one inside it.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn put_path(out: &mut [u8], b: &[u8]) -> Result<usize, Errno> {
    out.get_mut(..b.len())
        .ok_or(Errno(ERANGE))?
        .copy_from_slice(b);
    Ok(b.len())
}
