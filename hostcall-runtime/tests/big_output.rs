//! One write to stdout of more than 256 MiB reserved more than 65,536
//! tickets at once, so another thread's line numbered meanwhile fell outside the host's
//! window and was lost; two threads each printing more than 64 MiB at once lost output
//! through the held-bytes limit. A write of any size now keeps every other thread's
//! output, whole and in its order, whether it goes by DMA in its turn or in pieces
//! that wait for room. A test binary of its own: it moves ~700 MB.

mod common;

use std::sync::atomic::AtomicU64;

use common::{quiet, run_on};
use hostcall_client::fd_io;
use hostcall_emulator::Emu;

/// The stdout tickets of the launch (libc keeps them in the launch state).
static TICKETS: AtomicU64 = AtomicU64::new(0);

const BIG: usize = 260 << 20;
const LARGE: usize = 70 << 20;
const LINES: usize = 300;

#[test]
fn huge_writes_lose_no_other_output_and_keep_every_order() {
    let host = quiet().capture_limit(400 << 20);
    let (_, report) = run_on(host, 6, |ch, t| match t.thread {
        0 => {
            fd_io::write_posted::<Emu>(ch, 1, &vec![b'x'; BIG], &TICKETS);
        }
        1 => {
            // The path of a large write from other than global memory (the emulator's
            // memory all counts as global, so `write_posted` takes the DMA path).
            for part in vec![b'y'; LARGE].chunks(fd_io::ORDERED_BATCH) {
                assert!(fd_io::write_ordered::<Emu>(ch, 1, part, &TICKETS));
            }
        }
        n => {
            for i in 0..LINES {
                let line = format!("line {n} {i}\n");
                fd_io::write_posted::<Emu>(ch, 1, line.as_bytes(), &TICKETS);
            }
        }
    });
    let out = report.stdout;
    let (mut x, mut y) = (0, 0);
    let mut next = [0usize; 6];
    let mut rest = &out[..];
    while let Some(&b) = rest.first() {
        match b {
            b'x' => (x, rest) = (x + 1, &rest[1..]),
            b'y' => (y, rest) = (y + 1, &rest[1..]),
            _ => {
                let end = rest.iter().position(|&c| c == b'\n').expect("a whole line");
                let line = std::str::from_utf8(&rest[..end]).unwrap();
                let mut words = line.split(' ').skip(1).map(|w| w.parse::<usize>().unwrap());
                let (n, i) = (words.next().unwrap(), words.next().unwrap());
                assert_eq!(i, next[n], "thread {n}'s lines out of order");
                next[n] += 1;
                rest = &rest[end + 1..];
            }
        }
    }
    assert_eq!((x, y), (BIG, LARGE), "the large writes arrived whole");
    assert_eq!(next[2..], [LINES; 4], "every line arrived");
}
