//! Files and directories. The GPU names files by path and holds descriptors of the
//! runtime's own table: it can never reach a host descriptor other than stdio (0/1/2),
//! and paths resolve only inside directories the embedder pre-opened.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use hostcall_abi::errno::{EACCES, EBADF, EFAULT, EINVAL, EMFILE, ENAMETOOLONG, ENOENT, ESPIPE};
use hostcall_abi::stat::{FileStat, STAT_SIZE};
use hostcall_abi::{DEVICE_WRITE_MAX, Service};

use super::{Call, Handler, Malformed, Reply, Stdio, errno_of};
use crate::module::{DeviceMemory, StreamStop};

/// Linux open(2) flags, as the GPU's libc passes them.
mod flags {
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
    pub const CLOEXEC: i32 = 0o2000000;
    /// Every flag the service understands; others are refused with EINVAL.
    pub const KNOWN: i32 =
        ACCMODE | CREAT | EXCL | NOCTTY | TRUNC | APPEND | LARGEFILE | DIRECTORY | CLOEXEC;
}

/// The GPU's open files. Descriptors start at 3; 0–2 are stdio.
pub(crate) struct FdTable {
    open: HashMap<i32, Arc<File>>,
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

    fn insert(&mut self, f: File) -> Result<i32, i32> {
        if self.open.len() >= self.limit {
            return Err(EMFILE);
        }
        while self.open.contains_key(&self.next) || self.next < 3 {
            self.next = self.next.checked_add(1).unwrap_or(3);
        }
        let fd = self.next;
        self.open.insert(fd, Arc::new(f));
        self.next = fd.checked_add(1).unwrap_or(3);
        Ok(fd)
    }

    fn get(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.open.get(&fd).cloned().ok_or(EBADF)
    }

    fn remove(&mut self, fd: i32) -> Result<(), i32> {
        self.open.remove(&fd).map(drop).ok_or(EBADF)
    }
}

/// The file services and the capabilities they check.
pub(crate) struct Files {
    pub table: Mutex<FdTable>,
    /// Where `WriteFromDevice` reads the GPU's buffers.
    pub device: Arc<dyn DeviceMemory>,
    /// Canonical pre-opened directories: the only places paths may resolve to.
    pub roots: Vec<PathBuf>,
    pub stdio: Stdio,
}

fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

fn to_reply(r: Result<Reply, i32>) -> Reply {
    r.unwrap_or_else(Reply::errno)
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
        size: m.size() as i64,
        blksize: m.blksize() as i64,
        blocks: m.blocks() as i64,
        atime: (m.atime(), m.atime_nsec()),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    }
}

fn put_stat(call: &mut Call<'_>, s: FileStat) -> Reply {
    call.bulk[..STAT_SIZE].copy_from_slice(&s.encode());
    Reply {
        result: 0,
        bulk_out: STAT_SIZE,
    }
}

fn put_path(call: &mut Call<'_>, p: &Path) -> Reply {
    let b = p.as_os_str().as_bytes();
    if b.len() > call.bulk.len() {
        return Reply::errno(ENAMETOOLONG);
    }
    call.bulk[..b.len()].copy_from_slice(b);
    Reply::bytes(b.len())
}

impl Files {
    /// Resolves a GPU path to a host path inside a pre-opened directory. With
    /// `follow_last`, the result is fully canonical; otherwise the last component is kept
    /// as named (for `lstat`/`readlink`). A missing last component is allowed only when
    /// `may_create`. Paths outside every root fail with `EACCES` whether or not they exist.
    fn authorize(&self, raw: &[u8], follow_last: bool, may_create: bool) -> Result<PathBuf, i32> {
        if raw.is_empty() {
            return Err(ENOENT);
        }
        let named = Path::new(OsStr::from_bytes(raw));
        let abs = if named.is_absolute() {
            named.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| errno_of(&e))?
                .join(named)
        };
        let inside = |p: &Path| self.roots.iter().any(|r| p.starts_with(r));
        if follow_last && let Ok(c) = abs.canonicalize() {
            return if inside(&c) { Ok(c) } else { Err(EACCES) };
        }
        let (Some(parent), Some(Component::Normal(name))) =
            (abs.parent(), abs.components().next_back())
        else {
            return Err(EACCES);
        };
        match parent.canonicalize() {
            Ok(dir) if inside(&dir) => {
                let full = dir.join(name);
                if follow_last && !may_create && !full.exists() {
                    return Err(ENOENT);
                }
                Ok(full)
            }
            Ok(_) => Err(EACCES),
            Err(e) => {
                // Reveal "not found" only for places inside a root.
                let known = parent.ancestors().find_map(|a| a.canonicalize().ok());
                match known {
                    Some(k) if inside(&k) => Err(errno_of(&e)),
                    _ => Err(EACCES),
                }
            }
        }
    }

    fn open(&self, call: &mut Call<'_>) -> Result<Result<Reply, i32>, Malformed> {
        let (fl, mode, n) = (call.args[0] as i32, call.args[1] as u32, call.len_arg(2)?);
        if fl & !flags::KNOWN != 0 {
            return Ok(Err(EINVAL));
        }
        Ok((|| {
            let path = self.authorize(&call.bulk[..n], true, fl & flags::CREAT != 0)?;
            let acc = fl & flags::ACCMODE;
            let mut o = OpenOptions::new();
            o.read(acc != flags::WRONLY)
                .write(acc == flags::WRONLY || acc == flags::RDWR)
                .append(fl & flags::APPEND != 0)
                .truncate(fl & flags::TRUNC != 0)
                .mode(mode);
            if fl & flags::CREAT != 0 {
                if fl & flags::EXCL != 0 {
                    o.create_new(true);
                } else {
                    o.create(true);
                }
            }
            let f = o.open(&path).map_err(|e| errno_of(&e))?;
            let fd = self
                .table
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(f)?;
            Ok(Reply::value(fd as i64))
        })())
    }

    fn file(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).get(fd)
    }

    fn write(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (fd, n) = (call.fd_arg(0), call.len_arg(1)?);
        let data = &call.bulk[..n];
        let r = match fd {
            1 | 2 => self.stdio.write(fd, data).map_err(|e| errno_of(&e)),
            0 => Err(EBADF),
            _ => self
                .file(fd)
                .and_then(|f| (&*f).write(data).map_err(|e| errno_of(&e))),
        };
        Ok(to_reply(r.map(|w| Reply::value(w as i64))))
    }

    /// `WriteFromDevice`: the bytes are in GPU global memory; the device copies them out
    /// by DMA, piece by piece, and each piece is written as it arrives.
    fn write_from_device(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (fd, addr, len) = (call.fd_arg(0), call.args[1], call.args[2]);
        if len > DEVICE_WRITE_MAX {
            return Err(Malformed(format!(
                "{len} bytes, over the {DEVICE_WRITE_MAX}-byte limit"
            )));
        }
        if fd == 0 {
            return Ok(Reply::errno(EBADF));
        }
        let file = if is_stdio(fd) {
            None
        } else {
            match self.file(fd) {
                Ok(f) => Some(f),
                Err(e) => return Ok(Reply::errno(e)),
            }
        };
        let (done, stop) = self.device.stream(addr, len, &mut |piece| match &file {
            None => self.stdio.write(fd, piece).map(drop),
            Some(f) => (&**f).write_all(piece),
        });
        Ok(match stop {
            Some(StreamStop::Copy(e)) => {
                log::warn!("WriteFromDevice: copying {len} bytes at {addr:#x}: {e}");
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

    fn read(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (fd, n) = (call.fd_arg(0), call.len_arg(1)?);
        let buf = &mut call.bulk[..n];
        let r = match fd {
            0 => self.stdio.read(buf).map_err(|e| errno_of(&e)),
            1 | 2 => Err(EBADF),
            _ => self
                .file(fd)
                .and_then(|f| (&*f).read(buf).map_err(|e| errno_of(&e))),
        };
        Ok(to_reply(r.map(Reply::bytes)))
    }

    fn lseek(&self, call: &mut Call<'_>) -> Reply {
        let (fd, off, whence) = (call.fd_arg(0), call.args[1] as i64, call.args[2] as i32);
        if is_stdio(fd) {
            return Reply::errno(ESPIPE);
        }
        let pos = match whence {
            0 if off >= 0 => SeekFrom::Start(off as u64),
            1 => SeekFrom::Current(off),
            2 => SeekFrom::End(off),
            _ => return Reply::errno(EINVAL),
        };
        to_reply(self.file(fd).and_then(|f| {
            (&*f)
                .seek(pos)
                .map(|p| Reply::value(p as i64))
                .map_err(|e| errno_of(&e))
        }))
    }

    fn fstat(&self, call: &mut Call<'_>) -> Reply {
        let fd = call.fd_arg(0);
        if is_stdio(fd) {
            // A character device, as a terminal or pipe would look to std.
            let s = FileStat {
                mode: 0o020620,
                nlink: 1,
                blksize: 4096,
                ..FileStat::default()
            };
            return put_stat(call, s);
        }
        match self
            .file(fd)
            .and_then(|f| f.metadata().map_err(|e| errno_of(&e)))
        {
            Ok(m) => put_stat(call, stat_of(&m)),
            Err(e) => Reply::errno(e),
        }
    }

    fn stat(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        let (n, follow) = (call.len_arg(0)?, call.args[1] != 0);
        let r = self
            .authorize(&call.bulk[..n], follow, false)
            .and_then(|p| {
                let m = if follow {
                    p.metadata()
                } else {
                    p.symlink_metadata()
                };
                m.map_err(|e| errno_of(&e))
            });
        Ok(match r {
            Ok(m) => put_stat(call, stat_of(&m)),
            Err(e) => Reply::errno(e),
        })
    }

    fn path_service(&self, call: &mut Call<'_>, service: Service) -> Result<Reply, Malformed> {
        if service == Service::Getcwd {
            return Ok(match std::env::current_dir() {
                Ok(d) => put_path(call, &d),
                Err(e) => Reply::errno(errno_of(&e)),
            });
        }
        let n = call.len_arg(0)?;
        let follow = service == Service::Realpath;
        let r = self
            .authorize(&call.bulk[..n], follow, false)
            .and_then(|p| {
                if follow {
                    Ok(p)
                } else {
                    std::fs::read_link(&p).map_err(|e| errno_of(&e))
                }
            });
        Ok(match r {
            Ok(p) => put_path(call, &p),
            Err(e) => Reply::errno(e),
        })
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
        match service {
            Service::Write => self.write(call),
            Service::WriteFromDevice => self.write_from_device(call),
            Service::WritePosted => {
                let (fd, n, ticket) = (call.fd_arg(0), call.len_arg(1)?, call.args[2]);
                if fd != 1 && fd != 2 {
                    return Err(Malformed(format!(
                        "posted write to fd {fd}: only 1 and 2 take them"
                    )));
                }
                if let Err(e) = self.stdio.write_posted(fd, ticket, &call.bulk[..n]) {
                    log::warn!("posted write to fd {fd}: {e}");
                }
                Ok(Reply::value(n as i64))
            }
            Service::Read => self.read(call),
            Service::Open => Ok(to_reply(self.open(call)?)),
            Service::Close => {
                let fd = call.fd_arg(0);
                Ok(if is_stdio(fd) {
                    Reply::value(0)
                } else {
                    let r = self
                        .table
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(fd);
                    to_reply(r.map(|()| Reply::value(0)))
                })
            }
            Service::Lseek => Ok(self.lseek(call)),
            Service::Fstat => Ok(self.fstat(call)),
            Service::Stat => self.stat(call),
            Service::Getcwd | Service::Realpath | Service::Readlink => {
                self.path_service(call, service)
            }
            other => Err(Malformed(format!("{} is not a file service", other.name()))),
        }
    }
}
