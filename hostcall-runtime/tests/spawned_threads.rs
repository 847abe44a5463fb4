//! The hand-off of a thread to a held-back GPU thread (`hostcall_client::spawn`, the code
//! libc-hostcall's `pthread_create`, `pthread_join` and `pthread_detach` run), driven by
//! OS threads on the emulator's platform: every thread given runs once, a join returns
//! only after everything its thread wrote, a detached thread frees its worker, a thread
//! that panics retires its worker (which exits: there is no unwinding), and a creator
//! finds no worker when all are busy or retired (`EAGAIN` in pthread terms).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use hostcall_abi::spawn::{IDLE, NOT_A_WORKER, RETIRED, RUNNING, RUNNING_DETACHED};
use hostcall_client::spawn::{NotJoinable, Slot};
use hostcall_emulator::Emu;

/// A worker's `ThreadArea` fields.
#[derive(Default)]
struct Area {
    state: AtomicU32,
    start: AtomicU64,
    arg: AtomicU64,
}

impl Area {
    fn slot(&self) -> Slot<'_> {
        Slot {
            state: &self.state,
            start: &self.start,
            arg: &self.arg,
        }
    }
}

/// What a "thread" does here: `arg` indexes `RESULTS`, written with plain stores, and
/// counts its runs in `RUNS`.
static mut RESULTS: [u64; 4096] = [0; 4096];
static RUNS: [AtomicU32; 4096] = [const { AtomicU32::new(0) }; 4096];

fn task(arg: u64) {
    // SAFETY: each arg is given to one thread once; the joiner reads after `join`.
    unsafe {
        (&raw mut RESULTS)
            .cast::<u64>()
            .add(arg as usize)
            .write(arg * 3 + 1)
    };
    RUNS[arg as usize].fetch_add(1, Ordering::Relaxed);
}

/// The threads that end in a panic (no other test's threads).
const PANICKING: std::ops::Range<u64> = 3500..3600;

/// Runs `workers` parked workers until `stop`; each runs the threads given to it.
fn start_workers(
    areas: &Arc<Vec<Area>>,
    stop: &Arc<AtomicU32>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..areas.len())
        .map(|i| {
            let (areas, stop) = (areas.clone(), stop.clone());
            std::thread::spawn(move || {
                let slot = areas[i].slot();
                slot.park();
                loop {
                    // A worker on the GPU waits for ever; here it also looks at `stop`.
                    while !matches!(
                        slot.state.load(Ordering::Acquire),
                        RUNNING | RUNNING_DETACHED
                    ) {
                        if stop.load(Ordering::Relaxed) == 1 {
                            return;
                        }
                        std::thread::yield_now();
                    }
                    let (start, arg) = slot.wait_for_thread::<Emu>();
                    assert_eq!(start, 0x5eed);
                    task(arg);
                    // libc-hostcall's `__hostcall_thread_unwound`: the panic's payload is
                    // with the joiner, and the GPU thread exits.
                    if PANICKING.contains(&arg) {
                        slot.retire();
                        return;
                    }
                    slot.end_thread();
                }
            })
        })
        .collect()
}

/// Waits until every worker has parked.
fn wait_parked(areas: &[Area]) {
    while areas
        .iter()
        .any(|a| a.state.load(Ordering::Acquire) != IDLE)
    {
        std::thread::yield_now();
    }
}

/// Gives `arg` to the first idle worker, as `pthread_create` does.
fn give(areas: &[Area], arg: u64) -> Option<usize> {
    areas.iter().position(|a| a.slot().try_give(0x5eed, arg))
}

#[test]
fn threads_given_to_parked_workers_run_once_and_join_after_all_they_wrote() {
    let areas: Arc<Vec<Area>> = Arc::new((0..8).map(|_| Area::default()).collect());
    let stop = Arc::new(AtomicU32::new(0));
    let workers = start_workers(&areas, &stop);
    wait_parked(&areas);
    // Four creators at once, each starting and joining 128 threads two at a time (each
    // holds at most two of the eight workers, so all can always go on).
    let barrier = Arc::new(Barrier::new(4));
    let creators: Vec<_> = (0..4u64)
        .map(|c| {
            let (areas, barrier) = (areas.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..64u64 {
                    let mut started = Vec::new();
                    for k in 0..2 {
                        let arg = c * 1024 + round * 2 + k;
                        let slot = loop {
                            // All busy: EAGAIN; a caller that can wait tries again.
                            match give(&areas, arg) {
                                Some(s) => break s,
                                None => std::thread::yield_now(),
                            }
                        };
                        started.push((slot, arg));
                    }
                    for (slot, arg) in started {
                        areas[slot].slot().join::<Emu>().unwrap();
                        // SAFETY: the join happened after the thread's write.
                        let got =
                            unsafe { (&raw const RESULTS).cast::<u64>().add(arg as usize).read() };
                        assert_eq!(got, arg * 3 + 1, "thread {arg} joined before its write");
                    }
                }
            })
        })
        .collect();
    for c in creators {
        c.join().unwrap();
    }
    for c in 0..4 {
        for (k, runs) in RUNS[c * 1024..c * 1024 + 128].iter().enumerate() {
            assert_eq!(runs.load(Ordering::Relaxed), 1, "thread {}", c * 1024 + k);
        }
    }
    stop.store(1, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn a_detached_thread_frees_its_worker_and_cannot_be_joined() {
    let areas: Arc<Vec<Area>> = Arc::new(vec![Area::default()]);
    let stop = Arc::new(AtomicU32::new(0));
    let workers = start_workers(&areas, &stop);
    while areas[0].state.load(Ordering::Acquire) != IDLE {
        std::thread::yield_now();
    }
    let slot = give(&areas, 4000).unwrap();
    // The only worker is busy until its thread is joined or detached: nobody else gets it.
    assert_eq!(give(&areas, 4001), None);
    areas[slot].slot().detach().unwrap();
    assert_eq!(areas[slot].slot().join::<Emu>(), Err(NotJoinable::NoThread));
    // Once the detached thread ends, the worker takes the next one.
    let next = loop {
        if let Some(s) = give(&areas, 4002) {
            break s;
        }
        std::thread::yield_now();
    };
    areas[next].slot().join::<Emu>().unwrap();
    // SAFETY: both threads have ended (the second was joined, after the first freed it).
    let (a, b) = unsafe {
        let r = (&raw const RESULTS).cast::<u64>();
        (r.add(4000).read(), r.add(4002).read())
    };
    assert_eq!((a, b), (4000 * 3 + 1, 4002 * 3 + 1));
    assert_eq!(RUNS[4001].load(Ordering::Relaxed), 0);
    stop.store(1, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn a_thread_that_panics_retires_its_worker_after_its_join() {
    let areas: Arc<Vec<Area>> = Arc::new((0..2).map(|_| Area::default()).collect());
    let stop = Arc::new(AtomicU32::new(0));
    let workers = start_workers(&areas, &stop);
    wait_parked(&areas);
    // A joined thread that panics: its join returns after all it wrote, and its worker
    // is never given a thread again.
    let first = give(&areas, 3500).unwrap();
    areas[first].slot().join::<Emu>().unwrap();
    // SAFETY: joined.
    let got = unsafe { (&raw const RESULTS).cast::<u64>().add(3500).read() };
    assert_eq!(got, 3500 * 3 + 1);
    assert_eq!(areas[first].state.load(Ordering::Acquire), RETIRED);
    assert_eq!(
        areas[first].slot().join::<Emu>(),
        Err(NotJoinable::NoThread)
    );
    for arg in [3700, 3701] {
        let s = give(&areas, arg).unwrap();
        assert_ne!(s, first, "a retired worker was given thread {arg}");
        areas[s].slot().join::<Emu>().unwrap();
    }
    // A detached thread that panics retires its worker too: then no worker is left.
    let second = give(&areas, 3501).unwrap();
    areas[second].slot().detach().unwrap();
    while areas[second].state.load(Ordering::Acquire) != RETIRED {
        std::thread::yield_now();
    }
    assert_eq!(give(&areas, 3702), None);
    assert_eq!(RUNS[3702].load(Ordering::Relaxed), 0);
    stop.store(1, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn no_worker_means_no_thread() {
    // A launch whose every thread runs the kernel holds none back.
    let areas = [Area::default(), Area::default()];
    assert_eq!(areas[0].state.load(Ordering::Relaxed), NOT_A_WORKER);
    assert_eq!(give(&areas, 1), None);
    assert_eq!(areas[1].slot().join::<Emu>(), Err(NotJoinable::NoThread));
    assert_eq!(areas[1].slot().detach(), Err(NotJoinable::NoThread));
}
