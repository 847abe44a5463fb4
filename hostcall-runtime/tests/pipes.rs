//! FIFOs between GPU threads on the emulated backend: a pipe's two ends in two threads,
//! in one warp or apart, pieces smaller and larger than the pipe's buffer. On Linux each
//! of these completes; on the GPU they must too, and no system call on a full or empty
//! pipe may stop the host's other work.

mod common;

use hostcall_abi::fcntl::{O_RDONLY, O_WRONLY};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use common::{c, c0, mkfifo, quiet, svc, within};
use hostcall_abi::fcntl::AT_FDCWD;
use hostcall_abi::std_services::Fs;
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{HostBuilder, Launch, Outcome};

/// Bytes each test sends through the FIFO: four times a pipe's default buffer.
const SENT: usize = 256 << 10;

/// Runs `threads` emulated GPU threads of one block in `mode` on `host`; returns each
/// thread's value, by thread, and fails if the run does not return within 30 s.
fn run(
    host: HostBuilder,
    mode: WarpMode,
    threads: u32,
    body: impl Fn(&EmuThread) -> i64 + Send + Sync + 'static,
) -> Vec<i64> {
    let out = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let o = out.clone();
    let mut m = EmulatedModule::new(mode).kernel("k", move |t: &EmuThread| {
        o[t.thread as usize].store(body(t) as u64, Relaxed);
    });
    let report = within(Duration::from_secs(30), "Host::run", move || {
        host.timeout(Duration::from_secs(20))
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", 1, threads, vec![]))
            .unwrap()
    });
    assert_eq!(report.outcome, Outcome::Completed, "{report:?}");
    out.iter().map(|v| v.load(Relaxed) as i64).collect()
}

/// Writes `SENT` bytes into `fd` in pieces of `piece` bytes; returns the bytes written.
fn send(t: &EmuThread, fd: i32, piece: usize) -> i64 {
    let data = vec![0x5a; piece];
    let mut sent = 0;
    while sent < SENT {
        let n = fd_io::write::<Emu>(t.channel(), fd, &data[..piece.min(SENT - sent)]);
        assert!(n > 0, "write: {n}");
        sent += n as usize;
    }
    c0(svc::<dyn Fs>(t.channel()).close(fd));
    sent as i64
}

/// Reads `fd` to its end in pieces of up to `piece` bytes; returns the bytes read.
fn drain(t: &EmuThread, fd: i32, piece: usize) -> i64 {
    let mut buf = vec![0u8; piece];
    let mut got = 0;
    loop {
        match fd_io::read::<Emu>(t.channel(), fd, &mut buf) {
            0 => break,
            n if n > 0 => {
                assert!(buf[..n as usize].iter().all(|&b| b == 0x5a));
                got += n;
            }
            e => panic!("read: {e}"),
        }
    }
    c0(svc::<dyn Fs>(t.channel()).close(fd));
    got
}

/// A GPU thread writing a FIFO in pieces under 4 KiB while another
/// reads it. Each write held the process's fd table locked through `write(2)`: once the
/// pipe was full the writer blocked holding it, the reader's `read` waited for the lock,
/// and `Host::run` never returned.
#[test]
fn a_fifo_written_in_small_pieces_while_another_thread_reads_it_moves_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("fifo"));
    let host = quiet().preopen_dir(dir.path(), "/data");
    let got = run(host, WarpMode::Independent, 2, |t| {
        if t.thread == 0 {
            let fd =
                c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, b"/data/fifo", O_WRONLY, 0)) as i32;
            send(t, fd, 1000)
        } else {
            let fd =
                c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, b"/data/fifo", O_RDONLY, 0)) as i32;
            // The writer fills the pipe meanwhile, and blocks.
            std::thread::sleep(Duration::from_millis(300));
            drain(t, fd, 1000)
        }
    });
    assert_eq!(got, [SENT as i64, SENT as i64]);
}

/// Two lanes of one warp open a FIFO's two ends at one call site,
/// then one writes and the other reads. The packet went to one pool job that served
/// its lanes one after the other: the reader's `open` waited for a writer whose `open`
/// was queued behind it. (Reads and writes of one size, so that in a lockstep warp,
/// whose lanes call together, every read is answered by the write in its packet.)
#[test]
fn two_lanes_of_one_warp_open_a_fifos_two_ends_together() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("fifo"));
    for mode in [WarpMode::Lockstep, WarpMode::Independent] {
        let host = quiet().preopen_dir(dir.path(), "/data");
        let got = run(host, mode, 2, |t| {
            let flags = if t.thread == 0 { O_RDONLY } else { O_WRONLY };
            let fd = c(svc::<dyn Fs>(t.channel()).openat(AT_FDCWD, b"/data/fifo", flags, 0)) as i32;
            assert!(fd >= 3, "open: {fd}");
            if t.thread == 0 {
                drain(t, fd, 3000)
            } else {
                send(t, fd, 3000)
            }
        });
        assert_eq!(got, [SENT as i64, SENT as i64], "{mode:?}");
    }
}
