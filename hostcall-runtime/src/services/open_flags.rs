//! An open(2) as the GPU asks for it, made beneath a grant's directory: the access its
//! flags ask for (refused in a read-only grant), the open itself with Linux's flags
//! mapped onto cap-std's, and the FIFO an open would wait on, found first so that the
//! wait can be ended through it (`std_fs`'s `openat`).

use std::os::fd::OwnedFd;
use std::path::Path;

use cap_fs_ext::OpenOptionsFollowExt;
use cap_std::fs::{Dir, FileTypeExt as _, OpenOptions, OpenOptionsExt as _};
use hostcall_abi::errno::{ENOTDIR, EROFS};
use hostcall_abi::fcntl;

use super::sandbox::Access;

/// The FIFO `rel` names beneath `dir`, as an `O_PATH` handle, when an open of it with
/// `flags` waits for its other end: one without `O_NONBLOCK`, nor anything that refuses
/// an existing FIFO (`O_CREAT | O_EXCL`, `O_DIRECTORY`), nor a flag the service refuses.
/// Resolved beneath `dir` as any open is, its last link followed unless `O_NOFOLLOW`.
pub(super) fn fifo_to_wait_on(dir: &Dir, rel: &Path, flags: i32) -> Option<OwnedFd> {
    let exclusive = fcntl::O_CREAT | fcntl::O_EXCL;
    if flags & (fcntl::O_NONBLOCK | fcntl::O_DIRECTORY) != 0
        || flags & exclusive == exclusive
        || flags & !fcntl::O_SERVED != 0
    {
        return None;
    }
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(libc::O_PATH);
    if flags & fcntl::O_NOFOLLOW != 0 {
        o.follow(cap_fs_ext::FollowSymlinks::No);
    }
    let handle = dir.open_with(rel, &o).ok()?;
    let fifo = handle.metadata().is_ok_and(|m| m.file_type().is_fifo());
    fifo.then(|| OwnedFd::from(handle.into_std()))
}

/// The read and write access an open(2) with `fl` asks for. `Err(None)`: flags the
/// service refuses (`EINVAL`); `Err(Some(e))`: `EROFS` for a write, a creation, a
/// truncation or an append in a read-only mount.
pub(super) fn access_of(access: Access, fl: i32) -> Result<(bool, bool), Option<std::io::Error>> {
    if fl & !fcntl::O_SERVED != 0 {
        return Err(None);
    }
    let acc = fl & fcntl::O_ACCMODE;
    let writes = acc == fcntl::O_WRONLY || acc == fcntl::O_RDWR;
    let creates = fl & fcntl::O_CREAT != 0;
    if access == Access::ReadOnly
        && (writes || creates || fl & (fcntl::O_TRUNC | fcntl::O_APPEND) != 0)
    {
        return Err(Some(std::io::Error::from_raw_os_error(EROFS)));
    }
    Ok((acc != fcntl::O_WRONLY, writes))
}

/// Opens `rel` beneath `dir` with Linux open(2) `flags` and `mode` as the GPU passed
/// them. `Err(None)`: flags the service refuses (`EINVAL`); `Err(Some(e))`: the
/// refusal of the OS, or `EROFS` for a write in a read-only mount.
pub(super) fn open_beneath(
    dir: &Dir,
    rel: &Path,
    access: Access,
    fl: i32,
    mode: u32,
) -> Result<std::fs::File, Option<std::io::Error>> {
    let (read, writes) = access_of(access, fl)?;
    let creates = fl & fcntl::O_CREAT != 0;
    let mut o = OpenOptions::new();
    o.read(read)
        .write(writes)
        .append(fl & fcntl::O_APPEND != 0)
        .truncate(fl & fcntl::O_TRUNC != 0)
        // Permission bits only: never setuid, setgid or sticky on the host.
        .mode(mode & 0o777);
    if fl & fcntl::O_NONBLOCK != 0 {
        o.custom_flags(fcntl::O_NONBLOCK);
    }
    if fl & fcntl::O_NOFOLLOW != 0 {
        // A link as the last component is refused (ELOOP), as std's remove_dir_all
        // relies on to never follow a link it meets.
        o.follow(cap_fs_ext::FollowSymlinks::No);
    }
    if creates {
        if fl & fcntl::O_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    let f = dir.open_with(rel, &o).map_err(Some)?.into_std();
    if fl & fcntl::O_DIRECTORY != 0 && !f.metadata().map_err(Some)?.is_dir() {
        return Err(Some(std::io::Error::from_raw_os_error(ENOTDIR)));
    }
    Ok(f)
}
