//! Pipes between threads and to a slow reader, by an ordinary std program: run as it is
//! on the CPU and on the GPU (`cargo gpu build`), with the same output on both
//! (`bench/device-runs/run.sh NAME pipes`).
//!
//!     pipes-bench fifos THREADS DIR [PAIRS_AT_ONCE]   THREADS threads open FIFOs in pairs
//!     pipes-bench stream BYTES CODE [WRITERS]         prints BYTES bytes, exits with CODE
//!     pipes-bench pace RATE [BYTES]                   reads stdin at RATE bytes a second
//!
//! - `fifos` (`fifos.rs`): thread `i` reads `DIR/fifo-i`, which its peer `i ^ 1` writes,
//!   then writes its peer's; every open waits for the other end, as on Linux, and `stat`
//!   and `print!` calls come between. std cannot make a FIFO (and a GPU program has no
//!   `mkfifo`): the caller makes them, `mkfifo DIR/fifo-{0..THREADS-1}`. Its stdout is
//!   three lines a thread, in whatever order the threads ran, then one line of totals;
//!   sorted, it is the same on the CPU and the GPU. One JSON line of times on stderr.
//! - `stream` (`stream.rs`): prints numbered 64-byte lines, in order, from WRITERS
//!   threads (default 8) taking turns by 64 KiB chunk, while one more thread that never
//!   prints calls the host every millisecond and notes the longest wait for an answer;
//!   then exits with CODE. One JSON line of times on stderr.
//! - `pace`: copies stdin to stdout at most RATE bytes a second (0: as fast as it
//!   comes), checking that it is `stream`'s output, every byte in order (and BYTES of it
//!   if given). On stderr one line of what arrived, the same wherever the stream came
//!   from, and one JSON line of times; exits 1 if anything differed.

mod fifos;
mod stream;

/// Ends the program with a usage message.
fn usage() -> ! {
    eprintln!(
        "usage: pipes-bench fifos THREADS DIR [PAIRS_AT_ONCE] | pipes-bench stream BYTES CODE [WRITERS] \
         | pipes-bench pace RATE [BYTES]"
    );
    std::process::exit(2)
}

/// Argument `i` as a number, or the usage message.
fn number<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage())
}

/// Argument `i` as a number if given, else `default`.
fn number_or<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> T {
    match args.get(i) {
        Some(_) => number(args, i),
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("fifos") => {
            let dir = args.get(3).unwrap_or_else(|| usage());
            let threads: usize = number(&args, 2);
            let at_once = number_or(&args, 4, fifos::PAIRS_AT_ONCE);
            if threads < 2 || !threads.is_multiple_of(2) || at_once == 0 {
                eprintln!(
                    "pipes-bench fifos: THREADS must be an even number, at least 2, and PAIRS_AT_ONCE at least 1"
                );
                std::process::exit(2);
            }
            fifos::run(threads, std::path::Path::new(dir), at_once)
        }
        Some("stream") => {
            let bytes: u64 = number(&args, 2);
            let code: i32 = number(&args, 3);
            let writers = number_or(&args, 4, stream::WRITERS);
            if !bytes.is_multiple_of(stream::LINE as u64) || writers == 0 {
                eprintln!(
                    "pipes-bench stream: BYTES must be a multiple of {} (whole lines), WRITERS at least 1",
                    stream::LINE
                );
                std::process::exit(2);
            }
            stream::print(bytes, code, writers)
        }
        Some("pace") => {
            let rate: u64 = number(&args, 2);
            let expected = args.get(3).map(|_| number::<u64>(&args, 3));
            stream::pace(rate, expected)
        }
        _ => usage(),
    }
}
