//! The review findings of a host that a GPU program must not escape, exhaust or hang,
//! each driven end to end through the emulated backend (the ones that need a forged
//! port are in `hostcall-fuzz/tests/untrusted_port.rs`).

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use common::{c, c0, neg, quiet, run_on, svc};
use hostcall_abi::errno::*;
use hostcall_abi::fcntl::{O_CREAT, O_RDONLY, O_WRONLY};
use hostcall_abi::std_services::{Fs, Lifecycle};
use hostcall_abi::typed::{Arg, Encoder, Errno, bulk_len};
use hostcall_abi::{AT_FDCWD, PORT_BULK, Status};
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Error, Launch, Outcome, RunReport};

/// A root with an escape hatch of each kind, and a sibling directory outside it.
struct Seeded {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn seeded() -> Seeded {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(outside.join("new"), root.join("out")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("up")).unwrap();
    Seeded {
        _tmp: tmp,
        root,
        outside,
    }
}

/// Finding 1: a dangling symlink to a place outside the root does not let `O_CREAT`
/// create a file there, nor does a relative link that climbs out.
#[test]
fn dangling_and_climbing_symlinks_do_not_escape() {
    let s = seeded();
    let (r, _) = run_on(quiet().preopen_dir(&s.root, "/data"), 1, |ch, _| {
        (
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/out", O_WRONLY | O_CREAT, 0o644)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/up/new", O_WRONLY | O_CREAT, 0o644)),
        )
    });
    assert!(r.0 < 0 && r.1 < 0, "both refused: {r:?}");
    assert!(
        !s.outside.join("new").exists(),
        "nothing was created outside"
    );
}

/// Finding 1, check-then-use: a directory swapped for a symlink to the outside while
/// the GPU opens files below it never lets a file appear outside.
#[test]
fn swapping_a_directory_for_a_symlink_mid_call_does_not_escape() {
    let s = seeded();
    let sub = s.root.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, sub, outside) = (stop.clone(), sub.clone(), s.outside.clone());
        let parked = sub.with_extension("real");
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = std::fs::rename(&sub, &parked);
                let _ = std::os::unix::fs::symlink(&outside, &sub);
                std::thread::yield_now();
                let _ = std::fs::remove_file(&sub);
                let _ = std::fs::rename(&parked, &sub);
                // The real directory stays a while too, so some opens find it.
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let (opened, _) = run_on(quiet().preopen_dir(&s.root, "/data"), 4, |ch, t| {
        let name = format!("/data/sub/f{}", t.thread);
        (0..300)
            .filter(|_| {
                let fd = c(svc::<dyn Fs>(ch).openat(
                    AT_FDCWD,
                    name.as_bytes(),
                    O_WRONLY | O_CREAT,
                    0o600,
                ));
                if fd >= 0 {
                    c0(svc::<dyn Fs>(ch).close(fd as i32));
                }
                fd >= 0
            })
            .count()
    });
    stop.store(true, Relaxed);
    swapper.join().unwrap();
    let escaped: Vec<_> = std::fs::read_dir(&s.outside).unwrap().collect();
    assert!(escaped.is_empty(), "files created outside: {escaped:?}");
    assert!(
        opened > 0,
        "no open found the real directory: the race was not run"
    );
}

/// Finding 3: created files never carry setuid, setgid or sticky bits; read-only
/// mounts refuse writes.
#[test]
fn created_files_have_permission_bits_only_and_read_only_mounts_refuse_writes() {
    use std::os::unix::fs::PermissionsExt;
    let (s, ro) = (seeded(), tempfile::tempdir().unwrap());
    std::fs::write(ro.path().join("r.txt"), "r").unwrap();
    let host = quiet()
        .preopen_dir(&s.root, "/data")
        .preopen_dir_readonly(ro.path(), "/ro");
    let (r, _) = run_on(host, 1, |ch, _| {
        (
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/suid", O_WRONLY | O_CREAT, 0o6755)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/ro/new", O_WRONLY | O_CREAT, 0o644)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/ro/r.txt", O_WRONLY, 0)),
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/ro/r.txt", O_RDONLY, 0)),
        )
    });
    assert!(r.0 >= 3, "{r:?}");
    let mode = std::fs::metadata(s.root.join("suid"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7000, 0, "mode {mode:o}");
    assert_eq!((r.1, r.2), (neg(EROFS), neg(EROFS)));
    assert!(r.3 >= 3);
    assert!(!ro.path().join("new").exists());
}

/// Finding 4: captured output stops at its limit, and the capture says so.
#[test]
fn captured_output_is_bounded_and_the_cut_is_noted() {
    let (_, rep) = run_on(quiet().capture_limit(100), 1, |ch, _| {
        for _ in 0..100 {
            fd_io::write::<Emu>(ch, 1, &[b'x'; 1000]);
        }
    });
    let out = String::from_utf8(rep.stdout).unwrap();
    assert!(out.starts_with(&"x".repeat(100)), "{out}");
    assert!(out.contains("99900 more bytes were not captured"), "{out}");
}

/// Finding 5: a call that blocks (opening a FIFO nobody writes) runs off the polling
/// threads, so other warps' calls are still answered; the FIFO's writer then frees it.
#[test]
fn a_blocking_call_does_not_starve_other_threads() {
    let s = seeded();
    mkfifo(&s.root.join("fifo"));
    let pings = Arc::new(AtomicU64::new(0));
    let p = pings.clone();
    let (r, _) = run_on(quiet().preopen_dir(&s.root, "/data"), 2, move |ch, t| {
        if t.thread == 0 {
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/fifo", O_RDONLY, 0))
        } else {
            for i in 0..200 {
                assert_eq!(ch.ping::<Emu>(i), i);
                p.fetch_add(1, Relaxed);
            }
            // Only now does the reader's open have a writer.
            c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/data/fifo", O_WRONLY, 0))
        }
    });
    assert!(r >= 3, "the reader's open ended once a writer came: {r}");
    assert_eq!(pings.load(Relaxed), 200);
}

fn mkfifo(path: &std::path::Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, 0o600.into()).expect("mkfifo");
}

/// Finding 5: the timeout names the kernel and the call that hung, and returns.
#[test]
fn a_timeout_names_the_kernel_and_the_calls_in_flight() {
    let s = seeded();
    mkfifo(&s.root.join("fifo"));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("stuck", |t: &EmuThread| {
        c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, b"/data/fifo", O_RDONLY, 0));
    });
    // The limit counts the launch's set-up too: long enough that, on a loaded machine,
    // the thread is in its call when it comes.
    let host = quiet()
        .preopen_dir(&s.root, "/data")
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = host
        .run(&mut m, &Launch::linear("stuck", 1, 1, vec![]))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Timeout { .. }), "{text}");
    assert!(text.contains("kernel `stuck` was stopped after"), "{text}");
    assert!(
        text.contains("1 hostcalls in flight: Fs.openat#0x80000021 by block 0 thread 0"),
        "{text}"
    );
}

/// Finding 5: a kernel that calls the host in an endless loop is stopped at the
/// timeout: its calls are answered `Killed`, its threads trap, the launch ends.
#[test]
fn a_kernel_calling_the_host_forever_is_killed_at_the_timeout() {
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("spin", |t: &EmuThread| {
        let mut i = 0;
        loop {
            t.channel().ping::<Emu>(i);
            i += 1;
        }
    });
    let host = quiet().timeout(Duration::from_millis(200)).build().unwrap();
    let err = host
        .run(&mut m, &Launch::linear("spin", 2, 64, vec![]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Timeout {
                still_running: false,
                ..
            }
        ),
        "every thread trapped on its next call: {err}"
    );
}

/// Finding 6: a path far past `PATH_MAX` is refused as too long, before any walk.
#[test]
fn a_path_past_path_max_is_enametoolong() {
    let s = seeded();
    let (r, _) = run_on(quiet().preopen_dir(&s.root, "/data"), 1, |ch, _| {
        // `Fs.openat` as its stub would send it, were the path not too long for the stub.
        let long = b"/a".repeat(PORT_BULK / 2);
        let mut e = Encoder::<'_, 5>::default();
        Arg::put(AT_FDCWD, &mut e);
        Arg::put(&long[..], &mut e);
        Arg::put(0i32, &mut e);
        Arg::put(0u32, &mut e);
        let mut args = [bulk_len(e.inputs()) as u64, 0, 0, 0, 0, 0];
        args[1..].copy_from_slice(&e.fixed_words());
        let openat = <dyn Fs>::SERVICES[0];
        assert_eq!(openat.name, "Fs.openat");
        ch.call::<Emu>(openat.id, args, &long, &mut [], None).result
    });
    assert_eq!(r, neg(ENAMETOOLONG));
}

struct Panics;

impl Handler for Panics {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        if call.args[0] == 1 {
            panic!("an embedder's bug");
        }
        Ok(Reply::value(7))
    }
}

/// Finding 7: a handler that panics answers `EIO`, and the server carries on.
#[test]
fn a_panicking_handler_answers_eio_and_serving_goes_on() {
    let host = quiet().service(300, Arc::new(Panics));
    let (r, _) = run_on(host, 1, |ch, _| {
        let call = |a| {
            let reply = ch.call::<Emu>(300, [a, 0, 0, 0, 0, 0], &[], &mut [], None);
            (reply.status, reply.result)
        };
        (call(1), call(0), ch.ping::<Emu>(5))
    });
    assert_eq!(r, ((Status::Ok, neg(EIO)), (Status::Ok, 7), 5));
}

/// Runs `kernel` on `threads` threads of one block under a quiet host.
fn run_kernel(threads: u32, kernel: impl Fn(&EmuThread) + Send + Sync + 'static) -> RunReport {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", kernel);
    let launch = Launch::linear("k", 1, threads, vec![]);
    quiet().build().unwrap().run(&mut m, &launch).unwrap()
}

/// Finding 9: `exit(-1)` ends with 255, as on Linux.
#[test]
fn exit_status_is_the_low_byte_as_on_linux() {
    let r = run_kernel(1, |t| {
        svc::<dyn Lifecycle>(t.channel()).exit(-1);
        t.trap();
    });
    assert_eq!(r.outcome, Outcome::Exited(255));
    assert_eq!(r.outcome.exit_code(), 255);
}

/// Finding 9: a fault after an `exit` is still reported.
#[test]
fn a_fault_after_exit_is_reported() {
    let r = run_kernel(2, |t| {
        if t.thread == 0 {
            svc::<dyn Lifecycle>(t.channel()).exit(3);
            t.trap();
        }
        std::thread::sleep(Duration::from_millis(100));
        panic!("illegal address");
    });
    assert!(
        matches!(&r.outcome, Outcome::Faulted(m) if m.contains("illegal address") && m.contains("after exit(3)")),
        "{:?}",
        r.outcome
    );
}

/// Finding 9: an fd names a file only as the `int` it is. `Fs.write` declares it an
/// `i32`, so no wider value reaches the host to be cut into stdout's; a negative one, or
/// one past every fd open, is `EBADF`.
#[test]
fn an_fd_that_names_no_file_is_ebadf() {
    let (r, rep) = run_on(quiet(), 1, |ch, _| {
        let data = b"must not reach stdout";
        [-1, i32::MIN, i32::MAX, 1 << 16].map(|fd| svc::<dyn Fs>(ch).write(fd, data))
    });
    assert_eq!(r, [Err(Errno(EBADF)); 4]);
    assert!(rep.stdout.is_empty());
}

/// Finding 9: the GPU sees guest paths only: no host path through `getcwd` or
/// `realpath`, with or without pre-opens.
#[test]
fn no_host_path_reaches_the_gpu() {
    let s = seeded();
    std::fs::write(s.root.join("f"), "f").unwrap();
    let host = quiet().preopen_dir(&s.root, "/data").cwd("/data");
    let (r, _) = run_on(host, 1, |ch, _| {
        let (mut cwd, mut real) = ([0u8; 256], [0u8; 256]);
        let n = c(svc::<dyn Fs>(ch).getcwd(&mut cwd));
        let m = c(svc::<dyn Fs>(ch).realpath(b"f", &mut real));
        (cwd[..n as usize].to_vec(), real[..m as usize].to_vec())
    });
    assert_eq!(
        (r.0.as_slice(), r.1.as_slice()),
        (&b"/data"[..], &b"/data/f"[..])
    );
    let (bare, _) = run_on(quiet(), 1, |ch, _| {
        let mut cwd = [0u8; 256];
        let n = c(svc::<dyn Fs>(ch).getcwd(&mut cwd));
        cwd[..n as usize].to_vec()
    });
    assert_eq!(bare, b"/", "nothing granted: the root of an empty view");
}
