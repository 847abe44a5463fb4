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
//! end) are left aside: the check is that nothing printed is lost, duplicated or
//! reordered within its thread, not that nothing else is there.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
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

/// The byte thread `thread` prints for the pseudo-random `r`.
fn symbol(thread: usize, r: u64) -> u8 {
    0x80 | ((r as u8 & 3) << 5) | thread as u8
}

/// A print of `len` bytes by `thread`, its symbols drawn from `rng`. A newline never
/// starts a part of an ordered write (its first byte, or one `ORDERED_BATCH` on), so
/// whatever another thread printed between two parts ends before a byte of this one.
fn content(thread: usize, len: usize, lines: Lines, rng: &mut u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let newline = match lines {
                Lines::None => false,
                Lines::End => i + 1 == len,
                Lines::Every(n) => (i + 1) % (n as usize + 2) == 0,
            };
            if newline && i % ORDERED_BATCH != 0 {
                return b'\n';
            }
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            symbol(thread, *rng)
        })
        .collect()
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
        for s in steps.iter().filter(|s| s.at == at) {
            let tickets = &self.tickets[s.fd as usize - 1];
            if s.ordered {
                for part in s.bytes.chunks(ORDERED_BATCH) {
                    if !fd_io::write_ordered::<Emu>(t.channel(), s.fd, part, tickets) {
                        break;
                    }
                }
            } else {
                fd_io::write_posted::<Emu>(t.channel(), s.fd, &s.bytes, tickets);
            }
        }
    }

    /// Checks that `got`, what the readers of stdout and stderr received, carries
    /// every thread's bytes to each, in the thread's order, none lost or duplicated.
    pub fn check(&self, got: &[Vec<u8>; 2]) -> Result<(), String> {
        for (fd, (stream, expected)) in got.iter().zip(&self.expected).enumerate() {
            let (threads, foreign) = apart(stream, expected);
            for (t, (got, want)) in threads.iter().zip(expected).enumerate() {
                if got != want {
                    let at = got.iter().zip(want).take_while(|(a, b)| a == b).count();
                    return Err(format!(
                        "fd {}: thread {t} printed {} bytes, {} came through as its, \
                         differing from byte {at} on (the stream carried {} bytes, \
                         {foreign} of them no thread's)",
                        fd + 1,
                        want.len(),
                        got.len(),
                        stream.len(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Each thread's bytes in `stream`, by [`symbol`], and how many bytes were no
/// thread's. A newline goes to the thread of the last symbol before it when that
/// thread's next byte, as `expected` has it, is a newline.
fn apart(stream: &[u8], expected: &[Vec<u8>]) -> (Vec<Vec<u8>>, usize) {
    let mut threads = vec![Vec::new(); expected.len()];
    let mut last = None;
    let mut foreign = 0;
    for &b in stream {
        let owner = match b {
            0x80.. => Some((b & 31) as usize).filter(|&t| t < threads.len()),
            b'\n' => last.filter(|&t: &usize| expected[t].get(threads[t].len()) == Some(&b)),
            _ => None,
        };
        match owner {
            Some(t) => {
                threads[t].push(b);
                if b != b'\n' {
                    last = Some(t);
                }
            }
            None => foreign += 1,
        }
    }
    (threads, foreign)
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
    /// lost byte does not.
    #[test]
    fn interleaved_prints_come_apart_by_thread() {
        let mut rng = [1u64, 2];
        let a = content(0, 10, Lines::Every(1), &mut rng[0]);
        let b = content(5, 7, Lines::End, &mut rng[1]);
        assert_eq!(a[2], b'\n');
        assert_eq!(b[6], b'\n');
        let mut stream = a[..2].to_vec();
        stream.extend_from_slice(b"test harness line\n");
        stream.extend_from_slice(&a[2..]);
        stream.extend_from_slice(&b);
        stream.push(b'\n');
        let mut expected = vec![Vec::new(); 6];
        expected[0] = a.clone();
        expected[5] = b.clone();
        let (threads, foreign) = apart(&stream, &expected);
        assert_eq!((&threads[0], &threads[5]), (&a, &b));
        assert_eq!(foreign, b"test harness line\n".len() + 1);
        stream.remove(0);
        assert_ne!(apart(&stream, &expected).0[0], a);
    }
}
