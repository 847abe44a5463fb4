//! The services that change and list the directory tree, the fd services beyond read
//! and write, and the program's start-up blocks, through the real device half of the
//! transport on the emulated backend. std's `fs::rename`, `remove_file`, `read_dir`,
//! `remove_dir_all`, `sync_all`, `set_len`, `env::args` and `env::vars` reach these.

mod common;

use common::{c, c0, neg, quiet, run_on, svc};
use hostcall_abi::dirent;
use hostcall_abi::errno::*;
use hostcall_abi::fcntl::{O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_RDONLY, O_WRONLY};
use hostcall_abi::stat::{FileStat, STAT_SIZE};
use hostcall_abi::std_services::{Environment, Fs, Identity};
use hostcall_abi::{AT_FDCWD, AT_REMOVEDIR, BULK_PER_LANE, STARTUP_ARGS, STARTUP_ENV};

#[test]
fn directories_are_made_renamed_linked_and_removed_inside_the_mount() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "data").unwrap();
    let (r, _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        [
            c0(svc::<dyn Fs>(ch).mkdir(b"/d/sub", 0o7755)),
            c0(svc::<dyn Fs>(ch).mkdir(b"/d/sub", 0o755)),
            c0(svc::<dyn Fs>(ch).rename(b"/d/f", b"/d/sub/g")),
            c0(svc::<dyn Fs>(ch).link(b"/d/sub/g", b"/d/h")),
            c0(svc::<dyn Fs>(ch).rename(b"/d/missing", b"/d/x")),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/d/sub", AT_REMOVEDIR)),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/d/sub/g", 0)),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/d/sub", AT_REMOVEDIR)),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/d/h", 0)),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/d/h", 0)),
        ]
    });
    assert_eq!(
        r,
        [
            0,
            neg(EEXIST),
            0,
            0,
            neg(ENOENT),
            neg(ENOTEMPTY),
            0,
            0,
            0,
            neg(ENOENT)
        ]
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn made_directories_get_permission_bits_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        c0(svc::<dyn Fs>(ch).mkdir(b"/d/s", 0o7700))
    });
    assert_eq!(r, 0);
    let mode = std::fs::metadata(dir.path().join("s"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o700);
}

#[test]
fn two_mounts_refuse_cross_renames_and_read_only_mounts_refuse_every_change() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(a.path().join("f"), "x").unwrap();
    std::fs::write(b.path().join("f"), "x").unwrap();
    let host = quiet()
        .preopen_dir(a.path(), "/a")
        .preopen_dir_readonly(b.path(), "/b");
    let (r, _) = run_on(host, 1, |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/b/f", O_RDONLY, 0)) as i32;
        [
            c0(svc::<dyn Fs>(ch).rename(b"/a/f", b"/b/g")),
            c0(svc::<dyn Fs>(ch).mkdir(b"/b/s", 0o755)),
            c0(svc::<dyn Fs>(ch).unlinkat(AT_FDCWD, b"/b/f", 0)),
            c0(svc::<dyn Fs>(ch).chmod(b"/b/f", 0o600)),
            c0(svc::<dyn Fs>(ch).fchmod(fd, 0o600)),
            c0(svc::<dyn Fs>(ch).symlink(b"f", b"/b/l")),
        ]
    });
    assert_eq!(
        r,
        [
            neg(EXDEV),
            neg(EROFS),
            neg(EROFS),
            neg(EROFS),
            neg(EROFS),
            neg(EROFS)
        ]
    );
    assert!(b.path().join("f").exists() && a.path().join("f").exists());
}

/// A link the GPU makes is relative and has no `..` (see `widening.rs` for why a
/// depth check is not enough).
#[test]
fn symlinks_the_gpu_makes_are_relative_without_dotdot() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let (r, _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        let link = |t: &[u8], l: &[u8]| c0(svc::<dyn Fs>(ch).symlink(t, l));
        [
            link(b"../x", b"/d/sub/up"),
            link(b"x", b"/d/sub/here"),
            link(b"../../etc/passwd", b"/d/sub/out"),
            link(b"/etc/passwd", b"/d/abs"),
            link(b"../x", b"/d/top"),
        ]
    });
    assert_eq!(r, [neg(EPERM), 0, neg(EPERM), neg(EPERM), neg(EPERM)]);
    assert_eq!(
        std::fs::read_link(dir.path().join("sub/here"))
            .unwrap()
            .to_str(),
        Some("x")
    );
}

#[test]
fn at_calls_resolve_beneath_a_directory_fd_and_nofollow_refuses_a_link() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("t/inner")).unwrap();
    std::fs::write(dir.path().join("t/f"), "12345").unwrap();
    std::os::unix::fs::symlink("inner", dir.path().join("t/link")).unwrap();
    let (r, _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        let t = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/d/t", O_RDONLY | O_DIRECTORY, 0)) as i32;
        let mut st = [0u8; STAT_SIZE];
        let stat = c0(svc::<dyn Fs>(ch).statat(t, b"f", false as u32, &mut st));
        let inner =
            c(svc::<dyn Fs>(ch).openat(t, b"inner", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
        let through_link =
            c(svc::<dyn Fs>(ch).openat(t, b"link", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0));
        let escape = c(svc::<dyn Fs>(ch).openat(t, b"../../x", O_WRONLY | O_CREAT, 0o600));
        let f = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/d/t/f", O_RDONLY, 0)) as i32;
        let not_dir = c0(svc::<dyn Fs>(ch).statat(f, b"x", false as u32, &mut [0u8; STAT_SIZE]));
        (
            stat,
            FileStat::decode(&st).size,
            inner >= 3,
            through_link,
            escape,
            not_dir,
            c0(svc::<dyn Fs>(ch).unlinkat(t, b"f", 0)),
            c0(svc::<dyn Fs>(ch).unlinkat(t, b"inner", AT_REMOVEDIR)),
        )
    });
    assert_eq!(r, (0, 5, true, neg(ELOOP), neg(EACCES), neg(ENOTDIR), 0, 0));
    assert!(!dir.path().join("t/f").exists() && !dir.path().join("t/inner").exists());
    assert!(!dir.path().parent().unwrap().join("x").exists());
}

#[test]
fn getdents_lists_every_entry_once_across_calls() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..600 {
        std::fs::write(
            dir.path().join(format!("entry-with-a-long-name-{i:04}")),
            "",
        )
        .unwrap();
    }
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let ((names, calls_made), _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/d", O_RDONLY | O_DIRECTORY, 0)) as i32;
        let mut names = Vec::new();
        let mut rounds = 0;
        loop {
            let mut buf = vec![0u8; BULK_PER_LANE];
            let n = c(svc::<dyn Fs>(ch).getdents(fd, &mut buf));
            assert!(n >= 0, "getdents: {n}");
            if n == 0 {
                break;
            }
            rounds += 1;
            let mut rest = &buf[..n as usize];
            while let Some((r, more)) = dirent::decode(rest) {
                names.push((String::from_utf8(r.name.to_vec()).unwrap(), r.kind));
                rest = more;
            }
            assert!(rest.is_empty());
        }
        (names, rounds)
    });
    assert_eq!(names.len(), 601);
    assert!(calls_made > 1, "600 long names do not fit one bulk buffer");
    let mut sorted: Vec<_> = names.iter().map(|(n, _)| n.clone()).collect();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 601, "no entry twice");
    assert!(names.contains(&("sub".into(), dirent::kind::DT_DIR)));
    assert!(names.contains(&("entry-with-a-long-name-0000".into(), dirent::kind::DT_REG)));
}

#[test]
fn fd_services_truncate_sync_and_chmod() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "hello world").unwrap();
    let (r, _) = run_on(quiet().preopen_dir(dir.path(), "/d"), 1, |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/d/f", O_WRONLY, 0)) as i32;
        let ro = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/d/f", O_RDONLY, 0)) as i32;
        [
            c0(svc::<dyn Fs>(ch).ftruncate(fd, 5)),
            c0(svc::<dyn Fs>(ch).fsync(fd)),
            c0(svc::<dyn Fs>(ch).fchmod(fd, 0o4640)),
            c0(svc::<dyn Fs>(ch).ftruncate(ro, 0)),
            c0(svc::<dyn Fs>(ch).ftruncate(fd, -1)),
            c0(svc::<dyn Fs>(ch).fsync(99)),
            c0(svc::<dyn Fs>(ch).fsync(1)),
        ]
    });
    assert_eq!(
        r,
        [0, 0, 0, neg(EINVAL), neg(EINVAL), neg(EBADF), neg(EINVAL)]
    );
    assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"hello");
    let mode = std::fs::metadata(dir.path().join("f"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o640);
}

#[test]
fn startup_blocks_hold_the_arguments_and_granted_environment_in_order() {
    // SAFETY: set before any thread of this test binary reads it; the name is this test's own.
    unsafe { std::env::set_var("TREE_TEST_INHERITED", "from host") };
    let host = quiet()
        .args(["prog", "a b", ""])
        .env("Z_SET", "1")
        .inherit_env("TREE_TEST_INHERITED")
        .env("A_SET", "2")
        .env("Z_SET", "3");
    let ((args, env, (pid, ppid, uid), bad), _) = run_on(host, 1, |ch, t| {
        let read = |which| {
            let mut out = vec![0u8; 8];
            let total = c(svc::<dyn Environment>(ch).startup(which, 0, &mut out)) as usize;
            let mut all = Vec::new();
            while all.len() < total {
                let mut piece = vec![0u8; 8];
                c(svc::<dyn Environment>(ch).startup(which, all.len() as u64, &mut piece));
                all.extend_from_slice(&piece[..(total - all.len()).min(8)]);
            }
            all
        };
        (
            read(STARTUP_ARGS),
            read(STARTUP_ENV),
            (
                t.client::<dyn Identity>().getpid(),
                t.client::<dyn Identity>().getppid(),
                t.client::<dyn Identity>().getuid(),
            ),
            c(svc::<dyn Environment>(ch).startup(7, 0, &mut [])),
        )
    });
    assert_eq!(args, b"prog\0a b\0\0");
    assert_eq!(env, b"TREE_TEST_INHERITED=from host\0Z_SET=3\0A_SET=2\0");
    assert_eq!(pid, std::process::id() as i32);
    assert_eq!(ppid, std::os::unix::process::parent_id() as i32);
    assert_eq!(uid, rustix::process::getuid().as_raw());
    assert_eq!(bad, neg(EINVAL));
}
