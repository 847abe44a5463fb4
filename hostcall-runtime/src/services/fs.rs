//! Files and directories. The GPU names files by path and holds descriptors of the
//! runtime's own table: it can never reach a host descriptor other than stdio (0/1/2),
//! and paths resolve only inside directories the embedder pre-opened.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::{Arc, Mutex};

use cap_fs_ext::OpenOptionsFollowExt;
use cap_std::fs::{Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use hostcall_abi::errno::{
    EACCES, EAGAIN, EBADF, EFAULT, EINVAL, EMFILE, ENAMETOOLONG, ENOTDIR, EROFS, ESPIPE,
};
use hostcall_abi::stat::{FileStat, STAT_SIZE};
use hostcall_abi::{DEVICE_WRITE_MAX, POSTED_WAITS, Service};

use super::sandbox::{Access, Sandbox};
use super::stdio::PostedError;
use super::{Call, Handler, Malformed, Reply, Stdio, errno_of};
use crate::guest_log::{GuestLog, Kind};
use crate::module::{DeviceMemory, StreamStop};

/// Linux open(2) flags, as the GPU's libc passes them.
pub(crate) mod flags {
    pub const ACCMODE: i32 = 0o3;
    pub const WRONLY: i32 = 0o1;
    pub const RDWR: i32 = 0o2;
    pub const CREAT: i32 = 0o100;
    pub const EXCL: i32 = 0o200;
    pub const NOCTTY: i32 = 0o400;
    pub const TRUNC: i32 = 0o1000;
    pub const APPEND: i32 = 0o2000;
    pub const LARGEFILE: i32 = 0o100000;
    pub const DIRECTORY: i32 = 0o200000;
    pub const NOFOLLOW: i32 = 0o400000;
    pub const CLOEXEC: i32 = 0o2000000;
    /// Every flag the service understands; others are refused with EINVAL.
    pub const KNOWN: i32 = ACCMODE
        | CREAT
        | EXCL
        | NOCTTY
        | TRUNC
        | APPEND
        | LARGEFILE
        | DIRECTORY
        | NOFOLLOW
        | CLOEXEC;
}

/// One open file of the GPU's.
pub(crate) struct OpenFile {
    pub file: Arc<File>,
    /// The access of the mount it was opened in: a directory opened read-only stays so
    /// for the `*at` calls made through it.
    pub access: Access,
    /// For a directory being listed (`Getdents`): where the listing stands.
    pub listing: Option<Arc<Mutex<Listing>>>,
}

/// A directory being listed: read from the file system as the GPU asks for entries, so
/// a listing holds one read buffer and at most one entry that did not fit the last call,
/// whatever the directory's size.
pub(crate) struct Listing {
    pub entries: cap_std::fs::ReadDir,
    /// Inode, `d_type` and name of the entry the last call had no room for.
    pub pending: Option<(u64, u8, Vec<u8>)>,
}

/// The GPU's open files. Descriptors start at 3; 0–2 are stdio.
pub(crate) struct FdTable {
    open: HashMap<i32, OpenFile>,
    next: i32,
    limit: usize,
}

impl FdTable {
    /// An empty table allowing `limit` open files.
    pub fn new(limit: usize) -> FdTable {
        FdTable {
            open: HashMap::new(),
            next: 3,
            limit,
        }
    }

    pub(crate) fn insert(&mut self, f: File, access: Access) -> Result<i32, i32> {
        if self.open.len() >= self.limit {
            return Err(EMFILE);
        }
        while self.open.contains_key(&self.next) || self.next < 3 {
            self.next = self.next.checked_add(1).unwrap_or(3);
        }
        let fd = self.next;
        self.open.insert(
            fd,
            OpenFile {
                file: Arc::new(f),
                access,
                listing: None,
            },
        );
        self.next = fd.checked_add(1).unwrap_or(3);
        Ok(fd)
    }

    fn get(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.open.get(&fd).map(|o| o.file.clone()).ok_or(EBADF)
    }

    /// The open file `fd`, to change its state.
    pub(crate) fn entry(&mut self, fd: i32) -> Result<&mut OpenFile, i32> {
        self.open.get_mut(&fd).ok_or(EBADF)
    }

    fn remove(&mut self, fd: i32) -> Result<(), i32> {
        self.open.remove(&fd).map(drop).ok_or(EBADF)
    }

    /// The host files open now (for checks that every one lies under a mount).
    #[cfg(feature = "fuzzing")]
    pub fn files(&self) -> Vec<Arc<File>> {
        self.open.values().map(|o| o.file.clone()).collect()
    }
}

/// The file services and the capabilities they check.
pub(crate) struct Files {
    pub table: Mutex<FdTable>,
    /// Where `WriteFromDevice` reads the GPU's buffers.
    pub device: Arc<dyn DeviceMemory>,
    /// The mounts and the virtual cwd: the only places paths resolve to.
    pub sandbox: Arc<Sandbox>,
    pub stdio: Stdio,
    /// The launch's GPU-caused log lines.
    pub log: Arc<GuestLog>,
    /// The permission bits the GPU may give a file or directory: [`MODES_DEFAULT`]
    /// unless the embedder allows group and other write.
    pub modes: u32,
}

/// Permission bits the GPU may set by default: no group or other write, so nothing it
/// creates or changes is writable by other users of the host (the process's umask is
/// not relied on: `chmod` ignores it, and it may be 0).
pub(crate) const MODES_DEFAULT: u32 = 0o755;

pub(crate) fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

pub(crate) fn to_reply(r: Result<Reply, i32>) -> Reply {
    r.unwrap_or_else(Reply::errno)
}

pub(crate) fn stat_of(m: &Metadata) -> FileStat {
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

pub(crate) fn put_stat(call: &mut Call<'_>, s: FileStat) -> Reply {
    if call.out.len() < STAT_SIZE {
        return Reply::errno(EINVAL);
    }
    call.out[..STAT_SIZE].copy_from_slice(&s.encode());
    Reply {
        result: 0,
        bulk_out: STAT_SIZE,
    }
}

fn put_path(call: &mut Call<'_>, b: &[u8]) -> Reply {
    if b.len() > call.out.len() {
        return Reply::errno(ENAMETOOLONG);
    }
    call.out[..b.len()].copy_from_slice(b);
    Reply::bytes(b.len())
}

/// Opens `rel` beneath `dir` with Linux open(2) `flags` and `mode` as the GPU passed
/// them. `Err(None)`: flags the service refuses (`EINVAL`); `Err(Some(e))`: the
/// refusal of the OS, or `EROFS` for a write in a read-only mount.
pub(crate) fn open_beneath(
    dir: &cap_std::fs::Dir,
    rel: &std::path::Path,
    access: Access,
    flags: u64,
    mode: u64,
) -> Result<File, Option<std::io::Error>> {
    let (fl, mode) = (flags as i32, mode as u32);
    if flags > u32::MAX as u64 || fl & !flags::KNOWN != 0 {
        return Err(None);
    }
    let acc = fl & flags::ACCMODE;
    let writes = acc == flags::WRONLY || acc == flags::RDWR;
    let creates = fl & flags::CREAT != 0;
    if access == Access::ReadOnly && (writes || creates || fl & (flags::TRUNC | flags::APPEND) != 0)
    {
        return Err(Some(std::io::Error::from_raw_os_error(EROFS)));
    }
    let mut o = OpenOptions::new();
    o.read(acc != flags::WRONLY)
        .write(writes)
        .append(fl & flags::APPEND != 0)
        .truncate(fl & flags::TRUNC != 0)
        // Permission bits only: never setuid, setgid or sticky on the host.
        .mode(mode & 0o777);
    if fl & flags::NOFOLLOW != 0 {
        // A link as the last component is refused (ELOOP), as std's remove_dir_all
        // relies on to never follow a link it meets.
        o.follow(cap_fs_ext::FollowSymlinks::No);
    }
    if creates {
        if fl & flags::EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    let f = dir.open_with(rel, &o).map_err(Some)?.into_std();
    if fl & flags::DIRECTORY != 0 && !f.metadata().map_err(Some)?.is_dir() {
        return Err(Some(std::io::Error::from_raw_os_error(ENOTDIR)));
    }
    Ok(f)
}

impl Files {
    fn open(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let at = self.sandbox.resolve(call.input)?;
        let (fl, mode) = (call.args[0], self.mode_of(call.args[1]) as u64);
        let f = open_beneath(&at.mount.dir, &at.rel, at.mount.access, fl, mode)
            .map_err(|e| e.map_or(EINVAL, |e| at.mount.errno(&e, &self.log)))?;
        let fd = self.table().insert(f, at.mount.access)?;
        Ok(Reply::value(fd as i64))
    }

    /// The fd table, locked (a panic elsewhere cannot poison it for good).
    pub(crate) fn table(&self) -> std::sync::MutexGuard<'_, FdTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The permission bits the GPU may set of those it asked for (`modes`).
    pub(crate) fn mode_of(&self, asked: u64) -> u32 {
        asked as u32 & self.modes
    }

    /// Closes every file the GPU has open (its run ended).
    pub(crate) fn close_all(&self) {
        let open = std::mem::take(&mut self.table().open);
        drop(open);
    }

    pub(crate) fn file(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.table().get(fd)
    }

    fn write(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let data = call.input;
        let w = match call.fd_arg(0)? {
            fd @ (1 | 2) => self.stdio.write(fd, data).map_err(|e| errno_of(&e))?,
            0 => return Err(EBADF),
            fd => (&*self.file(fd)?).write(data).map_err(|e| errno_of(&e))?,
        };
        Ok(Reply::value(w as i64))
    }

    /// `WriteFromDevice`: the bytes are in GPU global memory; the device copies them out
    /// by DMA, piece by piece, and each piece is written as it arrives.
    fn write_from_device(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (addr, len) = (call.args[1], call.args[2]);
        if len > DEVICE_WRITE_MAX {
            return Err(Malformed(format!(
                "{len} bytes, over the {DEVICE_WRITE_MAX}-byte limit"
            )));
        }
        if addr.checked_add(len).is_none() {
            return Err(Malformed(format!(
                "{len} bytes at {addr:#x} run past the end of the address space"
            )));
        }
        let fd = match call.fd_arg(0) {
            Ok(0) | Err(_) => return Ok(Reply::errno(EBADF)),
            Ok(fd) => fd,
        };
        let file = if is_stdio(fd) {
            None
        } else {
            match self.file(fd) {
                Ok(f) => Some(f),
                Err(e) => return Ok(Reply::errno(e)),
            }
        };
        let (done, stop) = if file.is_none() && call.args[4] == POSTED_WAITS {
            // Output in ticket order, streamed in its turn and never held.
            let ticket = call.args[3];
            match self
                .stdio
                .at_turn(fd, ticket, |sink| self.device.stream(addr, len, sink))
            {
                Ok(streamed) => streamed,
                Err(PostedError::NotYet { .. }) => return Ok(Reply::errno(EAGAIN)),
                Err(e) => return Err(Malformed(format!("ordered write to fd {fd}: {e}"))),
            }
        } else {
            self.device.stream(addr, len, &mut |piece| match &file {
                None => self.stdio.write(fd, piece).map(drop),
                Some(f) => (&**f).write_all(piece),
            })
        };
        Ok(match stop {
            Some(StreamStop::Copy(e)) => {
                self.log.warn(
                    Kind::Io,
                    format_args!("WriteFromDevice: copying {len} bytes at {addr:#x}: {e}"),
                );
                if done == 0 {
                    Reply::errno(EFAULT)
                } else {
                    Reply::value(done as i64)
                }
            }
            Some(StreamStop::Sink(e)) if done == 0 => Reply::errno(errno_of(&e)),
            _ => Reply::value(done as i64),
        })
    }

    fn read(&self, call: &mut Call<'_>) -> Result<Result<Reply, i32>, Malformed> {
        let n = call.len_arg(1)?;
        let fd = call.fd_arg(0);
        let buf = &mut call.out[..n];
        Ok((|| {
            let r = match fd? {
                0 => self.stdio.read(buf),
                1 | 2 => return Err(EBADF),
                fd => (&*self.file(fd)?).read(buf),
            };
            r.map(Reply::bytes).map_err(|e| errno_of(&e))
        })())
    }

    fn lseek(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let (fd, off) = (call.fd_arg(0)?, call.args[1] as i64);
        if is_stdio(fd) {
            return Err(ESPIPE);
        }
        let pos = match call.args[2] {
            0 if off >= 0 => SeekFrom::Start(off as u64),
            1 => SeekFrom::Current(off),
            2 => SeekFrom::End(off),
            _ => return Err(EINVAL),
        };
        let p = (&*self.file(fd)?).seek(pos).map_err(|e| errno_of(&e))?;
        i64::try_from(p).map(Reply::value).map_err(|_| EINVAL)
    }

    fn fstat(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let fd = call.fd_arg(0)?;
        if is_stdio(fd) {
            // A character device, as a terminal or pipe would look to std.
            let s = FileStat {
                mode: 0o020620,
                nlink: 1,
                blksize: 4096,
                ..FileStat::default()
            };
            return Ok(put_stat(call, s));
        }
        let m = Metadata::from_file(&*self.file(fd)?).map_err(|e| errno_of(&e))?;
        Ok(put_stat(call, stat_of(&m)))
    }

    fn stat(&self, call: &mut Call<'_>) -> Result<Reply, i32> {
        let at = self.sandbox.resolve(call.input)?;
        let m = if call.args[1] != 0 {
            at.mount.dir.metadata(&at.rel)
        } else {
            at.mount.dir.symlink_metadata(&at.rel)
        };
        let m = m.map_err(|e| at.mount.errno(&e, &self.log))?;
        Ok(put_stat(call, stat_of(&m)))
    }

    fn path_service(&self, call: &mut Call<'_>, service: Service) -> Result<Reply, i32> {
        use std::os::unix::ffi::OsStrExt;
        if service == Service::Getcwd {
            return Ok(put_path(call, &self.sandbox.cwd()));
        }
        let at = self.sandbox.resolve(call.input)?;
        let path = if service == Service::Realpath {
            let rel = at
                .mount
                .dir
                .canonicalize(&at.rel)
                .map_err(|e| at.mount.errno(&e, &self.log))?;
            self.sandbox.guest_path(at.mount, &rel)
        } else {
            let target = at
                .mount
                .dir
                .read_link_contents(&at.rel)
                .map_err(|e| at.mount.errno(&e, &self.log))?;
            if target.is_absolute() {
                // A host path: answered as the guest path where it lies in a mount, and
                // not at all elsewhere.
                self.sandbox.guest_of_host(&target).ok_or(EACCES)?
            } else {
                target.as_os_str().as_bytes().to_vec()
            }
        };
        Ok(put_path(call, &path))
    }
}

impl Handler for Files {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let Some(service) = Service::from_id(call.service) else {
            return Err(Malformed(format!(
                "service {} is not a file service",
                call.service
            )));
        };
        Ok(match service {
            Service::Write => to_reply(self.write(call)),
            Service::WriteFromDevice => self.write_from_device(call)?,
            Service::WritePosted => {
                let fd = call.fd_arg(0).unwrap_or(-1);
                if fd != 1 && fd != 2 {
                    return Err(Malformed(format!(
                        "posted write to fd {}: only 1 and 2 take them",
                        call.args[0]
                    )));
                }
                let waits = call.args[3] == POSTED_WAITS;
                match self.stdio.write_posted(fd, call.args[2], call.input, waits) {
                    Ok(()) => Reply::value(call.input.len() as i64),
                    Err(PostedError::Full { .. }) if waits => Reply::errno(EAGAIN),
                    Err(e) => return Err(Malformed(format!("posted write to fd {fd}: {e}"))),
                }
            }
            Service::Read => to_reply(self.read(call)?),
            Service::Open => to_reply(self.open(call)),
            Service::Close => to_reply(call.fd_arg(0).and_then(|fd| {
                if !is_stdio(fd) {
                    self.table().remove(fd)?;
                }
                Ok(Reply::value(0))
            })),
            Service::Lseek => to_reply(self.lseek(call)),
            Service::Fstat => to_reply(self.fstat(call)),
            Service::Stat => to_reply(self.stat(call)),
            Service::Getcwd | Service::Realpath | Service::Readlink => {
                to_reply(self.path_service(call, service))
            }
            Service::OpenAt => to_reply(self.open_at(call)),
            Service::StatAt => to_reply(self.stat_at(call)),
            Service::UnlinkAt => to_reply(self.unlink_at(call)),
            Service::Mkdir => to_reply(self.mkdir(call)),
            Service::Chmod => to_reply(self.chmod(call)),
            Service::Rename | Service::Link | Service::Symlink => {
                to_reply(self.two_paths(call, service))
            }
            Service::Fchmod => to_reply(self.fchmod(call)),
            Service::Ftruncate => to_reply(self.ftruncate(call)),
            Service::Fsync => to_reply(self.fsync(call)),
            Service::Getdents => {
                let room = call.len_arg(1)?;
                to_reply(self.getdents(call, room))
            }
            other => return Err(Malformed(format!("{} is not a file service", other.name()))),
        })
    }

    fn can_block(&self, service: u32) -> bool {
        // Anything that touches a file system or stdin: resolving a path may wait on a
        // slow file system, opening a FIFO waits for its other end, reading stdin waits
        // for a human, and 64 MiB into a file holds up every other port.
        use Service::*;
        matches!(
            Service::from_id(service),
            Some(
                Open | Stat
                    | Realpath
                    | Readlink
                    | Read
                    | Write
                    | WriteFromDevice
                    | OpenAt
                    | StatAt
                    | UnlinkAt
                    | Mkdir
                    | Chmod
                    | Rename
                    | Link
                    | Symlink
                    | Fchmod
                    | Ftruncate
                    | Fsync
                    | Getdents
            )
        )
    }

    fn may_block(&self, service: u32, args: &[u64; 6]) -> bool {
        // Of those, only writes to stdout and stderr stay on the polling threads.
        let fd = i32::try_from(args[0] as i64).unwrap_or(-1);
        match Service::from_id(service) {
            Some(Service::Read) => fd != 1 && fd != 2,
            Some(Service::Write | Service::WriteFromDevice) => !is_stdio(fd),
            _ => true,
        }
    }
}
