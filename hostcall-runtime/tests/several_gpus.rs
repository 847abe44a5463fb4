//! Several GPUs on the emulated backend: `Host::run_all` runs a launch on
//! each of several modules at once as one process (one file table, one exit), naming
//! each GPU in its threads' configuration and in the host's lines. A test binary of its
//! own: it installs the logger that keeps every warning (`common::warnings`).

mod common;

use hostcall_abi::fcntl::{O_CREAT, O_WRONLY};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{c, c0, quiet, svc};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::std_services::{Fs, Lifecycle};
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Launch, Outcome, Unserved};

/// Two GPUs each open a file and hold it while the other opens its own: with one file
/// table they get fds 3 and 4 (two tables would give both 3). Each thread sees its
/// GPU's place in its configuration, and each GPU's lines are captured in its report.
#[test]
fn two_gpus_share_one_file_table_and_know_which_gpu_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let both_open = Arc::new(Barrier::new(2));
    let module = |both_open: Arc<Barrier>| {
        EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
            let ch = t.channel();
            let gpu = t.config().gpu;
            let path = format!("/data/gpu{gpu}.txt");
            let fd =
                c(svc::<dyn Fs>(ch).openat(AT_FDCWD, path.as_bytes(), O_WRONLY | O_CREAT, 0o600))
                    as i32;
            both_open.wait();
            let line = format!("gpu {gpu} has fd {fd}\n");
            fd_io::write::<Emu>(ch, 1, line.as_bytes());
            both_open.wait();
            c0(svc::<dyn Fs>(ch).close(fd));
        })
    };
    let host = quiet().preopen_dir(dir.path(), "/data").build().unwrap();
    let launch = Launch::linear("k", 1, 1, vec![]);
    let mut runs = [
        (module(both_open.clone()), launch.clone()),
        (module(both_open), launch),
    ];
    let reports: Vec<_> = host
        .run_all(&mut runs)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let lines: Vec<_> = reports
        .iter()
        .map(|r| {
            assert_eq!(r.outcome, Outcome::Completed);
            String::from_utf8(r.stdout.clone()).unwrap()
        })
        .collect();
    let fds = |gpu: usize| lines[gpu].trim().rsplit(' ').next().unwrap().to_owned();
    assert!(lines[0].starts_with("gpu 1 has fd ") && lines[1].starts_with("gpu 2 has fd "));
    let mut got = [fds(0), fds(1)];
    got.sort();
    assert_eq!(got, ["3", "4"], "{lines:?}");
    assert!(dir.path().join("gpu1.txt").exists() && dir.path().join("gpu2.txt").exists());
}

/// `exit(3)` on one GPU ends the other GPU's launch, which keeps calling the host, at its
/// next hostcall: both report the exit, and the run does not wait for a timeout.
#[test]
fn an_exit_on_one_gpu_ends_the_launch_on_the_other() {
    let module = || {
        EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
            let ch = t.channel();
            if t.config().gpu == 1 {
                svc::<dyn Lifecycle>(ch).exit(3);
            }
            loop {
                ch.ping::<Emu>(7);
            }
        })
    };
    let host = quiet().timeout(Duration::from_secs(30)).build().unwrap();
    let launch = Launch::linear("k", 1, 1, vec![]);
    let mut runs = [(module(), launch.clone()), (module(), launch)];
    let started = Instant::now();
    let outcomes: Vec<_> = host
        .run_all(&mut runs)
        .into_iter()
        .map(|r| r.unwrap().outcome)
        .collect();
    assert_eq!(outcomes, [Outcome::Exited(3), Outcome::Exited(3)]);
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The host's lines about a GPU thread name its GPU.
#[test]
fn the_hosts_lines_name_the_gpu() {
    common::warnings();
    let module = || {
        EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
            if t.config().gpu == 2 && t.thread == 1 {
                t.channel().call::<Emu>(998, [0; 6], &[], &mut [], None);
            }
        })
    };
    let host = quiet().unserved(Unserved::Enosys).build().unwrap();
    let launch = Launch::linear("k", 1, 2, vec![]);
    let mut runs = [(module(), launch.clone()), (module(), launch)];
    for r in host.run_all(&mut runs) {
        assert_eq!(r.unwrap().outcome, Outcome::Completed);
    }
    let named: Vec<_> = common::warnings()
        .into_iter()
        .filter(|l| l.contains("service id 0x3e6"))
        .collect();
    assert_eq!(
        named,
        [
            "unknown hostcall service id 0x3e6 from GPU thread (GPU 1, block 0, thread 1): answered ENOSYS"
        ]
    );
}
