//! The hand-off of a thread to a held-back GPU thread (`hostcall_client::spawn`, the code
//! libc-hostcall's `pthread_create`, `pthread_join` and `pthread_detach` run), driven by
//! OS threads on the emulator's platform: every thread given runs once, a join returns
//! only after everything its thread wrote, a detached thread frees its worker, a thread
//! that panics retires its worker (which exits: there is no unwinding), a creator
//! finds no worker when all are busy or retired (`EAGAIN` in pthread terms), and at the
//! program's end every worker leaves and is counted gone, even one not parked yet, while
//! the end waits for a thread that still runs.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use hostcall_abi::spawn::{CLOSED, DONE, IDLE, NOT_A_WORKER, RETIRED, RUNNING};
use hostcall_client::spawn::{End, Give, NotJoinable, Slot};
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
    if HELD.contains(&arg) {
        HELD_STARTED.fetch_add(1, Ordering::Release);
        while !RELEASED.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }
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
/// The threads that run until `RELEASED` (no other test's threads).
const HELD: std::ops::Range<u64> = 3800..3900;
static RELEASED: AtomicBool = AtomicBool::new(false);
static HELD_STARTED: AtomicU32 = AtomicU32::new(0);

/// Runs a worker per area, as libc-hostcall's `serve_spawned_threads` does: parks, runs
/// each thread given to it, until the program ends ([`end`]).
fn start_workers(areas: &Arc<Vec<Area>>, the_end: &Arc<End>) -> Vec<JoinHandle<()>> {
    (0..areas.len())
        .map(|i| {
            let (areas, the_end) = (areas.clone(), the_end.clone());
            std::thread::spawn(move || {
                let slot = areas[i].slot();
                slot.park();
                while let Some((start, arg)) = slot.wait_for_thread::<Emu>(&the_end) {
                    assert_eq!(start, 0x5eed);
                    task(arg);
                    // libc-hostcall's `__hostcall_thread_unwound`: the panic's payload is
                    // with the joiner, and the GPU thread exits.
                    if PANICKING.contains(&arg) {
                        slot.retire(&the_end);
                        return;
                    }
                    slot.end_thread();
                }
            })
        })
        .collect()
}

/// A launch's held-back threads: their areas, the program's end, the workers.
struct Launch {
    areas: Arc<Vec<Area>>,
    the_end: Arc<End>,
    workers: Vec<JoinHandle<()>>,
}

/// Ends the program as `exit` does when no thread runs: announced, every worker leaves
/// (its word `CLOSED`, or `RETIRED` after a panic) and is counted gone, within a second.
fn end(launch: Launch) {
    let Launch {
        areas,
        the_end,
        workers,
    } = launch;
    assert!(the_end.announce());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let others = areas.len() as u32;
    assert!(
        the_end.wait_gone::<Emu>(others, || std::time::Instant::now() > deadline),
        "a worker did not leave at the end"
    );
    for w in workers {
        w.join().unwrap();
    }
    for (i, a) in areas.iter().enumerate() {
        let word = a.state.load(Ordering::Relaxed);
        assert!(
            matches!(word, CLOSED | RETIRED),
            "slot {i}: {word} after the end"
        );
    }
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

/// `n` areas, each with its worker started and parked, as at a launch's first moments.
fn parked(n: usize) -> Launch {
    let areas: Arc<Vec<Area>> = Arc::new((0..n).map(|_| Area::default()).collect());
    let the_end = Arc::new(End::new());
    let workers = start_workers(&areas, &the_end);
    wait_parked(&areas);
    Launch {
        areas,
        the_end,
        workers,
    }
}

/// Gives `arg` to the first idle worker, as `pthread_create` does.
fn give(areas: &[Area], arg: u64) -> Option<usize> {
    areas
        .iter()
        .position(|a| a.slot().try_give(0x5eed, arg, || true) == Give::Given)
}

#[test]
fn threads_given_to_parked_workers_run_once_and_join_after_all_they_wrote() {
    let launch = parked(8);
    let areas = &launch.areas;
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
                        areas[slot].slot().join::<Emu>(|| {}).unwrap();
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
    end(launch);
}

#[test]
fn a_detached_thread_frees_its_worker_and_cannot_be_joined() {
    let launch = parked(1);
    let areas = &launch.areas;
    let slot = give(areas, 4000).unwrap();
    // The only worker is busy until its thread is joined or detached: nobody else gets it.
    assert_eq!(give(areas, 4001), None);
    areas[slot].slot().detach().unwrap();
    assert_eq!(
        areas[slot].slot().join::<Emu>(|| {}),
        Err(NotJoinable::NoThread)
    );
    // Once the detached thread ends, the worker takes the next one.
    let next = loop {
        if let Some(s) = give(areas, 4002) {
            break s;
        }
        std::thread::yield_now();
    };
    areas[next].slot().join::<Emu>(|| {}).unwrap();
    // SAFETY: both threads have ended (the second was joined, after the first freed it).
    let (a, b) = unsafe {
        let r = (&raw const RESULTS).cast::<u64>();
        (r.add(4000).read(), r.add(4002).read())
    };
    assert_eq!((a, b), (4000 * 3 + 1, 4002 * 3 + 1));
    assert_eq!(RUNS[4001].load(Ordering::Relaxed), 0);
    end(launch);
}

#[test]
fn a_thread_that_panics_retires_its_worker_after_its_join() {
    let launch = parked(2);
    let areas = &launch.areas;
    // A joined thread that panics: its join returns after all it wrote, and its worker
    // is never given a thread again.
    let first = give(areas, 3500).unwrap();
    areas[first].slot().join::<Emu>(|| {}).unwrap();
    // SAFETY: joined.
    let got = unsafe { (&raw const RESULTS).cast::<u64>().add(3500).read() };
    assert_eq!(got, 3500 * 3 + 1);
    assert_eq!(areas[first].state.load(Ordering::Acquire), RETIRED);
    assert_eq!(
        areas[first].slot().join::<Emu>(|| {}),
        Err(NotJoinable::NoThread)
    );
    for arg in [3700, 3701] {
        let s = give(areas, arg).unwrap();
        assert_ne!(s, first, "a retired worker was given thread {arg}");
        areas[s].slot().join::<Emu>(|| {}).unwrap();
    }
    // A detached thread that panics retires its worker too: then no worker is left.
    let second = give(areas, 3501).unwrap();
    areas[second].slot().detach().unwrap();
    while areas[second].state.load(Ordering::Acquire) != RETIRED {
        std::thread::yield_now();
    }
    assert_eq!(give(areas, 3702), None);
    assert_eq!(RUNS[3702].load(Ordering::Relaxed), 0);
    end(launch);
}

#[test]
fn a_worker_the_creator_cannot_ready_stays_idle() {
    // `pthread_create` gives a worker its frame stack between the claim and the
    // thread's publication; with no memory left the spawn fails (`EAGAIN`), and the
    // worker is idle again for the next one.
    let launch = parked(1);
    let slot = launch.areas[0].slot();
    assert_eq!(slot.try_give(0x5eed, 4010, || false), Give::Refused);
    assert_eq!(launch.areas[0].state.load(Ordering::Acquire), IDLE);
    assert_eq!(RUNS[4010].load(Ordering::Relaxed), 0);
    assert_eq!(slot.try_give(0x5eed, 4011, || true), Give::Given);
    slot.join::<Emu>(|| {}).unwrap();
    assert_eq!(RUNS[4011].load(Ordering::Relaxed), 1);
    end(launch);
}

#[test]
fn no_worker_means_no_thread() {
    // A launch whose every thread runs the kernel holds none back.
    let areas = [Area::default(), Area::default()];
    assert_eq!(areas[0].state.load(Ordering::Relaxed), NOT_A_WORKER);
    assert_eq!(give(&areas, 1), None);
    assert_eq!(
        areas[1].slot().join::<Emu>(|| {}),
        Err(NotJoinable::NoThread)
    );
    assert_eq!(areas[1].slot().detach(), Err(NotJoinable::NoThread));
}

#[test]
fn the_end_reaches_workers_that_have_not_parked_yet() {
    // `exit` on the first moments of a launch, before the held-back threads started: a
    // worker that starts after the announcement parks, sees it at its first look, and
    // leaves (one that waited for a thread only would wait for ever, and the launch
    // would never end).
    let areas: Arc<Vec<Area>> = Arc::new((0..4).map(|_| Area::default()).collect());
    let the_end = Arc::new(End::new());
    assert!(the_end.announce());
    assert!(
        !the_end.announce(),
        "a second thread ending the program leaves instead"
    );
    let workers = start_workers(&areas, &the_end);
    assert!(the_end.wait_gone::<Emu>(4, || false));
    for w in workers {
        w.join().unwrap();
    }
    assert!(
        areas
            .iter()
            .all(|a| a.state.load(Ordering::Relaxed) == CLOSED)
    );
    assert_eq!(give(&areas, 1), None);
}

#[test]
fn the_end_reaches_a_thread_left_unjoined_and_waits_for_one_that_runs() {
    let launch = parked(2);
    let areas = &launch.areas;
    // A thread that ended but was never joined: its worker leaves with the others.
    let ended = give(areas, 3900).unwrap();
    while areas[ended].state.load(Ordering::Acquire) != DONE {
        std::thread::yield_now();
    }
    // A thread still running: the end's count does not reach it (the program would trap
    // when its wait ran out), and it runs to its end.
    let held = give(areas, 3800).unwrap();
    // (A thread given as the end is announced may instead never run: its worker leaves.)
    while HELD_STARTED.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    assert!(launch.the_end.announce());
    let mut looks = 0;
    assert!(!launch.the_end.wait_gone::<Emu>(2, || {
        looks += 1;
        looks > 100
    }));
    assert_eq!(areas[held].state.load(Ordering::Acquire), RUNNING);
    assert_eq!(areas[ended].state.load(Ordering::Acquire), CLOSED);
    RELEASED.store(true, Ordering::Release);
    assert!(launch.the_end.wait_gone::<Emu>(2, || false));
    assert_eq!(RUNS[3800].load(Ordering::Relaxed), 1);
    for w in launch.workers {
        w.join().unwrap();
    }
    assert!(
        areas
            .iter()
            .all(|a| a.state.load(Ordering::Relaxed) == CLOSED)
    );
}

#[test]
fn a_joiner_leaves_when_the_thread_it_waits_for_left_at_the_end() {
    // At the program's end the joined thread leaves at a look (its word `CLOSED`); its
    // joiner must leave too, between two looks, rather than find no thread (std would
    // panic: "failed to join thread"). Here leaving is a panic, caught.
    let area = Area::default();
    area.state.store(RUNNING, Ordering::Release);
    let joined = std::thread::scope(|s| {
        let joiner = s.spawn(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                area.slot().join::<Emu>(|| {
                    if area.state.load(Ordering::Acquire) == CLOSED {
                        std::panic::panic_any("left");
                    }
                })
            }))
        });
        area.state.store(CLOSED, Ordering::Release);
        joiner.join().unwrap()
    });
    let left = joined.expect_err("the joiner returned instead of leaving");
    assert_eq!(left.downcast_ref::<&str>(), Some(&"left"));
}
