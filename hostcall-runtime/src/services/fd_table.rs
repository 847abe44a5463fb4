//! The GPU process's open files: the runtime's own table of descriptors, shared by the
//! file and socket services (and by the launches of a run over several GPUs). The GPU
//! can never reach a host descriptor through it: fds start at 3, 0–2 are stdio.
//!
//! The table is locked only to look an entry up, enter or take one: no I/O, no close
//! happens under its lock (a write to a full pipe, a close that lingers, would hold up
//! every other file call). A caller takes what it needs ([`Handle`]) and lets go.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hostcall_abi::errno::{EBADF, EMFILE, ENOTSOCK, EPIPE};

use super::sandbox::Access;

/// One open file of the GPU's.
pub(crate) struct OpenFile {
    pub file: Arc<File>,
    /// The access of the mount it was opened in: a directory opened read-only stays so
    /// for the `*at` calls made through it.
    pub access: Access,
    /// For a directory being listed (`Fs.getdents`): where the listing stands.
    pub listing: Option<Arc<Mutex<Listing>>>,
    /// A socket (`services::net`): counted against the socket limit and written with
    /// `MSG_NOSIGNAL`.
    pub socket: bool,
    /// For a socket, a pipe or a terminal: non-blocking on the host, waited for by
    /// readiness (`services::wait`). Shared by the fd's duplicates, as Linux shares an
    /// open file description's flags.
    pub wait: Option<Arc<Waitable>>,
}

/// A directory being listed: read from the file system as the GPU asks for entries, so
/// a listing holds one read buffer and at most one entry that did not fit the last call,
/// whatever the directory's size.
pub(crate) struct Listing {
    pub entries: cap_std::fs::ReadDir,
    /// Inode, `d_type` and name of the entry the last call had no room for.
    pub pending: Option<(u64, u8, Vec<u8>)>,
}

/// The state of an fd that is waited for by readiness: its key in the reactor, and the
/// flags and options the GPU set on it, which the host emulates over its own
/// non-blocking fd (a call that would block on Linux waits in the reactor instead).
#[derive(Debug)]
pub(crate) struct Waitable {
    /// The reactor's key for the file.
    pub token: u64,
    /// `O_NONBLOCK` as the GPU set it: a call that is not ready answers `EAGAIN`.
    pub nonblocking: AtomicBool,
    /// `SO_RCVTIMEO` and `SO_SNDTIMEO` as the GPU set them.
    pub timeouts: Mutex<[Option<Duration>; 2]>,
    /// `SO_LINGER` as the GPU set it (a time is recorded, never applied: the host's
    /// close must not wait).
    pub linger: Mutex<Option<Duration>>,
}

/// A FIFO a pool thread is opening: an open that waits for the FIFO's other end, which
/// may never come. Held by its opener and, until the open returns, by the table, so that
/// the run's end can end the wait whatever the FIFO is named by then (renamed, unlinked).
pub(crate) struct FifoOpen {
    /// The FIFO itself: an `O_PATH` handle, resolved beneath a grant as any open is,
    /// which reaches the same FIFO whatever its name becomes and grants no access.
    fifo: OwnedFd,
    /// Both of its ends, opened by the run's end ([`FifoOpen::release`]) and closed with
    /// the last holder, once the open has returned: an open that had not yet begun to
    /// wait when the run ended then finds them and returns too.
    release: Mutex<Option<OwnedFd>>,
}

impl FifoOpen {
    /// An open of the FIFO `fifo` (an `O_PATH` handle).
    pub fn new(fifo: OwnedFd) -> Arc<FifoOpen> {
        Arc::new(FifoOpen {
            fifo,
            release: Mutex::new(None),
        })
    }

    /// Opens the FIFO with `flags` (`O_CLOEXEC` added), through its handle: waits for
    /// its other end as the open asks. The kernel checks the FIFO's permissions as for
    /// any open; `flags` must grant no more than the FIFO's mount does.
    pub fn open(&self, flags: rustix::fs::OFlags) -> std::io::Result<File> {
        Ok(File::from(reopen(&self.fifo, flags)?))
    }

    /// Ends the wait: opens the FIFO for reading and writing, non-blocking (such an open
    /// never waits, and is the other end that a waiting open of either kind waits for),
    /// and holds it while anyone holds this open.
    pub fn release(&self) {
        use rustix::fs::OFlags;
        match reopen(&self.fifo, OFlags::RDWR | OFlags::NONBLOCK) {
            Ok(both) => *self.release.lock().unwrap_or_else(|p| p.into_inner()) = Some(both),
            Err(e) => log::warn!("opening a FIFO to end an open waiting on it: {e}"),
        }
    }
}

/// A new open file description of the file `handle` refers to, through its link in
/// `/proc/self/fd` (what reaches the file itself, not a name of it), with `flags` and
/// `O_CLOEXEC`.
fn reopen(handle: &OwnedFd, flags: rustix::fs::OFlags) -> rustix::io::Result<OwnedFd> {
    let link = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let flags = flags | rustix::fs::OFlags::CLOEXEC;
    rustix::fs::open(link, flags, rustix::fs::Mode::empty())
}

/// A reactor key no other file of the process has.
pub(crate) fn new_token() -> u64 {
    static TOKENS: AtomicU64 = AtomicU64::new(1);
    TOKENS.fetch_add(1, Relaxed)
}

/// Which of a [`Waitable`]'s timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Receive = 0,
    Send = 1,
}

impl Waitable {
    /// A waitable fd's state: a fresh reactor key, `nonblocking` as the GPU asked.
    pub fn new(nonblocking: bool) -> Arc<Waitable> {
        Arc::new(Waitable {
            token: new_token(),
            nonblocking: AtomicBool::new(nonblocking),
            timeouts: Mutex::default(),
            linger: Mutex::default(),
        })
    }

    /// Whether a call that is not ready answers `EAGAIN` rather than waiting.
    pub fn nonblocking(&self) -> bool {
        self.nonblocking.load(Relaxed)
    }

    /// The GPU's timeout for calls in direction `d`.
    pub fn timeout(&self, d: Direction) -> Option<Duration> {
        self.timeouts.lock().unwrap_or_else(|p| p.into_inner())[d as usize]
    }

    /// Sets the GPU's timeout for calls in direction `d`.
    pub fn set_timeout(&self, d: Direction, t: Option<Duration>) {
        self.timeouts.lock().unwrap_or_else(|p| p.into_inner())[d as usize] = t;
    }
}

/// What a call needs of an open fd, taken out of the table so that the call runs
/// without its lock.
pub(crate) struct Handle {
    pub file: Arc<File>,
    pub socket: bool,
    pub wait: Option<Arc<Waitable>>,
}

/// The GPU's open files and sockets.
pub(crate) struct FdTable {
    open: HashMap<i32, OpenFile>,
    next: i32,
    limit: usize,
    /// How many of them may be sockets.
    socket_limit: usize,
    /// FIFOs a pool thread is opening now, by key: an open that waits for the FIFO's
    /// other end, perhaps for ever. The run's end releases each
    /// ([`FdTable::release_opens`]), so that the waiting open returns and no thread is
    /// left behind in it.
    fifo_opens: HashMap<u64, Arc<FifoOpen>>,
    /// Whether the run has ended ([`FdTable::release_opens`]).
    ended: bool,
}

impl FdTable {
    /// An empty table allowing `limit` open files, of which `socket_limit` sockets.
    pub fn new(limit: usize, socket_limit: usize) -> FdTable {
        FdTable {
            open: HashMap::new(),
            next: 3,
            limit,
            socket_limit,
            fifo_opens: HashMap::new(),
            ended: false,
        }
    }

    /// Enters a file (or directory) opened in a mount of `access`.
    pub fn insert(&mut self, f: File, access: Access) -> Result<i32, i32> {
        self.insert_entry(OpenFile {
            file: Arc::new(f),
            access,
            listing: None,
            socket: false,
            wait: None,
        })
    }

    /// Enters a pipe or terminal, already non-blocking on the host; `nonblocking` is
    /// the GPU's own `O_NONBLOCK`.
    pub fn insert_waitable(
        &mut self,
        f: File,
        access: Access,
        nonblocking: bool,
    ) -> Result<i32, i32> {
        self.insert_entry(OpenFile {
            file: Arc::new(f),
            access,
            listing: None,
            socket: false,
            wait: Some(Waitable::new(nonblocking)),
        })
    }

    /// Enters a socket, already non-blocking on the host; `nonblocking` is the GPU's own
    /// `O_NONBLOCK`. `EMFILE` past the socket limit, as past the open-file one.
    pub fn insert_socket(&mut self, f: File, nonblocking: bool) -> Result<i32, i32> {
        self.socket_room()?;
        self.insert_entry(OpenFile {
            file: Arc::new(f),
            access: Access::ReadWrite,
            listing: None,
            socket: true,
            wait: Some(Waitable::new(nonblocking)),
        })
    }

    /// A second fd for the open file `fd`: the same host file (and offset, and flags),
    /// the same listing of a directory; a socket's counts as a socket.
    pub fn dup(&mut self, fd: i32) -> Result<i32, i32> {
        let o = self.open.get(&fd).ok_or(EBADF)?;
        let entry = OpenFile {
            file: o.file.clone(),
            access: o.access,
            listing: o.listing.clone(),
            socket: o.socket,
            wait: o.wait.clone(),
        };
        if entry.socket {
            self.socket_room()?;
        }
        self.insert_entry(entry)
    }

    /// Whether one more socket may open now (asked before the host makes one).
    pub fn socket_room(&self) -> Result<(), i32> {
        let sockets = self.open.values().filter(|o| o.socket).count();
        if sockets >= self.socket_limit || self.open.len() >= self.limit {
            return Err(EMFILE);
        }
        Ok(())
    }

    fn insert_entry(&mut self, entry: OpenFile) -> Result<i32, i32> {
        if self.open.len() >= self.limit {
            return Err(EMFILE);
        }
        while self.open.contains_key(&self.next) || self.next < 3 {
            self.next = self.next.checked_add(1).unwrap_or(3);
        }
        let fd = self.next;
        self.open.insert(fd, entry);
        self.next = fd.checked_add(1).unwrap_or(3);
        Ok(fd)
    }

    /// What a call on `fd` needs.
    pub fn handle(&self, fd: i32) -> Result<Handle, i32> {
        let o = self.open.get(&fd).ok_or(EBADF)?;
        Ok(Handle {
            file: o.file.clone(),
            socket: o.socket,
            wait: o.wait.clone(),
        })
    }

    /// The host file open as `fd`.
    pub fn get(&self, fd: i32) -> Result<Arc<File>, i32> {
        self.open.get(&fd).map(|o| o.file.clone()).ok_or(EBADF)
    }

    /// The open file `fd`, to change its state.
    pub fn entry(&mut self, fd: i32) -> Result<&mut OpenFile, i32> {
        self.open.get_mut(&fd).ok_or(EBADF)
    }

    /// The open socket `fd`: `EBADF` when nothing is open there, `ENOTSOCK` for a file.
    pub fn socket(&self, fd: i32) -> Result<(Arc<File>, Arc<Waitable>), i32> {
        match self.open.get(&fd) {
            Some(OpenFile {
                file,
                socket: true,
                wait: Some(w),
                ..
            }) => Ok((file.clone(), w.clone())),
            Some(_) => Err(ENOTSOCK),
            None if (0..=2).contains(&fd) => Err(ENOTSOCK),
            None => Err(EBADF),
        }
    }

    /// Whether `fd` is waited for by readiness (a socket, a pipe, a terminal).
    pub fn is_waitable(&self, fd: i32) -> bool {
        self.open.get(&fd).is_some_and(|o| o.wait.is_some())
    }

    /// Takes `fd` out of the table; the caller closes it (drops it) after letting the
    /// lock go. With it, the reactor key of its file when no other fd refers to it
    /// (calls waiting on it are then answered: nothing can make it ready any more).
    pub fn remove(&mut self, fd: i32) -> Result<(OpenFile, Option<u64>), i32> {
        let o = self.open.remove(&fd).ok_or(EBADF)?;
        let last = o.wait.as_ref().and_then(|w| {
            let shared = self
                .open
                .values()
                .any(|other| other.wait.as_ref().is_some_and(|x| Arc::ptr_eq(x, w)));
            (!shared).then_some(w.token)
        });
        Ok((o, last))
    }

    /// Takes every open file out of the table (its run ended); the caller closes them
    /// after letting the lock go.
    pub fn take_all(&mut self) -> Vec<OpenFile> {
        self.open.drain().map(|(_, o)| o).collect()
    }

    /// Notes that a pool thread opens `fifo` and may wait for its other end; returns the
    /// key that [`FdTable::opened`] takes back.
    pub fn opening(&mut self, fifo: Arc<FifoOpen>) -> Result<u64, i32> {
        if self.ended {
            return Err(EPIPE);
        }
        let key = new_token();
        self.fifo_opens.insert(key, fifo);
        Ok(key)
    }

    /// The open noted under `key` returned. The caller still holds its [`FifoOpen`], so
    /// nothing closes under the lock.
    pub fn opened(&mut self, key: u64) {
        self.fifo_opens.remove(&key);
    }

    /// The run ended: the FIFOs pool threads are opening now, taken out for the caller
    /// to [`FifoOpen::release`] after letting the lock go; an open noted from now on is
    /// refused (`EPIPE`), as it could wait with nobody left to end its wait.
    pub fn release_opens(&mut self) -> Vec<Arc<FifoOpen>> {
        self.ended = true;
        self.fifo_opens.drain().map(|(_, o)| o).collect()
    }

    /// The host files open now (for checks that every one lies under a mount).
    #[cfg(feature = "fuzzing")]
    pub fn files(&self) -> Vec<Arc<File>> {
        self.open.values().map(|o| o.file.clone()).collect()
    }
}
