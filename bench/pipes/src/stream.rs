//! `stream` prints a known stream of lines and exits with a chosen code; `pace` reads it
//! slowly and checks it. The stream: line `n` (from 0) is `n` in 15 decimal digits, a
//! space, 47 letters of the alphabet starting at letter `n % 26`, and a newline, 64
//! bytes in all; BYTES of it is BYTES / 64 lines.

use std::io::{IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes of each line.
pub const LINE: usize = 64;
/// Threads printing unless given.
pub const WRITERS: usize = 8;
/// Lines each `print!` prints: 64 KiB.
const CHUNK_LINES: u64 = 1024;
/// Digits of the line number.
const DIGITS: usize = 15;
/// The letters a line's tail is cut from: every start, and 47 letters on.
const LETTERS: &[u8; 26 + LINE - DIGITS - 2] =
    b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstu";

/// The stream's lines from some line on, each made from the last by counting up its
/// digits in place.
struct Lines {
    n: u64,
    line: [u8; LINE],
}

impl Lines {
    /// The stream from line `n`.
    fn from(n: u64) -> Lines {
        let mut line = [b' '; LINE];
        let mut v = n;
        for d in line[..DIGITS].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        line[LINE - 1] = b'\n';
        let mut lines = Lines { n, line };
        lines.letters();
        lines
    }

    fn letters(&mut self) {
        let start = (self.n % 26) as usize;
        self.line[DIGITS + 1..LINE - 1].copy_from_slice(&LETTERS[start..start + LINE - DIGITS - 2]);
    }

    /// The current line.
    fn line(&self) -> &[u8; LINE] {
        &self.line
    }

    /// On to the next line.
    fn advance(&mut self) {
        self.n += 1;
        for d in self.line[..DIGITS].iter_mut().rev() {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                break;
            }
        }
        self.letters();
    }
}

/// `stream`: `bytes` bytes of the stream on stdout, chunk `c` printed by writer
/// `c % writers` in its turn (each makes its next chunk while the others print); then
/// the exit code `code`.
pub fn print(bytes: u64, code: i32, writers: usize) -> ! {
    let lines = bytes / LINE as u64;
    let chunks = lines.div_ceil(CHUNK_LINES);
    // The chunk whose turn it is to be printed.
    let turn = (Mutex::new(0u64), Condvar::new());
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let (took, bystander) = std::thread::scope(|s| {
        // A thread that never prints but calls the host every millisecond (`getcwd`):
        // the longest it waited between two answers.
        let bystander = s.spawn(|| {
            let (mut longest, mut wakes) = (Duration::ZERO, 0u64);
            let mut last = Instant::now();
            while !done.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                // Answered or refused, it went to the host and back.
                let _ = std::env::current_dir();
                let now = Instant::now();
                longest = longest.max(now - last);
                last = now;
                wakes += 1;
            }
            (longest, wakes)
        });
        let printing: Vec<_> = (0..writers as u64)
            .map(|w| {
                let turn = &turn;
                s.spawn(move || {
                    let mut text = String::with_capacity(CHUNK_LINES as usize * LINE);
                    for c in (w..chunks).step_by(writers) {
                        text.clear();
                        let mut at = Lines::from(c * CHUNK_LINES);
                        for _ in c * CHUNK_LINES..((c + 1) * CHUNK_LINES).min(lines) {
                            let line = std::str::from_utf8(at.line()).expect("ASCII");
                            text.push_str(line);
                            at.advance();
                        }
                        let (next, ready) = turn;
                        let mut next = next.lock().unwrap();
                        while *next != c {
                            next = ready.wait(next).unwrap();
                        }
                        // Nobody else prints until the turn moves on: the lock need not
                        // be held through a print that waits for the reader.
                        drop(next);
                        // `print!`, but a failure (the reader gone) ends the program at
                        // once rather than leave the other writers waiting for the turn.
                        if let Err(e) = std::io::stdout().write_all(text.as_bytes()) {
                            eprintln!("pipes-bench stream: printing chunk {c}: {e}");
                            std::process::exit(1)
                        }
                        *turn.0.lock().unwrap() = c + 1;
                        ready.notify_all();
                    }
                })
            })
            .collect();
        for p in printing {
            p.join().expect("a printing thread");
        }
        let took = started.elapsed();
        done.store(true, Relaxed);
        (took, bystander.join().expect("the bystander"))
    });
    let secs = took.as_secs_f64();
    eprintln!(
        "{{\"bytes\": {bytes}, \"writers\": {writers}, \"print_s\": {secs:.3}, \"mb_per_s\": {:.2}, \
         \"bystander_longest_ms\": {:.1}, \"bystander_wakes\": {}, \"exit\": {code}}}",
        bytes as f64 / secs / 1e6,
        bystander.0.as_secs_f64() * 1e3,
        bystander.1
    );
    std::process::exit(code)
}

/// Checks bytes against the stream, from its start.
struct Check {
    expected: Lines,
    /// Bytes of the current line already seen.
    at: usize,
    /// Bytes seen.
    seen: u64,
    /// The offset of the first byte that differed.
    differs: Option<u64>,
}

impl Check {
    fn new() -> Check {
        Check {
            expected: Lines::from(0),
            at: 0,
            seen: 0,
            differs: None,
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() && self.differs.is_none() {
            let want = &self.expected.line()[self.at..];
            let k = want.len().min(data.len());
            if let Some(d) = (0..k).find(|&j| want[j] != data[j]) {
                self.differs = Some(self.seen + d as u64);
                return;
            }
            self.seen += k as u64;
            self.at += k;
            data = &data[k..];
            if self.at == LINE {
                self.expected.advance();
                self.at = 0;
            }
        }
    }
}

/// `pace`: stdin copied to stdout (unless a terminal) at most `rate` bytes a second,
/// from its first byte, and checked against the stream; `expected`: the bytes it must
/// come to. Reports on stderr; exits 1 if it was not the stream, all of it.
pub fn pace(rate: u64, expected: Option<u64>) {
    let mut input = std::io::stdin().lock();
    let copy = !std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 << 10];
    let mut check = Check::new();
    let (mut got, mut first) = (0u64, None);
    let result = loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        let (t0, from) = *first.get_or_insert((Instant::now(), n as u64));
        got += n as u64;
        check.feed(&buf[..n]);
        if copy && let Err(e) = out.write_all(&buf[..n]) {
            break Err(e);
        }
        if rate > 0 {
            // The bytes after the first read are due at `rate` from its time.
            let due = Duration::from_secs_f64((got - from) as f64 / rate as f64);
            if let Some(early) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(early);
            }
        }
    };
    let result = result.and_then(|()| out.flush());
    let secs = first.map_or(0.0, |(t0, _)| t0.elapsed().as_secs_f64());
    let whole = got.is_multiple_of(LINE as u64);
    let mut ok = result.is_ok() && check.differs.is_none() && whole;
    let mut what = format!("received {got} bytes, {} lines", got / LINE as u64);
    if let Err(e) = &result {
        what += &format!("; then {e}");
    }
    match check.differs {
        Some(at) => {
            what += &format!(
                "; byte {at} (line {}, column {}) is not the stream's",
                at / LINE as u64,
                at % LINE as u64
            )
        }
        None if !whole => what += "; the last line cut short",
        None => what += ", every byte the stream's, in order",
    }
    if let Some(want) = expected.filter(|&w| w != got) {
        what += &format!("; {want} bytes expected");
        ok = false;
    }
    eprintln!("{what}");
    eprintln!(
        "{{\"bytes\": {got}, \"rate\": {rate}, \"read_s\": {secs:.3}, \"mb_per_s\": {:.2}}}",
        if secs > 0.0 {
            got as f64 / secs / 1e6
        } else {
            0.0
        }
    );
    if !ok {
        std::process::exit(1);
    }
}
