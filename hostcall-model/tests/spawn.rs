//! The hand-off of threads to held-back GPU threads (`hostcall_client::spawn::Slot`).

use hostcall_model::{SpawnConfig, Then, check_spawn};

/// Two creators racing for two workers, joining and detaching: every thread runs once,
/// every join waits for its thread, no slot is given again while it can be joined, and
/// every run ends with the workers parked.
#[test]
fn threads_handed_to_parked_workers_run_once_and_join_after_they_end() {
    assert_correct(false);
}

/// Two creators racing for two workers, joining and detaching, threads that may panic
/// or not: no violation, and some run ends correctly.
fn assert_correct(panics: bool) {
    let r = check_spawn(&SpawnConfig {
        workers: 2,
        creators: vec![
            vec![Then::Join, Then::Detach, Then::Join],
            vec![Then::Detach, Then::Join],
        ],
        join_waits: true,
        panics,
        ready_may_fail: panics,
        ends: false,
        late_start: false,
        park_sees_end: true,
        join_leaves: true,
    });
    r.assert_sound("assert_correct");
}

/// A join that freed the slot as soon as its thread started would return before the
/// thread ended, and let another creator take the slot: the model finds both.
#[test]
fn a_join_that_does_not_wait_for_done_is_caught() {
    let r = check_spawn(&SpawnConfig {
        workers: 1,
        creators: vec![vec![Then::Join], vec![Then::Join]],
        join_waits: false,
        panics: false,
        ready_may_fail: false,
        ends: false,
        late_start: false,
        park_sees_end: true,
        join_leaves: true,
    });
    let t = r.find("joined early").expect("an early join is found");
    println!("{} states; joined early:\n{t}", r.states);
}

/// Threads that may end in a panic, each retiring its worker (the GPU thread exits), and
/// creators that may fail to ready a worker: a join still returns after its thread
/// ended, a retired worker is never given a thread, a worker given back is idle again,
/// and a creator that finds every worker retired is refused rather than left waiting.
#[test]
fn a_worker_retired_by_a_panic_is_never_given_a_thread_again() {
    assert_correct(true);
}

/// The program's end once creator 0 (the thread calling `exit`) is done, while creator
/// 1 may still start, join and detach threads, on workers that may not have parked yet,
/// threads that may panic: the count of threads gone reaches the others only once every
/// worker exited (or retired), and the run ends with it, or with the trap while a thread
/// still runs.
#[test]
fn the_end_counts_every_thread_gone_and_strands_none() {
    let r = check_spawn(&SpawnConfig {
        workers: 2,
        creators: vec![
            vec![Then::Join, Then::Detach],
            vec![Then::Detach, Then::Join],
        ],
        join_waits: true,
        panics: true,
        ready_may_fail: true,
        ends: true,
        late_start: true,
        park_sees_end: true,
        join_leaves: true,
    });
    r.assert_sound("the_end_counts_every_thread_gone_and_strands_none");
}

/// A parked worker that looked only at its word, never for the end, would wait for ever
/// once the end is announced (nothing closes its slot for it): the ending thread's count
/// never reaches it, and the launch never ends. The model finds it.
#[test]
fn a_park_that_does_not_look_for_the_end_is_caught() {
    let r = check_spawn(&SpawnConfig {
        workers: 1,
        creators: Vec::new(),
        join_waits: true,
        panics: false,
        ready_may_fail: false,
        ends: true,
        late_start: true,
        park_sees_end: false,
        join_leaves: true,
    });
    let t = r
        .find("worker stranded")
        .expect("a stranded worker is found");
    println!("{} states; stranded:\n{t}", r.states);
}

/// A thread that leaves at the end while another joins it: a join that reported "no
/// thread" for the closed slot, instead of leaving too, would make std panic ("failed
/// to join thread") as the program ends. The model finds it.
#[test]
fn a_join_that_fails_when_its_thread_left_at_the_end_is_caught() {
    let r = check_spawn(&SpawnConfig {
        workers: 1,
        creators: vec![Vec::new(), vec![Then::Join]],
        join_waits: true,
        panics: false,
        ready_may_fail: false,
        ends: true,
        late_start: false,
        park_sees_end: true,
        join_leaves: false,
    });
    let t = r.find("join failed").expect("a failed join is found");
    println!("{} states; join failed:\n{t}", r.states);
}
