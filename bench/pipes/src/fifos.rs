//! `fifos`: THREADS threads at once, thread `i` paired with `i ^ 1`, each pair talking
//! through two FIFOs the caller made: `fifo-i` is the one thread `i` reads and its peer
//! writes. The even thread of a pair reads first, then writes; the odd one writes first,
//! then reads, so each open of a FIFO's end meets its peer's open of the other end, and
//! waits for it as on Linux. Every thread:
//!
//! 1. `stat`s both its FIFOs (each must be one) and `println!`s a line;
//! 2. opens its first FIFO (waiting for the peer), `fstat`s it, and moves
//!    `ROUNDS` messages of `MESSAGE` bytes through it: the writer writes them and closes,
//!    the reader checks each, then reads the end of the file (waiting for the close);
//!    then `println!`s a line;
//! 3. does the same with its second FIFO, the other way round, and `println!`s a line.
//!
//! A thread holds one FIFO open at a time, but 4,096 threads would still hold more
//! files than a GPU program may (1,024 by default), and more than a CPU's usual limit:
//! at most PAIRS_AT_ONCE pairs (default [`PAIRS_AT_ONCE`]) are past step 1's `stat`s at
//! once. Pair `k` starts its opens once pair `k - PAIRS_AT_ONCE` has finished, so each
//! of PAIRS_AT_ONCE chains runs one pair after another; every thread has started, and
//! waits on its turn in a `Condvar`, meanwhile.
//!
//! stdout: the three lines of each thread, in the order the threads ran, then (from
//! `main`, after every thread has ended) one line of totals. Sorted, it is the same on
//! every run; the last line is the same too. stderr: one JSON line of times.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Pairs holding their FIFOs at once unless given: 512 open files at most, half of what
/// the GPU runtime allows a program by default.
pub const PAIRS_AT_ONCE: usize = 256;
/// Messages through each FIFO.
const ROUNDS: usize = 20;
/// Bytes of each message.
const MESSAGE: usize = 64;

/// The message `round` from thread `sender`: bytes that differ by sender, round and
/// position, so that a message from the wrong peer, or out of order, is seen.
fn message(sender: usize, round: usize) -> [u8; MESSAGE] {
    std::array::from_fn(|b| (sender * 31 + round * 7 + b) as u8)
}

/// What every thread counts, summed.
#[derive(Default)]
struct Totals {
    opens: AtomicUsize,
    stats: AtomicUsize,
    bytes: AtomicUsize,
    lines: AtomicUsize,
}

/// Whether each pair has finished (both of its threads), for the pairs that wait on it.
struct Turns {
    /// Threads of each pair that have finished.
    finished: Vec<Mutex<u8>>,
    /// Signalled when a pair finishes.
    ended: Vec<Condvar>,
    at_once: usize,
}

impl Turns {
    fn new(pairs: usize, at_once: usize) -> Turns {
        Turns {
            finished: (0..pairs).map(|_| Mutex::new(0)).collect(),
            ended: (0..pairs).map(|_| Condvar::new()).collect(),
            at_once,
        }
    }

    /// Waits until pair `pair` may hold its FIFOs: pair `pair - at_once` has finished.
    fn wait_for(&self, pair: usize) {
        let Some(before) = pair.checked_sub(self.at_once) else {
            return;
        };
        let mut done = self.finished[before].lock().unwrap();
        while *done < 2 {
            done = self.ended[before].wait(done).unwrap();
        }
    }

    /// One thread of pair `pair` has finished.
    fn finish(&self, pair: usize) {
        *self.finished[pair].lock().unwrap() += 1;
        self.ended[pair].notify_all();
    }
}

/// Opens `path` for reading or writing, counting the open and the `fstat` that checks
/// what it opened.
fn open(path: &Path, write: bool, totals: &Totals) -> std::io::Result<File> {
    let f = if write {
        File::options().write(true).open(path)?
    } else {
        File::open(path)?
    };
    totals.opens.fetch_add(1, Relaxed);
    let is_fifo = f.metadata()?.file_type().is_fifo();
    totals.stats.fetch_add(1, Relaxed);
    if !is_fifo {
        return Err(std::io::Error::other(format!(
            "{} is no longer a FIFO once open",
            path.display()
        )));
    }
    Ok(f)
}

/// Thread `i`'s half of the exchange through `path`: writes its messages and closes, or
/// reads its peer's, checking each, and then the end of the file. Returns the bytes it
/// read.
fn exchange(i: usize, path: &Path, write: bool, totals: &Totals) -> std::io::Result<usize> {
    let mut f = open(path, write, totals)?;
    if write {
        for round in 0..ROUNDS {
            f.write_all(&message(i, round))?;
        }
        return Ok(0);
    }
    let mut buf = [0u8; MESSAGE];
    for round in 0..ROUNDS {
        f.read_exact(&mut buf)?;
        if buf != message(i ^ 1, round) {
            return Err(std::io::Error::other(format!(
                "message {round} through {} is not what thread {} sent",
                path.display(),
                i ^ 1
            )));
        }
    }
    // The writer's close ends the file; nothing more may come.
    match f.read(&mut buf)? {
        0 => Ok(ROUNDS * MESSAGE),
        n => Err(std::io::Error::other(format!(
            "{n} bytes more than were sent through {}",
            path.display()
        ))),
    }
}

/// One thread: the steps of the module's doc.
fn thread(i: usize, dir: &Path, turns: &Turns, totals: &Totals) -> std::io::Result<()> {
    let pair = i / 2;
    let mine = dir.join(format!("fifo-{i}"));
    let theirs = dir.join(format!("fifo-{}", i ^ 1));
    for path in [&mine, &theirs] {
        let fifo = std::fs::metadata(path).map(|m| m.file_type().is_fifo());
        totals.stats.fetch_add(1, Relaxed);
        if !matches!(fifo, Ok(true)) {
            let why = fifo
                .err()
                .map_or("not a FIFO".to_owned(), |e| e.to_string());
            return Err(std::io::Error::other(format!(
                "{}: {why} (make the FIFOs with `mkfifo {}/fifo-{{0..THREADS-1}}`)",
                path.display(),
                dir.display()
            )));
        }
    }
    println!(
        "thread {i}: pair {pair}, fifo-{i} and fifo-{} are FIFOs",
        i ^ 1
    );
    totals.lines.fetch_add(1, Relaxed);
    turns.wait_for(pair);
    // The even thread reads first, the odd one writes first.
    let steps = if i.is_multiple_of(2) {
        [(&mine, false), (&theirs, true)]
    } else {
        [(&theirs, true), (&mine, false)]
    };
    for (path, write) in steps {
        let got = exchange(i, path, write, totals)?;
        totals.bytes.fetch_add(got, Relaxed);
        let name = path.file_name().unwrap().to_string_lossy();
        if write {
            println!("thread {i}: wrote {} bytes into {name}", ROUNDS * MESSAGE);
        } else {
            println!("thread {i}: read {got} bytes from {name}, as sent");
        }
        totals.lines.fetch_add(1, Relaxed);
    }
    turns.finish(pair);
    Ok(())
}

/// `fifos`: `threads` threads (even) through the FIFOs in `dir`, `at_once` pairs at once.
pub fn run(threads: usize, dir: &Path, at_once: usize) {
    let turns = Turns::new(threads / 2, at_once);
    let totals = Totals::default();
    let started = Instant::now();
    std::thread::scope(|s| {
        for i in 0..threads {
            let (turns, totals) = (&turns, &totals);
            // A thread that fails leaves its peer waiting for ever: the whole program
            // ends at once instead, saying why.
            s.spawn(move || {
                thread(i, dir, turns, totals).unwrap_or_else(|e| {
                    eprintln!("pipes-bench fifos: thread {i}: {e}");
                    std::process::exit(1)
                })
            });
        }
    });
    let took = started.elapsed();
    println!(
        "{threads} threads in {} pairs ({} at once): {} FIFO opens, {} stats, {} bytes received \
         ({ROUNDS} messages of {MESSAGE} bytes through each FIFO), {} lines printed",
        threads / 2,
        at_once.min(threads / 2),
        totals.opens.load(Relaxed),
        totals.stats.load(Relaxed),
        totals.bytes.load(Relaxed),
        totals.lines.load(Relaxed)
    );
    eprintln!(
        "{{\"threads\": {threads}, \"pairs_at_once\": {at_once}, \"fifos_s\": {:.3}}}",
        took.as_secs_f64()
    );
}
