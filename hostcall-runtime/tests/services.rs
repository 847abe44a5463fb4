//! Every built-in service, success and error paths, driven through the real device half
//! of the transport on the emulated backend.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{c, c0, neg, quiet, run_on, svc};
use hostcall_abi::errno::*;
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::fcntl::{O_CLOEXEC, O_CREAT, O_EXCL, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};
use hostcall_abi::stat::{FileStat, STAT_SIZE};
use hostcall_abi::std_services::{Environment, Fs, Lifecycle, Time};
use hostcall_abi::typed::Errno;
use hostcall_client::{Channel, fd_io};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{HostBuilder, Launch, Outcome, RunReport};

/// Runs `body` on one emulated GPU thread.
fn run_one<T: Send + 'static>(
    host: HostBuilder,
    body: impl Fn(&Channel, &EmuThread) -> T + Send + Sync + 'static,
) -> (T, RunReport) {
    run_on(host, 1, body)
}

#[test]
fn stdout_and_stderr_reach_the_host_and_stdin_is_denied_by_default() {
    let (r, rep) = run_one(quiet(), |ch, _| {
        let mut buf = [0u8; 8];
        (
            fd_io::write::<Emu>(ch, 1, b"to stdout\n"),
            fd_io::write::<Emu>(ch, 2, b"to stderr\n"),
            fd_io::read::<Emu>(ch, 0, &mut buf),
            fd_io::write::<Emu>(ch, 0, b"x"),
            fd_io::read::<Emu>(ch, 1, &mut buf),
        )
    });
    assert_eq!(r, (10, 10, neg(EBADF), neg(EBADF), neg(EBADF)));
    assert_eq!(rep.stdout, b"to stdout\n");
    assert_eq!(rep.stderr, b"to stderr\n");
}

#[test]
fn writes_go_through_the_bulk_buffer_below_the_dma_threshold_and_arrive_whole() {
    use hostcall_client::fd_io::DEVICE_WRITE_MIN;
    // Just under the threshold: one round trip through the bulk area (from an unaligned
    // source); 200 kB: one copy by DMA.
    let data: Vec<u8> = (0..200_001u32).map(|i| (i % 251) as u8).collect();
    let d = data.clone();
    let (r, rep) = run_one(quiet(), move |ch, _| {
        let small = fd_io::write::<Emu>(ch, 1, &d[1..DEVICE_WRITE_MIN]);
        (small, fd_io::write::<Emu>(ch, 1, &d[DEVICE_WRITE_MIN..]))
    });
    assert_eq!(
        r,
        (
            DEVICE_WRITE_MIN as i64 - 1,
            (data.len() - DEVICE_WRITE_MIN) as i64
        )
    );
    assert_eq!(rep.stdout, data[1..]);
    assert_eq!(rep.calls, 2);
}

#[test]
fn very_large_writes_go_by_dma_in_one_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dma.bin");
    let p = b"/data/dma.bin".to_vec();
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 241) as u8).collect();
    let d = data.clone();
    let (r, rep) = run_one(quiet().preopen_dir(dir.path(), "/data"), move |ch, _| {
        let fd =
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, &p, O_WRONLY | O_CREAT | O_TRUNC, 0o600)) as i32;
        let wrote = fd_io::write::<Emu>(ch, fd, &d);
        c0(svc::<dyn Fs>(ch).close(fd));
        wrote
    });
    assert_eq!(r, data.len() as i64);
    assert_eq!(rep.calls, 3, "open, one write_from_device, close");
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

#[test]
fn write_from_device_errors_are_reported() {
    use hostcall_abi::DEVICE_WRITE_MAX;
    let (r, _) = run_one(quiet(), |ch, _| {
        let buf = [1u8; 64];
        let at = buf.as_ptr() as u64;
        let fs = svc::<dyn Fs>(ch);
        [
            fs.write_from_device(9, at, 64),
            fs.write_from_device(0, at, 64),
            fs.write_from_device(1, 0, 64),
            fs.write_from_device(1, at, DEVICE_WRITE_MAX + 1),
        ]
    });
    assert_eq!(r[0], Err(Errno(EBADF)), "an fd that is not open");
    assert_eq!(r[1], Err(Errno(EBADF)), "stdin is not writable");
    assert_eq!(
        r[2],
        Err(Errno(EFAULT)),
        "an address the host cannot copy from"
    );
    assert_eq!(r[3], Err(Errno(EINVAL)), "over the per-call limit");
}

/// Only the bytes a read brought travel back into the caller's buffer (the GPU loads
/// them across PCIe a word at a time), and a failed call brings none: the rest of the
/// buffer is as the caller left it.
#[test]
fn a_read_brings_back_only_what_it_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("five"), b"12345").unwrap();
    let (r, _) = run_one(quiet().preopen_dir(dir.path(), "/data"), |ch, _| {
        let fs = svc::<dyn Fs>(ch);
        let fd = c(fs.openat(AT_FDCWD, b"/data/five", O_RDONLY, 0)) as i32;
        let mut buf = [0xAAu8; 512];
        let read = fs.read(fd, &mut buf).map(|f| f.0);
        let mut missing = [0xAAu8; 64];
        let failed = fs.readlink(b"/data/none", &mut missing);
        (read, buf.to_vec(), failed, missing.to_vec())
    });
    let (read, buf, failed, missing) = r;
    assert_eq!(read, Ok(5));
    assert_eq!(&buf[..5], b"12345");
    assert!(buf[5..].iter().all(|&b| b == 0xAA), "bytes past the read");
    assert_eq!(failed, Err(Errno(ENOENT)));
    assert!(missing.iter().all(|&b| b == 0xAA), "a failure's output");
}

#[test]
fn large_reads_are_short_reads_of_one_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let p = b"/data/big".to_vec();
    let (r, _) = run_one(quiet().preopen_dir(dir.path(), "/data"), move |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, &p, O_RDONLY, 0)) as i32;
        let mut all = Vec::new();
        let mut buf = vec![0u8; 200_000];
        loop {
            let n = fd_io::read::<Emu>(ch, fd, &mut buf);
            if n <= 0 {
                break (all, n);
            }
            all.extend_from_slice(&buf[..n as usize]);
        }
    });
    assert_eq!(r.1, 0, "reads end at EOF");
    assert_eq!(r.0, data);
}

/// A read into a large buffer in global memory is one `Fs.read_to_device` call: the host
/// reads, then copies the bytes into the buffer itself (by DMA on a GPU), instead of the
/// lane loading them out of the bulk buffer a word at a time.
#[test]
fn large_reads_into_global_memory_are_copied_in_by_the_host() {
    use hostcall_abi::DEVICE_READ_MAX;
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..(5u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big"), &data).unwrap();
    let (r, rep) = run_one(quiet().preopen_dir(dir.path(), "/data"), move |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/big", O_RDONLY, 0)) as i32;
        let mut buf = vec![0u8; 8 << 20];
        let first = fd_io::read::<Emu>(ch, fd, &mut buf);
        let head = buf[..first.max(0) as usize].to_vec();
        let (fs, at) = (svc::<dyn Fs>(ch), buf.as_mut_ptr() as u64);
        let errors = [
            fs.read_to_device(fd, 0, 64),
            fs.read_to_device(1, at, 64),
            fs.read_to_device(fd, at, DEVICE_READ_MAX + 1),
        ];
        (first, head, errors)
    });
    let (first, head, errors) = r;
    assert_eq!(
        first, DEVICE_READ_MAX as i64,
        "a short read of the per-call limit"
    );
    assert_eq!(head, data[..DEVICE_READ_MAX as usize]);
    assert_eq!(
        rep.calls, 5,
        "open, one read_to_device, and the three below"
    );
    assert_eq!(
        errors[0],
        Err(Errno(EFAULT)),
        "an address the host cannot copy to"
    );
    assert_eq!(errors[1], Err(Errno(EBADF)), "stdout is not readable");
    assert_eq!(errors[2], Err(Errno(EINVAL)), "over the per-call limit");
}

#[test]
fn files_round_trip_inside_a_preopened_dir() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.txt");
    let p = b"/data/f.txt".to_vec();
    let (r, _) = run_one(quiet().preopen_dir(dir.path(), "/data"), move |ch, _| {
        let fd = c(svc::<dyn Fs>(ch).openat(
            AT_FDCWD,
            &p,
            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
            0o644,
        )) as i32;
        let wrote = fd_io::write::<Emu>(ch, fd, b"hello, host");
        let closed = c0(svc::<dyn Fs>(ch).close(fd));
        let fd2 = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, &p, O_RDWR, 0)) as i32;
        let end = c(svc::<dyn Fs>(ch).lseek(fd2, 0, 2));
        let start = c(svc::<dyn Fs>(ch).lseek(fd2, 7, 0));
        let mut buf = [0u8; 64];
        let n = fd_io::read::<Emu>(ch, fd2, &mut buf);
        let mut st = [0u8; STAT_SIZE];
        let fs = c0(svc::<dyn Fs>(ch).fstat(fd2, &mut st));
        let mut st2 = [0u8; STAT_SIZE];
        let ps = c0(svc::<dyn Fs>(ch).statat(AT_FDCWD, &p, true as u32, &mut st2));
        let again = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, &p, O_WRONLY | O_CREAT | O_EXCL, 0o644));
        c0(svc::<dyn Fs>(ch).close(fd2));
        let closed_twice = c0(svc::<dyn Fs>(ch).close(fd2));
        (
            fd,
            wrote,
            closed,
            end,
            start,
            buf[..n as usize].to_vec(),
            fs,
            st,
            ps,
            st2,
            again,
            closed_twice,
        )
    });
    let (fd, wrote, closed, end, start, read, fs, st, ps, st2, again, closed_twice) = r;
    assert!(fd >= 3, "GPU fds start after stdio, got {fd}");
    assert_eq!((wrote, closed, end, start), (11, 0, 11, 7));
    assert_eq!(read, b"host");
    assert_eq!((fs, ps), (0, 0));
    let (a, b) = (FileStat::decode(&st), FileStat::decode(&st2));
    assert_eq!((a.size, b.size, a.ino), (11, 11, b.ino));
    assert_eq!(a.mode & 0o170000, 0o100000, "a regular file");
    assert_eq!(again, neg(EEXIST));
    assert_eq!(closed_twice, neg(EBADF));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello, host");
}

#[test]
fn paths_outside_preopened_dirs_are_denied_whether_or_not_they_exist() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "x").unwrap();
    let escaped = format!(
        "/data/../{}/secret",
        outside.path().file_name().unwrap().to_str().unwrap()
    );
    let secret = format!("{}/secret", outside.path().display());
    let nowhere = format!("{}/nodir/secret", outside.path().display());
    let (r, _) = run_one(quiet().preopen_dir(dir.path(), "/data"), move |ch, _| {
        let mut st = [0u8; STAT_SIZE];
        (
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, secret.as_bytes(), O_RDONLY, 0)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, escaped.as_bytes(), O_RDONLY, 0)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, nowhere.as_bytes(), O_RDONLY, 0)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/missing", O_RDONLY, 0)),
            c0(svc::<dyn Fs>(ch).statat(AT_FDCWD, secret.as_bytes(), true as u32, &mut st)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"", O_RDONLY, 0)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/missing", 0o40000000, 0)),
        )
    });
    assert_eq!(r.0, neg(EACCES), "a host path is no guest path");
    assert_eq!(
        r.1,
        neg(EACCES),
        "`..` cannot climb out of a pre-opened dir"
    );
    assert_eq!(r.2, neg(EACCES), "a missing path outside is still denied");
    assert_eq!(r.3, neg(ENOENT));
    assert_eq!(r.4, neg(EACCES));
    assert_eq!(r.5, neg(ENOENT));
    assert_eq!(r.6, neg(EINVAL), "unknown open flags are refused");
}

#[test]
fn nothing_is_reachable_without_a_preopen() {
    let (r, _) = run_one(quiet(), |ch, _| {
        c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/etc/hostname", O_RDONLY, 0))
    });
    assert_eq!(r, neg(EACCES));
}

#[test]
fn cwd_realpath_and_readlink() {
    let dir = tempfile::tempdir().unwrap();
    let canon = dir.path().canonicalize().unwrap();
    std::fs::write(canon.join("target"), "t").unwrap();
    std::os::unix::fs::symlink("target", canon.join("link")).unwrap();
    let link = "/data/link".to_string();
    let dotted = "./target".to_string();
    let (r, _) = run_one(
        quiet().preopen_dir(&canon, "/data").cwd("/data"),
        move |ch, _| {
            let mut cwd = [0u8; 4096];
            let n = c(svc::<dyn Fs>(ch).getcwd(&mut cwd));
            let mut tiny = [0u8; 2];
            let too_small = c(svc::<dyn Fs>(ch).getcwd(&mut tiny));
            let mut real = [0u8; 4096];
            let rn = c(svc::<dyn Fs>(ch).realpath(dotted.as_bytes(), &mut real));
            let mut target = [0u8; 64];
            let ln = c(svc::<dyn Fs>(ch).readlink(link.as_bytes(), &mut target));
            let not_link = c(svc::<dyn Fs>(ch).readlink(dotted.as_bytes(), &mut target.clone()));
            (
                String::from_utf8(cwd[..n as usize].to_vec()).unwrap(),
                too_small,
                String::from_utf8(real[..rn as usize].to_vec()).unwrap(),
                String::from_utf8(target[..ln as usize].to_vec()).unwrap(),
                not_link,
            )
        },
    );
    assert_eq!(r.0, "/data", "the virtual cwd, not the host's");
    assert_eq!(r.1, neg(ERANGE));
    assert_eq!(r.2, "/data/target", "a guest path");
    assert_eq!(r.3, "target");
    assert_eq!(r.4, neg(EINVAL));
}

/// `readlink` places what fits of a long target and returns that count, as
/// readlink(2) does: std's `read_link` starts with 256 bytes and grows its buffer while
/// the answer fills it. The host answered the whole length with nothing written, which
/// libc turned into `ERANGE`, so a link whose target is over 256 bytes failed to read.
#[test]
fn readlink_places_what_fits_of_a_long_target() {
    let dir = tempfile::tempdir().unwrap();
    let canon = dir.path().canonicalize().unwrap();
    let target = "t".repeat(200) + "/" + &"u".repeat(100);
    std::os::unix::fs::symlink(&target, canon.join("long")).unwrap();
    let (r, _) = run_one(quiet().preopen_dir(&canon, "/data"), |_, t| {
        let fs = t.client::<dyn Fs>();
        let mut short = [0u8; 256];
        let mut whole = [0u8; 512];
        (
            fs.readlink(b"/data/long", &mut short)
                .map(|n| short[..n].to_vec()),
            fs.readlink(b"/data/long", &mut whole)
                .map(|n| whole[..n].to_vec()),
        )
    });
    assert_eq!(r.0, Ok(target.as_bytes()[..256].to_vec()));
    assert_eq!(r.1, Ok(target.into_bytes()));
}

#[test]
fn environment_is_granted_per_variable() {
    // SAFETY: no other thread of this test binary reads or writes this variable.
    unsafe { std::env::set_var("HOSTCALL_TEST_INHERITED", "from-host") };
    let host = quiet()
        .env("GIVEN", "value")
        .inherit_env("HOSTCALL_TEST_INHERITED");
    let (r, _) = run_one(host, |ch, _| {
        let get = |name: &[u8]| {
            let mut out = [0u8; 64];
            let n = c(svc::<dyn Environment>(ch).getenv(name, &mut out));
            if n < 0 {
                Err(n)
            } else {
                Ok(String::from_utf8(out[..n as usize].to_vec()).unwrap())
            }
        };
        (
            get(b"GIVEN"),
            get(b"HOSTCALL_TEST_INHERITED"),
            get(b"PATH"),
            get(b"UNSET_ANYWHERE"),
        )
    });
    assert_eq!(r.0.as_deref(), Ok("value"));
    assert_eq!(r.1.as_deref(), Ok("from-host"));
    assert_eq!(r.2, Err(neg(ENOENT)), "PATH was not granted");
    assert_eq!(r.3, Err(neg(ENOENT)));
}

#[test]
fn realtime_clock_and_randomness_come_from_the_host() {
    let (r, _) = run_one(quiet(), |ch, _| {
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        (
            svc::<dyn Time>(ch).realtime(),
            c(svc::<dyn Time>(ch).getrandom(&mut a)),
            c(svc::<dyn Time>(ch).getrandom(&mut b)),
            a,
            b,
        )
    });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    assert!(
        (now - r.0).abs() < 10_000_000_000,
        "GPU realtime {} vs host {now}",
        r.0
    );
    assert_eq!((r.1, r.2), (32, 32));
    assert_ne!(r.3, r.4, "two draws of 32 random bytes differ");
}

#[test]
fn exit_ends_the_run_with_its_code() {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        if t.thread == 5 {
            svc::<dyn Lifecycle>(t.channel()).exit(3);
            t.trap();
        }
    });
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 8, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Exited(3));
    assert_eq!(r.outcome.exit_code(), 3);
}

/// Runs a launch of `blocks` x 4 threads in which thread (`block`, `thread`) writes
/// `message` to stderr, then ends through `end` (`Lifecycle.abort` or `Lifecycle.panic_abort`)
/// and traps, as libc-hostcall's `abort` and std's panic do.
fn aborting_run(
    blocks: u32,
    (block, thread): (u32, u32),
    message: &'static [u8],
    end: fn(&EmuThread),
) -> hostcall_runtime::RunReport {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        if t.block == block && t.thread == thread {
            fd_io::write::<Emu>(t.channel(), 2, message);
            end(t);
            t.trap();
        }
    });
    quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", blocks, 4, vec![]))
        .unwrap()
}

#[test]
fn abort_reports_the_thread_and_its_message() {
    let r = aborting_run(2, (1, 2), b"thread panicked: boom\n", |t| {
        t.client::<dyn Lifecycle>().abort()
    });
    assert_eq!(
        r.outcome,
        Outcome::Aborted {
            gpu: None,
            block: 1,
            thread: 2,
            panicked: false,
        }
    );
    assert_eq!(r.outcome.exit_code(), 134);
    assert_eq!(r.stderr, b"thread panicked: boom\n");
}

#[test]
fn a_panic_ends_the_run_with_101_as_a_rust_program_does() {
    let r = aborting_run(1, (0, 3), b"thread 'main' panicked at boom\n", |t| {
        t.client::<dyn Lifecycle>().panic_abort()
    });
    assert_eq!(
        r.outcome,
        Outcome::Aborted {
            gpu: None,
            block: 0,
            thread: 3,
            panicked: true,
        }
    );
    assert_eq!(r.outcome.exit_code(), 101);
    let why = r.outcome.failure().unwrap();
    assert!(
        why.contains("(block 0, thread 3) panicked") && why.ends_with("101"),
        "{why}"
    );
}

#[test]
fn a_fault_without_exit_or_abort_is_reported_as_such() {
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .kernel("k", |_: &EmuThread| panic!("illegal address"));
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert!(
        matches!(&r.outcome, Outcome::Faulted(m) if m.contains("illegal address")),
        "{:?}",
        r.outcome
    );
}

#[test]
fn open_file_limit_gives_emfile() {
    let dir = tempfile::tempdir().unwrap();
    let p = "/data/f";
    let (r, _) = run_one(
        quiet().preopen_dir(dir.path(), "/data").max_open_files(2),
        move |ch, _| {
            (0..3)
                .map(|_| {
                    c(svc::<dyn Fs>(ch).openat(AT_FDCWD, p.as_bytes(), O_RDWR | O_CREAT, 0o600))
                })
                .collect::<Vec<_>>()
        },
    );
    assert!(r[0] >= 3 && r[1] >= 3 && r[0] != r[1]);
    assert_eq!(r[2], neg(EMFILE));
}
