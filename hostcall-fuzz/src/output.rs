//! What a fuzzed launch prints, and the check that all of it reached the host's stdout
//! and stderr through a pipe whose reader may pause.
//!
//! Its threads print through the client's print path (`fd_io::write_posted`: a posted
//! piece up to 4 KiB, a copy out of GPU memory above it; and `fd_io::write_ordered`, as
//! from a buffer outside global memory), sizes chosen across those paths, between the
//! case's other calls. For the launch, the process's fds 1 and 2 are pipes, each read
//! by a thread that takes what comes eagerly, stops for a while, or trickles.
//!
//! Every printed byte says whose it is: thread `t` prints only bytes `0x80 | r << 5 | t`
//! (`r` pseudo-random) and newlines, and a newline always follows a byte of its own
//! write, or of its part of a larger write, which the host never splits. So a reader
//! takes each thread's bytes apart, a newline going to the thread of the byte before
//! it when that thread's next byte is one. Bytes that are no thread's (a line of the
//! test harness, a newline the host adds between threads' unended stderr lines at the
//! end) are left aside: the check ([`Plan::check`]) is that nothing a write that
//! returned printed is lost, and nothing printed duplicated or reordered within its
//! thread, not that nothing else is there.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use hostcall_abi::WARP_SIZE;
use hostcall_client::fd_io::{self, ORDERED_BATCH, POSTED_WHOLE_MAX};
use hostcall_emulator::{Emu, EmuThread};

/// Bytes a case prints at most, over every thread: enough for pipes to fill and parts
/// of ordered writes to interleave, little enough to stay well inside the launch's
/// time limit.
const PRINTED_MAX: usize = 8 << 20;
/// Prints a case makes at most.
const PRINTS_MAX: usize = 64;
/// Sizes near which the print path changes: one posted piece, two pieces, one and two
/// ordered parts.
const BOUNDARIES: [usize; 4] = [
    POSTED_WHOLE_MAX,
    2 * POSTED_WHOLE_MAX,
    ORDERED_BATCH,
    2 * ORDERED_BATCH,
];

/// What a launch prints, and how the host's stdout and stderr are read.
#[derive(Arbitrary, Debug)]
pub(crate) struct Output {
    /// The readers of stdout and stderr.
    readers: [Reading; 2],
    prints: Vec<Print>,
}

/// How a reader of the host's stdout or stderr takes what the GPU printed: output lost
/// while that reader is slow is what this fuzzes for.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Reading {
    /// As fast as it comes.
    Eager,
    /// Stops for `ms % 150` ms once it has read `16 × after` bytes, then reads eagerly.
    Stalls { after: u16, ms: u8 },
    /// Reads at most `chunk + 1` bytes a millisecond for the first `ms % 150` ms, then
    /// eagerly.
    Trickles { chunk: u16, ms: u8 },
}

#[derive(Arbitrary, Debug)]
struct Print {
    /// The printing thread, modulo a warp.
    thread: u8,
    /// Before which of the case's packets the thread prints (past the last: after it).
    at: u8,
    stderr: bool,
    size: Size,
    lines: Lines,
    /// Through `write_ordered` in parts, as a write from outside global memory goes,
    /// rather than `write_posted`.
    ordered: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    /// Up to one posted piece.
    Piece(u16),
    /// Within 2 bytes of one of [`BOUNDARIES`].
    Near { boundary: u8, by: i8 },
    /// Up to 2.5 MiB, in KiB.
    Large(u16),
}

impl Size {
    fn bytes(self) -> usize {
        match self {
            Size::Piece(n) => n as usize % (POSTED_WHOLE_MAX + 1),
            Size::Near { boundary, by } => {
                let b = BOUNDARIES[boundary as usize % BOUNDARIES.len()];
                b.saturating_add_signed((by % 3) as isize)
            }
            Size::Large(k) => (k as usize % 2560 + 1) << 10,
        }
    }
}

/// Where a print has newlines.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Lines {
    None,
    /// Its last byte.
    End,
    /// Every `n + 2`th byte.
    Every(u8),
}

/// A print of `len` bytes by `thread`: bytes `0x80 | r << 5 | thread`, each `r` two
/// bits of `rng`'s next values, eight bytes a word, and newlines where `lines` says. A
/// newline never starts a part of an ordered write (its first byte, or one
/// `ORDERED_BATCH` on), so whatever another thread printed between two parts ends
/// before a byte of this one.
fn content(thread: usize, len: usize, lines: Lines, rng: &mut u64) -> Vec<u8> {
    let base = 0x8080_8080_8080_8080 | (thread as u64 * 0x0101_0101_0101_0101);
    let mut bytes = vec![0u8; len.next_multiple_of(8)];
    for (i, word) in bytes.as_chunks_mut::<8>().0.iter_mut().enumerate() {
        if i % 4 == 0 {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
        }
        let r = *rng >> (16 * (i % 4));
        let spread = (0..8).fold(0, |w, k| w | ((r >> (2 * k)) & 3) << (8 * k + 5));
        *word = (base | spread).to_le_bytes();
    }
    bytes.truncate(len);
    let mut newline = |i: usize| {
        if !i.is_multiple_of(ORDERED_BATCH) {
            bytes[i] = b'\n';
        }
    };
    match lines {
        Lines::None => {}
        Lines::End => len.checked_sub(1).into_iter().for_each(&mut newline),
        Lines::Every(n) => (n as usize + 1..len)
            .step_by(n as usize + 2)
            .for_each(&mut newline),
    }
    bytes
}

/// One print of a thread, made before the case's packet `at`.
struct Step {
    at: usize,
    fd: i32,
    ordered: bool,
    bytes: Vec<u8>,
}

/// A launch's prints, thread by thread, and what each thread's stdout and stderr must
/// then carry.
pub(crate) struct Plan {
    steps: Vec<Vec<Step>>,
    /// Each thread's bytes to fd 1 and to fd 2, in its order.
    expected: [Vec<Vec<u8>>; 2],
    /// The launch's tickets for fds 1 and 2, as libc keeps them in the launch state.
    tickets: [AtomicU64; 2],
    /// How many of its steps each thread made to the end, in order: an exit lets the
    /// others run on, a stop traps a thread mid-write.
    done: Vec<AtomicUsize>,
}

impl Plan {
    /// The prints of `output` in a launch of `threads` threads (more if a print asks for
    /// a later thread) making `packets` packets of calls.
    pub fn new(output: &Output, threads: usize, packets: usize) -> Plan {
        let prints = &output.prints[..output.prints.len().min(PRINTS_MAX)];
        let threads = prints
            .iter()
            .map(|p| p.thread as usize % WARP_SIZE + 1)
            .fold(threads, usize::max);
        let mut plan = Plan {
            steps: (0..threads).map(|_| Vec::new()).collect(),
            expected: [vec![Vec::new(); threads], vec![Vec::new(); threads]],
            tickets: Default::default(),
            done: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
        };
        let mut rngs: Vec<u64> = (0..threads as u64).map(|t| t + 0x9e37_79b9).collect();
        let mut left = PRINTED_MAX;
        for p in prints {
            let t = p.thread as usize % WARP_SIZE;
            let len = p.size.bytes().min(left);
            left -= len;
            plan.steps[t].push(Step {
                at: p.at as usize % (packets + 1),
                fd: 1 + i32::from(p.stderr),
                ordered: p.ordered,
                bytes: content(t, len, p.lines, &mut rngs[t]),
            });
        }
        // A thread prints in the order of its steps' packets.
        for (t, steps) in plan.steps.iter_mut().enumerate() {
            steps.sort_by_key(|s| s.at);
            for s in steps.iter() {
                plan.expected[s.fd as usize - 1][t].extend_from_slice(&s.bytes);
            }
        }
        plan
    }

    /// Threads the launch needs for its prints and calls.
    pub fn threads(&self) -> usize {
        self.steps.len()
    }

    /// Makes `t`'s prints due before the case's packet `at` (after the last packet
    /// when `at` is their number).
    pub fn print(&self, t: &EmuThread, at: usize) {
        let Some(steps) = self.steps.get(t.thread as usize) else {
            return;
        };
        let done = &self.done[t.thread as usize];
        for (i, s) in steps.iter().enumerate().filter(|(_, s)| s.at == at) {
            let tickets = &self.tickets[s.fd as usize - 1];
            let whole = if s.ordered {
                s.bytes
                    .chunks(ORDERED_BATCH)
                    .all(|part| fd_io::write_ordered::<Emu>(t.channel(), s.fd, part, tickets))
            } else {
                fd_io::write_posted::<Emu>(t.channel(), s.fd, &s.bytes, tickets);
                true
            };
            if whole && done.load(Relaxed) == i {
                // Read once the launch has ended, after the thread (joined) has.
                done.store(i + 1, Relaxed);
            }
        }
    }

    /// Checks that `got`, what the readers of stdout and stderr received once the
    /// launch ended, carries each thread's bytes to each in the thread's order, none
    /// duplicated: all of what its writes that returned printed, then at most the start
    /// of the write it was stopped in.
    pub fn check(&self, got: &[Vec<u8>; 2]) -> Result<(), String> {
        for (fd, (stream, expected)) in (1..).zip(got.iter().zip(&self.expected)) {
            let returned: Vec<usize> = (self.steps.iter().zip(&self.done))
                .map(|(steps, done)| {
                    let steps = steps[..done.load(Relaxed)].iter();
                    steps.filter(|s| s.fd == fd).map(|s| s.bytes.len()).sum()
                })
                .collect();
            follow(stream, expected, &returned).map_err(|e| format!("fd {fd}: {e}"))?;
        }
        Ok(())
    }
}

/// Follows each thread through `stream`: a byte of thread `t` ([`content`]) must be
/// `t`'s next in `expected`, and so is a newline after `t`'s byte when `t`'s next is a
/// newline; any other byte is no thread's. At the end every thread `t` must be past
/// its first `returned[t]` bytes. A thread's bytes come in runs, each compared at once.
fn follow(stream: &[u8], expected: &[Vec<u8>], returned: &[usize]) -> Result<(), String> {
    let mut at = vec![0; expected.len()];
    let mut last = None;
    let mut foreign = 0;
    let mut p = 0;
    while let Some(&b) = stream.get(p) {
        let owner = match b {
            0x80.. => Some((b & 31) as usize).filter(|&t| t < expected.len()),
            b'\n' => last.filter(|&t: &usize| expected[t].get(at[t]) == Some(&b)),
            _ => None,
        };
        let Some(t) = owner else {
            foreign += 1;
            p += 1;
            continue;
        };
        let run = common_prefix(&stream[p..], &expected[t][at[t]..]);
        if run == 0 {
            return Err(format!(
                "byte {p} of the stream is thread {t}'s, but not its byte {} of {}",
                at[t],
                expected[t].len()
            ));
        }
        at[t] += run;
        p += run;
        last = Some(t);
    }
    for (t, (&at, &returned)) in at.iter().zip(returned).enumerate() {
        if at < returned {
            return Err(format!(
                "thread {t}'s writes that returned printed {returned} bytes and {at} came \
                 through (the stream carried {} bytes, {foreign} of them no thread's)",
                stream.len(),
            ));
        }
    }
    Ok(())
}

/// How many bytes `a` and `b` share at their start.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut n = 0;
    for (x, y) in a.chunks(256).zip(b.chunks(256)) {
        if x != y {
            return n + x.iter().zip(y).take_while(|(p, q)| p == q).count();
        }
        n += x.len();
    }
    n
}

/// Held while the process's stdout and stderr are pipes: one launch at a time may
/// take them.
static REDIRECTED: Mutex<()> = Mutex::new(());

/// The process's own stdout and stderr while a launch has pipes in their place.
static SAVED: Mutex<Option<[OwnedFd; 2]>> = Mutex::new(None);

/// Puts the process's own stdout and stderr back, if a launch has them.
fn give_back(saved: &mut Option<[OwnedFd; 2]>) {
    if let Some([out, err]) = saved.take() {
        rustix::stdio::dup2_stdout(&out).expect("restoring stdout");
        rustix::stdio::dup2_stderr(&err).expect("restoring stderr");
    }
}

/// The process's stdout and stderr made pipes for a launch, each read by a thread as
/// its [`Reading`] says, until [`Streams::restore`].
pub(crate) struct Streams {
    readers: Vec<JoinHandle<Vec<u8>>>,
    _one: MutexGuard<'static, ()>,
}

impl Streams {
    pub fn redirect(output: &Output) -> Streams {
        static HOOK: Once = Once::new();
        // A panic anywhere (a host thread's, an invariant's) gives the streams back
        // first, so its message and the fuzzer's report reach the real stderr.
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if let Ok(mut saved) = SAVED.try_lock() {
                    give_back(&mut saved);
                }
                previous(info)
            }));
        });
        let one = REDIRECTED.lock().unwrap_or_else(|p| p.into_inner());
        let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
        *saved = Some(
            [rustix::stdio::stdout(), rustix::stdio::stderr()]
                .map(|fd| rustix::io::dup(fd).expect("saving stdout or stderr")),
        );
        let readers = output
            .readers
            .iter()
            .enumerate()
            .map(|(i, &how)| {
                let (read, write) = rustix::pipe::pipe().expect("a pipe");
                if i == 0 {
                    rustix::stdio::dup2_stdout(&write).expect("stdout to a pipe");
                } else {
                    rustix::stdio::dup2_stderr(&write).expect("stderr to a pipe");
                }
                std::thread::spawn(move || read_all(read, how))
            })
            .collect();
        Streams { readers, _one: one }
    }

    /// Gives the process its stdout and stderr back, which ends the pipes, and returns
    /// what each reader received.
    pub fn restore(self) -> [Vec<u8>; 2] {
        give_back(&mut SAVED.lock().unwrap_or_else(|p| p.into_inner()));
        let mut got = self
            .readers
            .into_iter()
            .map(|r| r.join().expect("a reader of the host's output"));
        [(); 2].map(|()| got.next().expect("two readers"))
    }
}

/// Reads `pipe` to its end, as `how` says.
fn read_all(pipe: OwnedFd, how: Reading) -> Vec<u8> {
    let started = Instant::now();
    let mut pipe = File::from(pipe);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut stall = match how {
        Reading::Stalls { after, ms } => {
            Some((after as usize * 16, Duration::from_millis(ms as u64 % 150)))
        }
        _ => None,
    };
    loop {
        if let Some((after, pause)) = stall
            && got.len() >= after
        {
            std::thread::sleep(pause);
            stall = None;
        }
        let want = match how {
            Reading::Trickles { chunk, ms } if started.elapsed().as_millis() < ms as u128 % 150 => {
                std::thread::sleep(Duration::from_millis(1));
                (chunk as usize + 1).min(buf.len())
            }
            _ => buf.len(),
        };
        match pipe.read(&mut buf[..want]) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the host's output: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads' prints interleaved at the places the host may interleave them, with
    /// a line that is no thread's between a byte and its newline, come apart whole; a
    /// lost or repeated byte does not.
    #[test]
    fn interleaved_prints_come_apart_by_thread() {
        let mut rng = [1u64, 2];
        let a = content(0, 10, Lines::Every(1), &mut rng[0]);
        let b = content(5, 7, Lines::End, &mut rng[1]);
        assert_eq!((a[2], a[5], b[6]), (b'\n', b'\n', b'\n'));
        assert!(a.iter().chain(&b).all(|&c| c == b'\n' || c >= 0x80));
        let mut stream = a[..2].to_vec();
        stream.extend_from_slice(b"test harness line\n");
        stream.extend_from_slice(&a[2..]);
        stream.extend_from_slice(&b);
        stream.push(b'\n');
        let mut expected = vec![Vec::new(); 6];
        expected[0] = a;
        expected[5] = b;
        let all = [10, 0, 0, 0, 0, 7];
        assert_eq!(follow(&stream, &expected, &all), Ok(()));
        let mut lost = stream.clone();
        lost.remove(0);
        assert!(follow(&lost, &expected, &all).is_err());
        let mut repeated = stream.clone();
        repeated.insert(0, repeated[0]);
        assert!(follow(&repeated, &expected, &all).is_err());
        // Thread 5 stopped in its write: the start of it may come through, or none.
        let cut = &stream[..stream.len() - 4];
        assert!(follow(cut, &expected, &all).is_err());
        assert_eq!(follow(cut, &expected, &[10, 0, 0, 0, 0, 0]), Ok(()));
    }
}
