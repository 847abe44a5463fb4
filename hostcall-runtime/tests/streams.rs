//! Tagged streams end to end on the emulated backend: kernels submit messages
//! through `KernelArg::Stream`, a host thread empties the rings into per-tag callbacks
//! while the launch runs, and the run accounts for every message.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::quiet;
use hostcall_client::stream::{Stream, Submitted};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::stream::{Callbacks, StreamSpec, TagCounter, WhenFull};
use hostcall_runtime::{Error, Host, KernelArg, Launch, Outcome, RunReport};

/// A message: who sent it and its number among the sender's.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Sample {
    block: u32,
    thread: u32,
    n: u64,
}

// SAFETY: repr(C), plain integers, no padding (4 + 4 + 8 bytes).
unsafe impl hostcall_client::Plain for Sample {}

const BLOCKS: u32 = 4;
const THREADS: u32 = 64;
const EACH: u64 = 50;

/// How the emulated warps reach the stream: one lane each; 32 lanes together, whose
/// records are reserved as one; lanes in random groups.
const MODES: [WarpMode; 3] = [
    WarpMode::Independent,
    WarpMode::Lockstep,
    WarpMode::Divergent { seed: 16 },
];

/// Runs `BLOCKS` x `THREADS` threads each submitting `EACH` samples (tag: thread % 3) to
/// a stream of `spec` with `callbacks`, in warps of `mode`, emptied by `readers` host
/// threads; returns the report and what each thread's submissions came to.
fn run(
    spec: StreamSpec,
    callbacks: Callbacks,
    mode: WarpMode,
    readers: usize,
) -> (RunReport, Vec<Submitted>) {
    let mut host = quiet().stream_readers(readers).build().unwrap();
    let stream = host.stream(spec, callbacks);
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let o = outcomes.clone();
    let mut m = EmulatedModule::new(mode).kernel("k", move |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the stream's descriptor")
        };
        // SAFETY: the host passed this stream's descriptor for the launch.
        let s = unsafe { Stream::from_raw(raw) };
        for n in 0..EACH {
            let sample = Sample {
                block: t.block,
                thread: t.thread,
                n,
            };
            let r = s.submit::<Emu, _>(t.thread % 3, &sample);
            o.lock().unwrap().push(r);
        }
    });
    let launch = Launch::linear("k", BLOCKS, THREADS, vec![KernelArg::Stream(stream)]);
    let r = host.run(&mut m, &launch).unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let outcomes = outcomes.lock().unwrap().clone();
    (r, outcomes)
}

/// A message as the host took it: tag, block, thread, number.
type Taken = (u32, u32, u32, u64);

/// Keeps every message, in the order the host took them.
fn keep(into: &Arc<Mutex<Vec<Taken>>>) -> impl Fn(u32, &[u64]) + Send + Sync + 'static {
    let into = into.clone();
    move |tag, words| {
        assert_eq!(words.len(), 2, "a sample is two words");
        into.lock()
            .unwrap()
            .push((tag, words[0] as u32, (words[0] >> 32) as u32, words[1]));
    }
}

/// Each thread's numbers, in the order its messages arrived, checking their tags.
fn by_thread(got: &[Taken]) -> BTreeMap<(u32, u32), Vec<u64>> {
    let mut m: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    for &(tag, block, thread, n) in got {
        assert_eq!(tag, thread % 3);
        m.entry((block, thread)).or_default().push(n);
    }
    m
}

#[test]
fn every_message_reaches_its_callbacks_once_in_its_threads_order_through_small_rings() {
    for mode in MODES {
        // 4 rings of 128 words for 12,800 messages of 3 words: writers wait, rings
        // wrap; a warp's batch of 32 records (97 words) fits one ring.
        in_order_through(mode, 1024, 4);
    }
    // Rings of 32 words, too small for a warp's batch: each lane's record is a batch.
    in_order_through(WarpMode::Lockstep, 256, 4);
    // One host thread for every ring, and three for four rings.
    in_order_through(WarpMode::Independent, 1024, 1);
    in_order_through(WarpMode::Independent, 1024, 3);
}

fn in_order_through(mode: WarpMode, ring_bytes: usize, readers: usize) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let counter = TagCounter::new();
    let spec = StreamSpec {
        rings: 4,
        ring_bytes,
        when_full: WhenFull::Wait,
    };
    let callbacks = Callbacks::new()
        .on_every(keep(&got))
        .on_every(counter.callback());
    let (r, outcomes) = run(spec, callbacks, mode, readers);
    let total = u64::from(BLOCKS * THREADS) * EACH;
    assert!(outcomes.iter().all(|&o| o == Submitted::Queued));
    assert_eq!(r.streams.len(), 1);
    assert_eq!(
        (r.streams[0].messages, r.streams[0].dropped),
        (total, 0),
        "{mode:?}"
    );
    assert!(r.streams[0].broken.is_empty());
    let threads = by_thread(&got.lock().unwrap());
    assert_eq!(threads.len(), (BLOCKS * THREADS) as usize);
    for (who, ns) in threads {
        assert_eq!(
            ns,
            (0..EACH).collect::<Vec<_>>(),
            "thread {who:?}, {mode:?}"
        );
    }
    let per_tag: u64 = counter.counts().values().sum();
    assert_eq!(per_tag, total);
    assert_eq!(counter.counts().len(), 3);
}

#[test]
fn a_dropping_stream_counts_what_it_drops_and_keeps_order_in_what_arrives() {
    for (mode, ring_bytes) in [
        (WarpMode::Independent, 64),
        (WarpMode::Lockstep, 64),
        (WarpMode::Lockstep, 1024),
        (WarpMode::Divergent { seed: 16 }, 1024),
    ] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let spec = StreamSpec {
            rings: 1,
            ring_bytes,
            when_full: WhenFull::Drop,
        };
        let (r, outcomes) = run(spec, Callbacks::new().on_every(keep(&got)), mode, 2);
        let dropped = outcomes
            .iter()
            .filter(|&&o| o == Submitted::Dropped)
            .count() as u64;
        assert!(
            dropped > 0,
            "one ring of {ring_bytes} bytes for 12,800 messages dropped none ({mode:?})"
        );
        assert_eq!(r.streams[0].dropped, dropped, "{mode:?}");
        assert_eq!(
            r.streams[0].messages + dropped,
            u64::from(BLOCKS * THREADS) * EACH,
            "{mode:?}"
        );
        for (who, ns) in by_thread(&got.lock().unwrap()) {
            assert!(ns.windows(2).all(|p| p[0] < p[1]), "thread {who:?}: {ns:?}");
        }
    }
}

#[test]
fn reader_threads_dispatch_their_rings_messages_at_once() {
    // Two blocks of one thread write to rings 0 and 1, which two readers take. Each
    // callback waits until the other has begun: callbacks run one at a time would see
    // only themselves. The kernel waits for both too, so that neither message is left
    // for the end of the launch, when what remains is taken on one thread.
    let entered = Arc::new(AtomicU32::new(0));
    let both = {
        let entered = entered.clone();
        move || {
            let started = Instant::now();
            while entered.load(SeqCst) < 2 && started.elapsed() < Duration::from_secs(5) {
                std::thread::yield_now();
            }
        }
    };
    let saw = Arc::new(Mutex::new(Vec::new()));
    let callback = {
        let (entered, saw, both) = (entered.clone(), saw.clone(), both.clone());
        move |_: u32, _: &[u64]| {
            entered.fetch_add(1, SeqCst);
            both();
            saw.lock().unwrap().push(entered.load(SeqCst));
        }
    };
    let spec = StreamSpec {
        rings: 2,
        ..StreamSpec::default()
    };
    let mut host = quiet().stream_readers(2).build().unwrap();
    let stream = host.stream(spec, Callbacks::new().on_every(callback));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the stream's descriptor")
        };
        // SAFETY: the host passed this stream's descriptor for the launch.
        unsafe { Stream::from_raw(raw) }.submit::<Emu, _>(1, &u64::from(t.block));
        both();
    });
    let launch = Launch::linear("k", 2, 1, vec![KernelArg::Stream(stream)]);
    assert_eq!(host.run(&mut m, &launch).unwrap().streams[0].messages, 2);
    assert_eq!(*saw.lock().unwrap(), [2, 2], "one callback ran alone");
}

#[test]
fn callbacks_run_per_tag_then_for_every_message_each_in_the_order_added() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let log = |what: &'static str| {
        let calls = calls.clone();
        move |_: &[u64]| calls.lock().unwrap().push(what)
    };
    let every = {
        let calls = calls.clone();
        move |tag: u32, _: &[u64]| {
            if tag == 1 {
                calls.lock().unwrap().push("every")
            }
        }
    };
    let callbacks = Callbacks::new()
        .on(1, log("first"))
        .on(2, log("other tag"))
        .on(1, log("second"))
        .on_every(every);
    let mut host = quiet().build().unwrap();
    let stream = host.stream(StreamSpec::default(), callbacks);
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the stream's descriptor")
        };
        // SAFETY: the host passed this stream's descriptor for the launch.
        unsafe { Stream::from_raw(raw) }.submit::<Emu, _>(1, &7u64);
    });
    let launch = Launch::linear("k", 1, 1, vec![KernelArg::Stream(stream)]);
    assert_eq!(host.run(&mut m, &launch).unwrap().streams[0].messages, 1);
    assert_eq!(*calls.lock().unwrap(), ["first", "second", "every"]);
}

#[test]
fn a_stream_another_host_serves_or_a_ring_too_small_is_refused_in_one_sentence() {
    let mut other = quiet().build().unwrap();
    let foreign = other.stream(StreamSpec::default(), Callbacks::new());
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |_: &EmuThread| {});
    let host = quiet().build().unwrap();
    let launch = Launch::linear("k", 1, 1, vec![KernelArg::Stream(foreign)]);
    match host.run(&mut m, &launch) {
        Err(Error::InvalidLaunch(why)) => {
            assert_eq!(why, "k is given stream 0, which this host does not serve")
        }
        other => panic!("{other:?}"),
    }
    let mut tiny = Host::builder().echo_output(false).build().unwrap();
    let s = tiny.stream(
        StreamSpec {
            rings: 1,
            ring_bytes: 12,
            when_full: WhenFull::Wait,
        },
        Callbacks::new(),
    );
    let launch = Launch::linear("k", 1, 1, vec![KernelArg::Stream(s)]);
    match tiny.run(&mut m, &launch) {
        Err(Error::InvalidLaunch(why)) => assert!(why.contains("not 1 rings of 12 bytes"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// A callback that panics. It killed its reader thread, whose rings
/// (other streams' too) were never read again: writers waiting for room spun to the
/// timeout. Now the panic is caught and said once, and every ring is read on: every
/// other message arrives, and the run completes.
#[test]
fn a_panicking_callback_is_said_once_and_every_ring_is_read_on() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let callbacks = Callbacks::new()
        .on(1, |m| {
            assert!(m[1] % 7 != 3, "the callback refuses message {}", m[1])
        })
        .on_every(keep(&got));
    let spec = StreamSpec {
        rings: 2,
        ring_bytes: 1024,
        when_full: WhenFull::Wait,
    };
    let started = Instant::now();
    let (report, _) = run(spec, callbacks, WarpMode::Independent, 1);
    assert!(started.elapsed() < Duration::from_secs(20));
    let taken = by_thread(&got.lock().unwrap());
    let total = u64::from(BLOCKS * THREADS) * EACH;
    let panics = report.streams[0].callback_panics;
    assert!(
        panics > 0,
        "the callback panicked, and the report counts it"
    );
    // A message on which a callback panicked reaches no later callback of its chain;
    // every other reached them all, after the first panic too.
    assert_eq!(
        taken.values().map(Vec::len).sum::<usize>() as u64 + panics,
        total
    );
    assert_eq!(report.streams[0].messages, total);
}
