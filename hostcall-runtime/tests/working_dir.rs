//! The working directory a GPU program changes (`chdir`, std's `set_current_dir`) and
//! the executable it finds (`/proc/self/exe`, std's `current_exe`), in guest paths and
//! with Linux's errors, driven through the device half of the transport on the emulated
//! backend.

mod common;

use common::quiet;
use hostcall_abi::errno::{EACCES, ENOENT, ENOTDIR};
use hostcall_abi::fcntl::{AT_FDCWD, O_CREAT, O_WRONLY};
use hostcall_abi::std_services::Fs;
use hostcall_abi::typed::Errno;
use hostcall_client::typed::Client;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch};

type Answer = Result<Vec<u8>, Errno>;

fn cwd(fs: &Client<Emu, dyn Fs>) -> Answer {
    let mut out = [0u8; 256];
    fs.getcwd(&mut out).map(|n| out[..n].to_vec())
}

fn cd(fs: &Client<Emu, dyn Fs>, path: &[u8]) -> Answer {
    fs.chdir(path).and_then(|()| cwd(fs))
}

/// Runs `body` on one emulated GPU thread of each of `runs` runs of one host: each run is
/// a process of its own.
fn runs_of<T: Send + 'static>(
    host: Host,
    runs: usize,
    body: impl Fn(&Client<Emu, dyn Fs>) -> T + Send + Sync + Clone + 'static,
) -> Vec<T> {
    (0..runs)
        .map(|_| {
            let out = std::sync::Arc::new(std::sync::Mutex::new(None));
            let (o, body) = (out.clone(), body.clone());
            let mut m =
                EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
                    *o.lock().unwrap() = Some(body(&t.client::<dyn Fs>()));
                });
            host.run(&mut m, &Launch::linear("k", 1, 1, vec![]))
                .unwrap();
            let taken = out.lock().unwrap().take();
            taken.expect("the thread finished")
        })
        .collect()
}

fn ok(path: &str) -> Answer {
    Ok(path.as_bytes().to_vec())
}

#[test]
fn chdir_moves_relative_paths_and_answers_as_linux() {
    let dir = tempfile::tempdir().unwrap();
    let host_dir = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(host_dir.join("a/b")).unwrap();
    std::fs::write(host_dir.join("file"), "f").unwrap();
    std::os::unix::fs::symlink("a/b", host_dir.join("to_b")).unwrap();
    std::os::unix::fs::symlink("/", host_dir.join("out")).unwrap();
    let host = quiet()
        .preopen_dir(&host_dir, "/data")
        .cwd("/")
        .build()
        .unwrap();
    let r = runs_of(host, 1, |fs| {
        let steps = vec![
            cd(fs, b"/data/a"),
            cd(fs, b"b"),
            cd(fs, b".."),
            cd(fs, b"./b/../../to_b"),
            // A relative create lands in the new working directory.
            fs.openat(AT_FDCWD, b"made", O_WRONLY | O_CREAT, 0o644)
                .and_then(|fd| fs.close(fd))
                .and_then(|()| cwd(fs)),
            cd(fs, b"/data/file"),
            cd(fs, b"/data/none"),
            cd(fs, b"/data/out"),
            cd(fs, b"/etc"),
            cwd(fs),
            cd(fs, b"/"),
            cd(fs, b"data"),
        ];
        steps
    });
    assert_eq!(
        r[0],
        [
            ok("/data/a"),
            ok("/data/a/b"),
            ok("/data/a"),
            ok("/data/a/b"),
            ok("/data/a/b"),
            Err(Errno(ENOTDIR)),
            Err(Errno(ENOENT)),
            Err(Errno(EACCES)),
            Err(Errno(EACCES)),
            ok("/data/a/b"),
            ok("/"),
            ok("/data"),
        ],
        "into a grant, down, up, through a link (answered canonical, as Linux's getcwd), \
         a file, nothing, a link out of the grant, outside every grant (each refusal \
         leaves the working directory as it was), the way to a grant"
    );
    assert!(host_dir.join("a/b/made").exists());
}

#[test]
fn each_run_starts_in_the_hosts_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let host = quiet()
        .preopen_dir(dir.path(), "/data")
        .cwd("/data")
        .build()
        .unwrap();
    let r = runs_of(host, 2, |fs| (cwd(fs), cd(fs, b"sub")));
    assert_eq!(r[0], (ok("/data"), ok("/data/sub")));
    assert_eq!(
        r[1], r[0],
        "the second run does not inherit the first's chdir"
    );
}

#[test]
fn a_program_returns_to_a_starting_directory_outside_the_grants() {
    let dir = tempfile::tempdir().unwrap();
    let host = quiet()
        .preopen_dir(dir.path(), "/data")
        .cwd("/work/here")
        .build()
        .unwrap();
    let r = runs_of(host, 1, |fs| {
        [
            cwd(fs),
            cd(fs, b"/data"),
            cd(fs, b"/work/here"),
            cd(fs, b"/work"),
            cd(fs, b"/work/there"),
        ]
    });
    assert_eq!(
        r[0],
        [
            ok("/work/here"),
            ok("/data"),
            ok("/work/here"),
            Err(Errno(EACCES)),
            Err(Errno(EACCES)),
        ],
        "the start is a directory of the program's view; what is beside it is not"
    );
}

fn self_exe(fs: &Client<Emu, dyn Fs>) -> Answer {
    let mut out = [0u8; 256];
    fs.readlink(b"/proc/self/exe", &mut out)
        .map(|n| out[..n].to_vec())
}

#[test]
fn proc_self_exe_is_the_executables_guest_path_where_a_grant_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let exe = dir.path().join("bin/prog.gpu");
    std::fs::write(&exe, "").unwrap();
    let granted = quiet()
        .preopen_dir_readonly(dir.path(), "/opt")
        .executable(&exe)
        .build()
        .unwrap();
    let outside = quiet().executable(&exe).build().unwrap();
    let unknown = quiet().preopen_dir(dir.path(), "/opt").build().unwrap();
    let read = |host| runs_of(host, 1, |fs| (self_exe(fs), cd(fs, b"/proc/self")))[0].clone();
    assert_eq!(read(granted), (ok("/opt/bin/prog.gpu"), Err(Errno(EACCES))));
    assert_eq!(
        read(outside).0,
        Err(Errno(EACCES)),
        "outside every grant, as any path there"
    );
    assert_eq!(read(unknown).0, Err(Errno(EACCES)), "no executable named");
}
