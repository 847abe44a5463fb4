//! `getdents` kept a whole copy of the directory per fd (1,000 fds on
//! a 20,000-entry directory cost the host 1.65 GiB). It now reads each directory as it
//! is listed, keeping O(`room`) per call and a small read buffer per fd. A test binary
//! of its own: it counts every allocation of the process.

mod common;

use hostcall_abi::fcntl::O_DIRECTORY;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::AtomicIsize;
use std::sync::atomic::Ordering::Relaxed;

use common::{c, quiet, run_on, svc};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::std_services::Fs;

/// Bytes allocated and not yet freed, process-wide.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every call goes to `System` unchanged; only the count is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

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
        let before = LIVE.load(Relaxed);
        let mut out = [0u8; 32];
        for _ in 0..FDS {
            let fd = c(svc::<dyn Fs>(ch).openat(AT_FDCWD, b"/big", O_DIRECTORY, 0)) as i32;
            assert!(fd >= 3);
            assert!(c(svc::<dyn Fs>(ch).getdents(fd, &mut out)) > 0);
        }
        LIVE.load(Relaxed) - before
    });
    let per_fd = grown / FDS as isize;
    eprintln!("{per_fd} bytes per listing fd ({grown} in all)");
    assert!(
        per_fd < 64 << 10,
        "{per_fd} bytes per listing fd ({grown} in all)"
    );
}
