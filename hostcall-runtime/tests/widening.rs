//! The GPU cannot widen what it was granted. Links it makes
//! resolve below their own directory wherever they are moved; grants cannot undo each
//! other; modes never gain group or other write; no host path is read back. A test
//! binary of its own: one test sets the process's umask to 0, as an embedder may.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{c, c0, neg, quiet, run_on, svc};
use hostcall_abi::AT_FDCWD;
use hostcall_abi::errno::*;
use hostcall_abi::fcntl::{O_CREAT, O_WRONLY};
use hostcall_abi::std_services::Fs;
use hostcall_runtime::{Error, Host};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// A granted root and a sibling outside it, canonical.
fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("inside.txt"), "inside").unwrap();
    (tmp, root, outside)
}

/// Every way around the old lexical depth check. Before, all of these links
/// were made, and the embedder's own `fs::write(root/out.json)` after the run wrote
/// three directories above the mount. A GPU-made link target is now relative and has
/// no `..`, and a link with another target (the embedder's) is not moved or linked.
#[test]
fn links_the_gpu_makes_resolve_below_their_directory_wherever_they_move() {
    let (_tmp, root, outside) = dirs();
    std::os::unix::fs::symlink("../inside.txt", root.join("sub/hostmade")).unwrap();
    let (r, _) = run_on(quiet().preopen_dir(&root, "/data"), 1, |ch, _| {
        let link = |t: &[u8], l: &[u8]| c0(svc::<dyn Fs>(ch).symlink(t, l));
        [
            link(b"../../secret", b"/data/a/b/l"),
            link(b"..", b"/data/a/up"),
            link(b"a/up/../secret", b"/data/l2"),
            link(b".", b"/data/d"),
            link(b"../../../victim", b"/data/d/d/d/out.json"),
            link(b"/etc/passwd", b"/data/abs"),
            link(b"sub/x", b"/data/down"),
            c0(svc::<dyn Fs>(ch).link(b"/data/sub/hostmade", b"/data/hl")),
            c0(svc::<dyn Fs>(ch).rename(b"/data/sub/hostmade", b"/data/moved")),
            c0(svc::<dyn Fs>(ch).rename(b"/data/down", b"/data/a/down")),
        ]
    });
    assert_eq!(
        r,
        [
            neg(EPERM),
            neg(EPERM),
            neg(EPERM),
            0,
            neg(EPERM),
            neg(EPERM),
            0,
            neg(EPERM),
            neg(EPERM),
            0
        ]
    );
    // What the embedder does after the run stays inside.
    std::fs::write(root.join("out.json"), "{}").unwrap();
    let base = root.parent().unwrap();
    assert!(!base.join("victim").exists() && !base.parent().unwrap().join("victim").exists());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_link(root.join("a/down")).unwrap(),
        Path::new("sub/x")
    );
}

/// A read-only grant inside a read-write one could be written through the
/// outer one; such a host is refused, naming both directories.
#[test]
fn a_read_only_grant_inside_a_writable_one_is_refused() {
    let (_tmp, root, _) = dirs();
    let inner = root.join("a");
    for host in [
        Host::builder()
            .preopen_dir(&root, "/w")
            .preopen_dir_readonly(&inner, "/in"),
        Host::builder()
            .preopen_dir_readonly(&root, "/r")
            .preopen_dir(&inner, "/w"),
    ] {
        let Err(Error::Sandbox(e)) = host.build() else {
            panic!("an overlap that undoes a read-only grant was accepted");
        };
        let text = e.to_string();
        assert!(
            text.contains(&*root.to_string_lossy()) && text.contains(&*inner.to_string_lossy()),
            "{text}"
        );
    }
    Host::builder()
        .preopen_dir(&root, "/w")
        .preopen_dir(&inner, "/w2")
        .build()
        .expect("two writable grants may nest");
}

/// With the process's umask at 0, `chmod 777` made the granted directory
/// world-writable and files 0666 or 0777. Group and other write are now dropped unless
/// the embedder allows them; the granted directory keeps its mode.
#[test]
fn modes_never_gain_group_or_other_write() {
    rustix::process::umask(rustix::fs::Mode::empty());
    let (_tmp, root, _) = dirs();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (r, _) = run_on(quiet().preopen_dir(&root, "/w"), 1, |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/w/new.txt", O_WRONLY | O_CREAT, 0o666));
        let at = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/w/at.txt", O_WRONLY | O_CREAT, 0o666));
        [
            c0(svc::<dyn Fs>(ch).chmod(b"/w", 0o777)),
            c0(svc::<dyn Fs>(ch).chmod(b"/w/inside.txt", 0o777)),
            c0(svc::<dyn Fs>(ch).mkdir(b"/w/dir", 0o777)),
            c0(svc::<dyn Fs>(ch).fchmod(fd as i32, 0o666)),
            (fd >= 3) as i64,
            (at >= 3) as i64,
        ]
    });
    assert_eq!(r, [neg(EPERM), 0, 0, 0, 1, 1]);
    assert_eq!(
        mode(&root.join("at.txt")),
        0o644,
        "openat creates as open does"
    );
    assert_eq!(mode(&root), 0o755, "the granted directory keeps its mode");
    assert_eq!(mode(&root.join("inside.txt")), 0o755);
    assert_eq!(mode(&root.join("dir")), 0o755);
    assert_eq!(mode(&root.join("new.txt")), 0o644);

    let host = quiet()
        .preopen_dir(&root, "/w")
        .allow_group_other_write(true);
    let (r, _) = run_on(host, 1, |ch, _| {
        c0(svc::<dyn Fs>(ch).chmod(b"/w/inside.txt", 0o777))
    });
    assert_eq!(r, 0);
    assert_eq!(
        mode(&root.join("inside.txt")),
        0o777,
        "when the embedder allows it"
    );
}

/// An absolute link target is answered as the guest path inside a mount, and
/// refused outside every mount; it was read back verbatim, a host path.
#[test]
fn readlink_answers_guest_paths_only() {
    let (_tmp, root, _) = dirs();
    std::os::unix::fs::symlink("/home/alice/private/keys", root.join("keys")).unwrap();
    std::os::unix::fs::symlink(root.join("inside.txt"), root.join("abs")).unwrap();
    std::os::unix::fs::symlink("inside.txt", root.join("rel")).unwrap();
    let (r, _) = run_on(quiet().preopen_dir(&root, "/data"), 1, |ch, _| {
        let read = |p: &[u8]| {
            let mut out = [0u8; 256];
            let n = c(svc::<dyn Fs>(ch).readlink(p, &mut out));
            (n, out[..n.max(0) as usize].to_vec())
        };
        [read(b"/data/keys"), read(b"/data/abs"), read(b"/data/rel")]
    });
    assert_eq!(r[0], (neg(EACCES), vec![]));
    assert_eq!(r[1], (16, b"/data/inside.txt".to_vec()));
    assert_eq!(r[2], (10, b"inside.txt".to_vec()));
}

/// `RESOLVE_BENEATH` crosses mount points, so a bind mount inside a granted
/// directory (here of a directory outside it) let the GPU read outside. A grant with a
/// mount point inside is now refused when the host is built, naming both, unless the
/// embedder allows it. Needs the right to bind-mount (root); SKIPPED otherwise.
#[test]
fn a_mount_point_inside_a_grant_is_refused_unless_allowed() {
    let (_tmp, root, outside) = dirs();
    std::fs::write(outside.join("secret"), "outside").unwrap();
    let inner = root.join("a/mnt");
    std::fs::create_dir_all(&inner).unwrap();
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .args([&outside, &inner])
        .output();
    if !mounted.as_ref().is_ok_and(|o| o.status.success()) {
        // Straight to stderr: libtest captures `eprintln!` of a passing test.
        let _ = writeln!(
            std::io::stderr(),
            "a_mount_point_inside_a_grant_is_refused_unless_allowed: SKIPPED (cannot bind-mount here: {mounted:?})"
        );
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&inner);
    let Err(Error::Sandbox(e)) = Host::builder().preopen_dir(&root, "/data").build() else {
        panic!("a grant with a mount point inside was accepted");
    };
    let text = e.to_string();
    assert!(
        text.contains(&*inner.to_string_lossy()) && text.contains(&*root.to_string_lossy()),
        "{text}"
    );
    let host = quiet()
        .preopen_dir(&root, "/data")
        .allow_mount_points_inside(true);
    let (r, _) = run_on(host, 1, |ch, _| {
        let mut st = [0u8; hostcall_abi::stat::STAT_SIZE];
        c0(svc::<dyn Fs>(ch).statat(AT_FDCWD, b"/data/a/mnt/secret", true as u32, &mut st))
    });
    assert_eq!(r, 0, "crossed, as the embedder allowed");
}
