//! `getdents` kept a whole copy of the directory per fd (1,000 fds on
//! a 20,000-entry directory cost the host 1.65 GiB). It now reads each directory as it
//! is listed, keeping O(`room`) per call and a small read buffer per fd. A test binary
//! of its own: it counts every allocation of the process.

mod common;

use common::counting::{Counting, live};
use common::{c, quiet, run_on, svc};
use hostcall_abi::fcntl::{AT_FDCWD, O_DIRECTORY};
use hostcall_abi::std_services::Fs;

#[global_allocator]
static A: Counting = Counting;

const FDS: usize = 100;
const ENTRIES: usize = 10_000;

#[test]
fn a_directory_listed_through_many_fds_costs_little_host_memory() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..ENTRIES {
        std::fs::File::create(dir.path().join(format!("entry-{i:06}"))).unwrap();
    }
    let host = quiet().preopen_dir_readonly(dir.path(), "/big");
    let (grown, _) = run_on(host, 1, |ch, _| {
        let before = live();
        let mut out = [0u8; 32];
        for _ in 0..FDS {
            let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/big", O_DIRECTORY, 0)) as i32;
            assert!(fd >= 3);
            assert!(c(svc::<dyn Fs>(ch).getdents(fd, &mut out)) > 0);
        }
        live() - before
    });
    let per_fd = grown / FDS as isize;
    eprintln!("{per_fd} bytes per listing fd ({grown} in all)");
    assert!(
        per_fd < 64 << 10,
        "{per_fd} bytes per listing fd ({grown} in all)"
    );
}
