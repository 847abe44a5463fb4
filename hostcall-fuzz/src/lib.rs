//! The fuzz case: an `arbitrary` sequence of packets (service, arguments, input bytes,
//! shared or lone) written into a port in host memory and served by the real server,
//! against a root seeded with escapes, optionally with a thread rewriting the port
//! while it is served. [`run`] panics on any broken invariant:
//!
//! - no handler panics (the server would turn one into `EIO`; it is counted and checked);
//! - every packet is answered (nothing hangs);
//! - every open GPU file lies under a mount, and nothing appears outside the root;
//! - a variable that was not granted is never returned;
//! - host memory held for the GPU stays under its bounds, and so does what the posted
//!   writes' buffers keep allocated beyond it;
//! - when the run ends, no job is left queued and no GPU file open;
//! - no link in the root other than the seeded ones is absolute or has `..` (so none
//!   the GPU made or moved resolves outside its mount);
//! - nothing in the root has group or other write permission.
//!
//! [`run_launch`] makes the same requests as a launch's GPU threads through the real
//! client, on the emulated backend, with a short time limit and no answer limited in
//! time (a `poll` may wait for ever, a FIFO's read for a writer): `Host::run` must
//! return within its time limit plus a second, whatever the threads asked. Its threads
//! also print, between those calls, to the process's stdout and stderr made pipes whose
//! readers may pause: nothing a write that returned printed is lost, and nothing is
//! duplicated or reordered within its thread, when the run ended (completed, or by an
//! exit or abort) within its limit and no call wrote fd 1 or 2 itself (`output`).
//!
//! `cargo fuzz run serve` and `cargo fuzz run launch` (in `fuzz/`) drive them;
//! `tests/corpus.rs` replays the corpus through both.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use hostcall_abi::fcntl;
use hostcall_abi::typed::{FdUse, Waits};
use hostcall_abi::{
    BULK_PER_LANE, LaneSlot, PORT_BULK, Port, STD_BASE, Service, Status, WARP_SIZE,
};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::fuzzing::{DEVICE_BASE, DEVICE_BYTES, PortBench};
use hostcall_runtime::{DEFAULT_CAPTURE_LIMIT, Launch, Outcome};
use output::{Output, Plan, Streams};

mod output;
mod world;

pub use world::{World, world};

/// A variable the GPU may never read, set in the fuzzing process.
pub const SECRET_VAR: &str = "HOSTCALL_FUZZ_SECRET";
/// Its value, which must never appear in an answer.
pub const SECRET_VALUE: &[u8] = b"s3cr3t-value";
/// A variable the GPU may read, as the host has it.
pub const GRANTED_VAR: &str = "HOSTCALL_FUZZ_GRANT";

/// Bytes the services may hold for the GPU: out-of-order posted writes on two fds (up to
/// twice their bound for pieces no consumer admitted: the fuzzer writes the port
/// itself), and the capture of two fds with its closing note.
const HELD_LIMIT: usize = 2 * (2 * (64 << 20)) + 2 * (DEFAULT_CAPTURE_LIMIT + 256);

/// Link targets worth trying: climbing, absolute, and ones that stay below.
const TARGETS: &[&[u8]] = &[
    b"..",
    b"../../secret",
    b".",
    b"sub",
    b"inside.txt",
    b"/etc/passwd",
    b"a/../b",
    b"selfdir/../..",
    b"up/secret",
];

/// Paths worth trying: escapes of every kind, and ordinary files.
const PATHS: &[&[u8]] = &[
    b"/data",
    b"/data/inside.txt",
    b"/data/out",
    b"/data/up/new",
    b"/data/up/secret",
    b"/data/secret",
    b"/data/loop1",
    b"/data/magic/etc/passwd",
    b"/data/magiccwd",
    b"/data/fifo",
    b"/data/sub/x",
    b"/data/../etc/passwd",
    b"/data/selfdir/selfdir/inside.txt",
    b"/data/absinside",
    b"/ro/inside.txt",
    b"/ro/new",
    b"x.txt",
    b"../inside.txt",
    b"/etc/passwd",
    b"/",
    b"",
];

/// An argument, chosen so the fuzzer reaches deep paths quickly.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Arg {
    Raw(u64),
    /// The length of the lane's input.
    InputLen,
    /// A small number (a length, a flag, a whence).
    Small(u16),
    /// An fd this case opened earlier, or stdio.
    Fd(u8),
    /// Open flags from the ones the service knows.
    Flags(u32),
    /// A device address inside the bench's device memory.
    Device(u16),
    /// The length of part 0 or 1 of the lane's input: a declared service's slice
    /// lengths travel in its fixed part (`hostcall_abi::typed`).
    PartLen(bool),
}

#[derive(Arbitrary, Debug, Clone)]
enum Input {
    Path {
        pick: u8,
        suffix: Vec<u8>,
    },
    Bytes(Vec<u8>),
    /// `/a` repeated: long paths.
    Long(u16),
    Name(u8),
    /// Two parts as a declared service's two slices travel, the second at the next
    /// multiple of 8 bytes: `Fs.symlink`'s target and link, `Fs.rename`'s and
    /// `Fs.link`'s two paths.
    TwoPaths {
        target: u8,
        path: u8,
    },
}

#[derive(Arbitrary, Debug, Clone)]
struct Lane {
    service: u8,
    args: [Arg; 6],
    input: Input,
    /// Written for another sequence than the one published (a stale or forged slot).
    stale: bool,
}

#[derive(Arbitrary, Debug, Clone)]
struct Packet {
    lanes: Vec<Lane>,
    /// Publish only the first lane, which then has the port's whole bulk area.
    lone: bool,
}

#[derive(Arbitrary, Debug)]
struct Case {
    packets: Vec<Packet>,
    /// Rewrite the port's slots and bulk bytes from another thread while serving.
    mutate: bool,
}

const NAMES: &[&[u8]] = &[
    b"GIVEN",
    SECRET_VAR.as_bytes(),
    GRANTED_VAR.as_bytes(),
    b"PATH",
];
/// The ids a fuzzed lane calls: the transport's own services, std's declared ones, and
/// two ids past them that nobody serves.
static SERVICES: std::sync::LazyLock<Vec<u32>> = std::sync::LazyLock::new(|| {
    let stream = Service::ALL.iter().map(|s| *s as u32);
    let declared = hostcall_runtime::services::std_declared().map(|s| s.id);
    let unserved = [STD_BASE + 0x100, STD_BASE + 0x101];
    stream.chain(declared).chain(unserved).collect()
});

/// The id of std's declared service `name`.
fn std_id(name: &str) -> u32 {
    hostcall_runtime::services::std_declared()
        .find(|s| s.name == name)
        .map(|s| s.id)
        .unwrap_or_else(|| panic!("std declares no service {name}"))
}

fn open_id() -> u32 {
    std_id("Fs.openat")
}

fn getenv_id() -> u32 {
    std_id("Environment.getenv")
}

/// The open flags the fuzzer's inputs may set: those the host serves, less
/// `O_NOFOLLOW`, `O_CLOEXEC` and `O_NONBLOCK` (the set its corpus was grown with).
const KNOWN_FLAGS: u32 =
    (fcntl::O_SERVED & !(fcntl::O_NOFOLLOW | fcntl::O_CLOEXEC | fcntl::O_NONBLOCK)) as u32;

/// The lane's input bytes, and the lengths of its two parts (the second 0 but for
/// `TwoPaths`).
fn input_bytes(input: &Input) -> (Vec<u8>, [usize; 2]) {
    let one = |b: Vec<u8>| {
        let n = b.len();
        (b, [n, 0])
    };
    match input {
        Input::Path { pick, suffix } => {
            let mut p = PATHS[*pick as usize % PATHS.len()].to_vec();
            p.extend_from_slice(&suffix[..suffix.len().min(64)]);
            one(p)
        }
        Input::Bytes(b) => one(b.clone()),
        Input::Long(n) => one(b"/a".repeat((*n as usize).min(PORT_BULK / 2))),
        Input::Name(i) => one(NAMES[*i as usize % NAMES.len()].to_vec()),
        Input::TwoPaths { target, path } => {
            let target = TARGETS[*target as usize % TARGETS.len()];
            let path = PATHS[*path as usize % PATHS.len()];
            let mut b = target.to_vec();
            b.resize(target.len().next_multiple_of(8), 0);
            b.extend_from_slice(path);
            (b, [target.len(), path.len()])
        }
    }
}

/// Lane `lane`'s request: its service (std's services, and two ids past them that nobody
/// serves), its arguments (an fd from `fds`, a device address from `device`), and its
/// input bytes, cut to what its packet's bulk buffer holds.
fn request(lane: &Lane, lone: bool, fds: &[u64], device: u64) -> (u32, [u64; 6], Vec<u8>) {
    let (mut input, parts) = input_bytes(&lane.input);
    input.truncate(if lone { PORT_BULK } else { BULK_PER_LANE });
    let arg = |a: &Arg| match *a {
        Arg::Raw(v) => v,
        Arg::InputLen => input.len() as u64,
        Arg::Small(v) => v as u64,
        Arg::Fd(k) => fds[k as usize % fds.len()],
        Arg::Flags(f) => (f & KNOWN_FLAGS) as u64,
        Arg::Device(o) => device + (o as u64 % DEVICE_BYTES as u64),
        Arg::PartLen(second) => parts[second as usize] as u64,
    };
    let service = SERVICES[lane.service as usize % SERVICES.len()];
    (service, lane.args.map(|a| arg(&a)), input)
}

/// Rewrites bytes of the port until told to stop.
fn mutator(port: usize, stop: Arc<AtomicBool>, seed: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let base = port as *const u8;
        let mut x = seed | 1;
        while !stop.load(Relaxed) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The lane slots and bulk area, never the header or answer words (the GPU
            // owns those only by protocol; breaking them is the transport's business).
            let lanes = std::mem::offset_of!(Port, lanes);
            let at = lanes + (x as usize % (size_of::<Port>() - lanes));
            // SAFETY: `at` is inside the port, which outlives this thread (joined before
            // the bench drops); the server reads the port only with atomics.
            unsafe { &*base.add(at).cast::<AtomicU8>() }.store((x >> 32) as u8, Relaxed);
            std::hint::spin_loop();
        }
    })
}

/// Runs one fuzz case; panics if an invariant breaks.
pub fn run(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let world = world();
    let panics_before = PortBench::handler_panics();
    let mut bench = PortBench::new(world.builder()).expect("a bench over the seeded root");
    let stop = Arc::new(AtomicBool::new(false));
    let mutating = case
        .mutate
        .then(|| mutator(bench.port() as usize, stop.clone(), data.len() as u64));
    let mut fds: Vec<u64> = vec![0, 1, 2];
    for packet in case.packets.iter().take(6) {
        let lanes: Vec<&Lane> = packet.lanes.iter().take(WARP_SIZE).collect();
        if lanes.is_empty() {
            continue;
        }
        let lone = packet.lone || lanes.len() == 1;
        let lanes = if lone { &lanes[..1] } else { &lanes[..] };
        let seq = bench.next_seq();
        let mut services = Vec::new();
        for (i, lane) in lanes.iter().enumerate() {
            let (service, mut args, input) = request(lane, lone, &fds, DEVICE_BASE);
            services.push(service);
            let (bulk, _) = bulk_of(bench.port(), i, lone);
            for (k, b) in input.iter().enumerate() {
                // SAFETY: `k < cap`, inside the lane's bulk buffer.
                unsafe { &*bulk.add(k).cast::<AtomicU8>() }.store(*b, Relaxed);
            }
            if service == std_id("Net.poll") {
                // `poll` rightly waits as long as it is asked (its timeout is the fixed
                // part's second word): the fuzzer asks for at most 50 ms.
                args[2] %= 50;
            }
            bench.write_slot(
                i,
                LaneSlot {
                    service,
                    seq: if lane.stale { seq.wrapping_add(7) } else { seq },
                    block: 0,
                    thread: i as u32,
                    args,
                },
            );
        }
        // `lanes.len() <= 32`: the first `len` bits.
        let mask = ((1u64 << lanes.len()) - 1) as u32;
        // A slot the mutator rewrites may come to say its lane is posted, which gets no
        // answer: then only the host's `response` is waited for, which it stores once
        // every lane not posted has its answer.
        let waiting = if case.mutate { 0 } else { mask };
        let answered = bench.publish_and_serve(mask, waiting, Duration::from_secs(10), &mut || {
            world.tend_fifo()
        });
        assert!(
            answered,
            "a packet of {services:?} was not answered within 10 s"
        );
        let cap = if lone { PORT_BULK } else { BULK_PER_LANE };
        for (i, &service) in services.iter().enumerate() {
            let Some(a) = bench.answer(i) else {
                assert!(case.mutate, "lane {i} of an unmutated packet has no answer");
                continue;
            };
            let slot = bench.slot(i);
            let (result, out) = match a.inline {
                Some(r) => (r, 0),
                // Bounded as the device half bounds it: the mutator may have rewritten
                // the count since the host wrote it.
                None => (slot.args[0] as i64, (slot.args[5] as usize).min(cap)),
            };
            if a.status == Status::Ok && service == open_id() && result >= 0 {
                fds.push(result as u64);
            }
            if service == getenv_id() && out > 0 {
                let (bulk, _) = bulk_of(bench.port(), i, lone);
                let got: Vec<u8> = (0..out)
                    // SAFETY: `out` is at most the lane's bulk capacity (bounded above).
                    .map(|k| unsafe { &*bulk.add(k).cast::<AtomicU8>() }.load(Relaxed))
                    .collect();
                assert_ne!(
                    got, SECRET_VALUE,
                    "a variable that was not granted was read"
                );
            }
        }
        let outside = bench.files_outside_mounts();
        assert!(
            outside.is_empty(),
            "GPU files outside every mount: {outside:?}"
        );
        assert!(
            world.outside_is_untouched(),
            "something was created outside the root"
        );
        assert!(
            bench.held_bytes() <= HELD_LIMIT,
            "held {} bytes",
            bench.held_bytes()
        );
        assert!(
            bench.retained_bytes() <= PortBench::retained_limit(),
            "the posted-write buffers keep {} bytes",
            bench.retained_bytes()
        );
    }
    let (queued, open) = bench.finish();
    assert_eq!(
        (queued, open),
        (0, 0),
        "jobs queued and GPU files open after the run"
    );
    let widened = world.widened();
    assert!(widened.is_empty(), "the GPU widened access: {widened:?}");
    stop.store(true, Relaxed);
    if let Some(t) = mutating {
        t.join().expect("the mutator");
    }
    assert_eq!(
        PortBench::handler_panics(),
        panics_before,
        "a handler panicked"
    );
}

/// A fuzzed launch's time limit.
const LAUNCH_LIMIT: Duration = Duration::from_millis(300);

/// How long past its time limit `Host::run` may take to return: the fuzzer's
/// bound, on a machine it has to itself.
pub const RETURN_GRACE: Duration = Duration::from_secs(1);

/// How long this process's threads were kept from running while it watched: a thread
/// sleeping 1 ms at a time adds up by how much more than 2 ms each sleep took. On a
/// machine the fuzzer shares (its two targets side by side, at nice 19), a launch's
/// wall time counts that too, which no host could help.
struct Starved {
    stop: Arc<AtomicBool>,
    watching: std::thread::JoinHandle<Duration>,
}

impl Starved {
    fn watch() -> Starved {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let watching = std::thread::spawn(move || {
            let mut starved = Duration::ZERO;
            while !s.load(Relaxed) {
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                starved += t.elapsed().saturating_sub(Duration::from_millis(2));
            }
            starved
        });
        Starved { stop, watching }
    }

    fn end(self) -> Duration {
        self.stop.store(true, Relaxed);
        self.watching.join().expect("the starvation watch")
    }
}

/// A launch's case: the requests of a [`Case`], and what the threads print between them
/// (a serve case's bytes are a launch's that prints nothing).
#[derive(Arbitrary, Debug)]
struct Launched {
    case: Case,
    output: Output,
}

/// Runs one fuzz case as a launch: lane `i` of each packet is thread `i`'s next call,
/// made through the client on the emulated backend (lockstep warps when the case would
/// mutate the port, whose bytes the client owns here), the threads' prints between
/// them, with the process's stdout and stderr pipes read as the case says. Panics if
/// `Host::run` takes longer than its time limit plus `grace` ([`RETURN_GRACE`] for the
/// fuzzer) plus the time the process was kept from running ([`Starved`]), an invariant
/// of the root breaks, or a run that ended lost printed bytes ([`output`]).
pub fn run_launch(data: &[u8], grace: Duration) {
    let Ok(Launched { case, output }) = Launched::arbitrary_take_rest(Unstructured::new(data))
    else {
        return;
    };
    let packets: Vec<Vec<Lane>> = case
        .packets
        .iter()
        .take(6)
        .map(|p| p.lanes.iter().take(WARP_SIZE).cloned().collect::<Vec<_>>())
        .filter(|lanes| !lanes.is_empty())
        .collect();
    let calling = packets.iter().map(Vec::len).max().unwrap_or(0);
    let plan = Arc::new(Plan::new(&output, calling, packets.len()));
    let threads = plan.threads();
    if threads == 0 {
        return;
    }
    let world = world();
    let mode = if case.mutate {
        WarpMode::Lockstep
    } else {
        WarpMode::Independent
    };
    // A lane's own write to fd 1 or 2 (its bytes, its forged tickets) may rightly
    // displace what the threads print: then the output is not checked.
    let lanes_wrote_stdio = Arc::new(AtomicBool::new(false));
    let (printing, wrote) = (plan.clone(), lanes_wrote_stdio.clone());
    let mut module = EmulatedModule::new(mode).kernel("k", move |t: &EmuThread| {
        let mut fds = vec![0, 1, 2];
        for (at, packet) in packets.iter().enumerate() {
            printing.print(t, at);
            let Some(lane) = packet.get(t.thread as usize) else {
                continue;
            };
            // An emulated thread's device addresses are its own pointers: a made-up
            // one is not a call a GPU thread could survive either.
            let (service, args, input) = request(lane, packet.len() == 1, &fds, 0);
            let copies = [
                Service::OrderedFromDevice as u32,
                std_id("Fs.write_from_device"),
                std_id("Fs.read_to_device"),
            ];
            if copies.contains(&service) {
                continue;
            }
            if writes_stdio(service, &args) {
                wrote.store(true, Relaxed);
            }
            let mut out = vec![0u8; BULK_PER_LANE];
            let r = t
                .channel()
                .call::<Emu>(service, args, &input, &mut out, None);
            if r.status == Status::Ok && service == open_id() && r.result >= 0 {
                fds.push(r.result as u64);
            }
        }
        printing.print(t, packets.len());
    });
    let host = world
        .builder()
        .timeout(LAUNCH_LIMIT)
        .stdin(false)
        // The emulated threads allocate from the host; the device heap they never use is
        // host memory zeroed at set-up, which at the default 256 MiB took half the limit.
        .heap_bytes(1 << 20)
        .build()
        .expect("a host over the seeded root");
    let streams = Streams::redirect(&output);
    let starved = Starved::watch();
    let started = Instant::now();
    let report = host.run(&mut module, &Launch::linear("k", 1, threads as u32, vec![]));
    let took = started.elapsed();
    let starved = starved.end();
    let got = streams.restore();
    assert!(
        took <= LAUNCH_LIMIT + grace + starved,
        "Host::run returned {took:?} after it started, with a time limit of {LAUNCH_LIMIT:?} \
         ({starved:?} of it kept from running): {report:?}"
    );
    assert!(
        world.outside_is_untouched(),
        "something was created outside the root"
    );
    let widened = world.widened();
    assert!(widened.is_empty(), "the GPU widened access: {widened:?}");
    // An exit or abort ends the program, not its output: threads run on, those that
    // wait are trapped mid-write, and what they printed before must all come through.
    // A stop by the time limit or a fault drops posted output, and a run that returns
    // at its limit stops waiting for the output's reader and the calls posted before
    // the end: then anything may rightly be lost.
    let ended = matches!(&report, Ok(r) if matches!(
        r.outcome,
        Outcome::Completed | Outcome::Exited(_) | Outcome::Aborted { .. }
    ));
    let checked = ended && took < LAUNCH_LIMIT && !lanes_wrote_stdio.load(Relaxed);
    if checked && let Err(lost) = plan.check(&got) {
        panic!("printed output was lost: {lost} ({output:?})");
    }
}

/// Whether a lane's call writes to the host's stdout or stderr itself: the transport's
/// posted write, or a declared service that writes the fd in its first argument.
fn writes_stdio(service: u32, args: &[u64; 6]) -> bool {
    let writes = service == Service::WritePosted as u32
        || hostcall_runtime::services::std_declared().any(|s| {
            s.id == service && matches!(s.waits, Waits::OnFd(FdUse::Write | FdUse::CopyOut))
        });
    writes && matches!(args[0] as i32, 1 | 2)
}

/// Lane `lane`'s bulk buffer in `port`.
fn bulk_of(port: *mut Port, lane: usize, lone: bool) -> (*mut u8, usize) {
    // SAFETY: inside the port.
    let area = unsafe { (&raw mut (*port).bulk).cast::<u8>() };
    if lone {
        (area, PORT_BULK)
    } else {
        // SAFETY: `lane < WARP_SIZE`, inside the bulk area.
        (unsafe { area.add(lane * BULK_PER_LANE) }, BULK_PER_LANE)
    }
}

#[cfg(test)]
mod tests {
    use hostcall_abi::typed::{Arg as WireArg, Encoder, bulk_len};

    use super::*;

    /// A `TwoPaths` input and its `PartLen` arguments are exactly what `Fs.symlink`'s stub
    /// sends, so the fuzzer's lanes reach the service itself, not only its decoder.
    #[test]
    fn two_paths_lay_out_as_a_declared_call_of_two_slices() {
        let input = Input::TwoPaths { target: 0, path: 1 };
        let (bytes, parts) = input_bytes(&input);
        let (target, link) = (TARGETS[0], PATHS[1]);
        let mut e = Encoder::<'_, 5>::default();
        WireArg::put(target, &mut e);
        WireArg::put(link, &mut e);
        assert_eq!(bulk_len(e.inputs()), bytes.len());
        assert_eq!(e.fixed_words()[..2], [parts[0] as u64, parts[1] as u64]);
        let second = target.len().next_multiple_of(8);
        assert_eq!(&bytes[..target.len()], target);
        assert_eq!(&bytes[second..], link);
        assert!(
            SERVICES.contains(&std_id("Fs.symlink")),
            "the fuzzer calls Fs.symlink"
        );
    }
}
