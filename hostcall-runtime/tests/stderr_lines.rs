//! Std's runtime messages reach stderr whole-line, as `println!`'s do. std
//! writes `memory allocation of 1152 bytes failed` (and its other runtime messages) to
//! the raw stderr in pieces, one `write` each; 33,792 GPU threads failing at once gave
//! `memory allocation of memory allocation of ... 115211521152...` on the H100.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Barrier};

use common::quiet;
use hostcall_client::fd_io;
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Launch, Outcome};

const BLOCKS: u32 = 2;
const THREADS: u32 = 32;

#[test]
fn each_threads_stderr_line_written_in_pieces_comes_out_whole() {
    let threads = (BLOCKS * THREADS) as usize;
    let tickets = Arc::new(AtomicU64::new(0));
    // Every thread writes its first piece, then every thread its second, and so on:
    // the pieces of all lines interleave as much as they can.
    let step = Arc::new(Barrier::new(threads));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let size = (t.block * THREADS + t.thread) * 8 + 1000;
        let pieces = [
            "memory allocation of ".to_string(),
            size.to_string(),
            " bytes failed\n".to_string(),
        ];
        for piece in &pieces {
            step.wait();
            fd_io::write_posted::<Emu>(t.channel(), 2, piece.as_bytes(), &tickets);
        }
        if t.thread == 0 {
            // Lines their threads never end show when the launch does, each on a line
            // of its own but for the last.
            let unended = format!("unended {}", t.block);
            fd_io::write_posted::<Emu>(t.channel(), 2, unended.as_bytes(), &tickets);
        }
    });
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", BLOCKS, THREADS, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let err = String::from_utf8(r.stderr).unwrap();
    let (lines, unended) = err.split_at(err.find("unended").expect("the unended lines"));
    assert_eq!(unended, "unended 0\nunended 1", "{err}");
    let lines = lines.strip_suffix('\n').expect("whole lines");
    let mut sizes: Vec<u32> = lines
        .split('\n')
        .map(|l| {
            l.strip_prefix("memory allocation of ")
                .and_then(|l| l.strip_suffix(" bytes failed"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("a line in pieces: {l:?}"))
        })
        .collect();
    sizes.sort_unstable();
    let expected: Vec<u32> = (0..BLOCKS * THREADS).map(|i| i * 8 + 1000).collect();
    assert_eq!(sizes, expected);
}
