//! The host's bounded resources (`check_resources`): each way the host of c839d74 let
//! something that waits without bound hold a bounded resource, where the model can
//! express it, is found with the rule the host or client had then and not with
//! today's; and today's host holds every invariant in a mixed run.

use hostcall_model::{Call, Report, ResourceConfig, Rules, Search, check_resources};

use Call::{FifoOpenRead, FifoOpenWrite, HungRead, Ping, Print, Stat, Write};

/// `threads` on `ports` ports under `rules`: one consumer, one base worker behind a
/// queue of one, room for one unit of output, a reader that never stalls.
fn config(threads: Vec<(u8, Vec<Call>)>, ports: u8, rules: Rules) -> ResourceConfig {
    ResourceConfig {
        threads,
        ports,
        consumers: 1,
        workers: 1,
        queue: 1,
        bound: 1,
        stalls: false,
        rules,
    }
}

/// Explores `c` and returns the trace of a violation of `kind`, failing if there is none.
fn found(name: &str, kind: &str, c: &ResourceConfig) -> String {
    let r = check_resources(c);
    println!("{name}: {r}");
    match r.find(kind) {
        Some(t) => t.to_string(),
        None => panic!("{name}: no {kind:?}"),
    }
}

/// Today's rules with the pool of c839d74: no waiters, and no worker started for a job
/// stuck in the workers' queue.
fn old_pool() -> Rules {
    Rules {
        waiters: false,
        replaces_stuck_workers: false,
        ..Rules::today()
    }
}

/// Explores `c` under today's rules: nothing breaks, and some run ends correctly.
fn sound(name: &str, c: impl Fn(Rules) -> ResourceConfig) -> Report {
    let r = check_resources(&c(Rules::today()));
    r.assert_sound(name);
    r
}

/// Explores `c` with one of today's two pool rules as it was at c839d74 (no waiters, or
/// no worker for a stuck job): either rule alone mends it.
fn either_pool_rule_mends(c: impl Fn(Rules) -> ResourceConfig) {
    let today = Rules::today();
    let waiters_only = Rules {
        replaces_stuck_workers: false,
        ..today
    };
    let stuck_workers_only = Rules {
        waiters: false,
        ..today
    };
    check_resources(&c(waiters_only)).assert_sound("today's waiters only");
    check_resources(&c(stuck_workers_only)).assert_sound("today's stuck jobs' workers only");
}

/// FIFO readers' opens take the base workers, and the thread that would open the
/// write ends first `stat`s: at c839d74 a call that only takes time got no worker past
/// the base, and waited behind the opens for ever (the host's four base workers and four
/// readers, scaled to one each). Today the opens each run on a waiter of their own, and
/// a job stuck in the queue gets a worker of its own: either mends it.
#[test]
fn a_stat_behind_fifo_opens_on_every_base_worker_waits_for_ever() {
    let f1 = |rules| {
        config(
            vec![
                (0, vec![FifoOpenRead(0)]),
                (0, vec![Stat, FifoOpenWrite(0)]),
            ],
            2,
            rules,
        )
    };
    let t = found(
        "the pool of c839d74",
        "held up by waiting calls",
        &f1(old_pool()),
    );
    assert!(
        t.contains("thread 1's call on port 0 to the workers' queue"),
        "{t}"
    );
    found("c839d74", "held up by waiting calls", &f1(Rules::c839d74()));
    sound("today", f1);
    either_pool_rule_mends(f1);
}

/// More FIFO opens than the c839d74 pool grows to (a worker per port at most): the
/// readers' opens take every worker, and the writer's open, which would end them, waits
/// in the queue for one. Today no call that waits on another party waits for a thread,
/// nor does a job stuck in the queue: either mends it.
#[test]
fn fifo_opens_past_the_pools_growth_leave_their_writer_no_worker() {
    let f1b = |rules| {
        config(
            vec![
                (0, vec![FifoOpenRead(0)]),
                (0, vec![FifoOpenRead(1)]),
                (0, vec![FifoOpenWrite(0), FifoOpenWrite(1)]),
            ],
            2,
            rules,
        )
    };
    let t = found(
        "the pool of c839d74",
        "held up by waiting calls",
        &f1b(old_pool()),
    );
    assert!(
        t.contains("thread 2's call on port 0 to the workers' queue"),
        "{t}"
    );
    sound("today", f1b);
    either_pool_rule_mends(f1b);
}

/// A printer's posted piece waits on its port for a stalled reader; a thread that
/// never prints takes that port's free lock word, waits on the piece, and at its limit
/// gives up: the launch fails. Today it skips the held-back port.
#[test]
fn a_ping_behind_held_back_output_gives_up_and_fails_the_launch() {
    let f3 = |rules| ResourceConfig {
        stalls: true,
        ..config(vec![(0, vec![Print, Print]), (0, vec![Ping])], 3, rules)
    };
    let t = found(
        "the client of c839d74",
        "launch failed",
        &f3(Rules {
            search: Search::FirstFree,
            ..Rules::today()
        }),
    );
    assert!(
        t.contains("thread 1: takes port 0's lock, waits for its posted packet"),
        "{t}"
    );
    sound("today", f3);
}

/// Skipping held-back ports, as first specified, is not enough: one printer can leave
/// pieces on every port (its home port was busy for one print, free for the next), and
/// a thread that never prints then finds no port for as long as the reader stalls.
/// Taking the continuation port, which the host never holds back, once every other
/// port is held back or busy, mends it; today's run also needs the printer's third
/// print, which meets a held-back port and goes again as a write that waits, to wait
/// parked on the host, holding no port while stdout has no room.
#[test]
fn one_printer_holds_back_every_port_unless_others_may_take_the_continuation_port() {
    let printer = |rules| ResourceConfig {
        stalls: true,
        ..config(
            vec![(0, vec![Print, Print, Print]), (0, vec![Ping, Ping])],
            3,
            rules,
        )
    };
    let t = found(
        "skipping held-back ports only",
        "held up by stalled output",
        &printer(Rules {
            search: Search::SkipsHeld,
            ..Rules::today()
        }),
    );
    assert!(t.contains("leaves port 0's posted print there"), "{t}");
    assert!(t.contains("leaves port 1's posted print there"), "{t}");
    sound("today", printer);
    found(
        "a mixed run, skipping held-back ports only",
        "held up by stalled output",
        &ResourceConfig::mixed(Rules {
            search: Search::SkipsHeld,
            ..Rules::today()
        }),
    );
}

/// At c839d74 a job that found the workers' queue full ran on the consumer; a FIFO
/// open there waits for its writer, whose open is published on a port of that same
/// consumer, never served. Today a call that waits on a peer never queues, and a packet
/// for the workers stays on its port while their queue is full; with only the second
/// rule old, a hung read run on the consumer holds up its ports as well.
#[test]
fn a_full_queue_ran_a_fifo_open_on_the_consumer_and_its_writer_was_never_served() {
    let f4 = |rules| {
        config(
            vec![
                (0, vec![Stat]),
                (1, vec![FifoOpenRead(0)]),
                (0, vec![FifoOpenWrite(0)]),
            ],
            3,
            rules,
        )
    };
    let t = found(
        "the pool and queue of c839d74",
        "held up by waiting calls",
        &f4(Rules {
            full_queue_leaves: false,
            ..old_pool()
        }),
    );
    assert!(t.contains("thread 1's call on port 1 to nobody"), "{t}");
    sound("today", f4);

    let hung = |rules| ResourceConfig {
        workers: 2,
        ..config(
            vec![(0, vec![Stat]), (1, vec![HungRead]), (0, vec![Ping])],
            3,
            rules,
        )
    };
    let t = found(
        "the queue of c839d74",
        "held up by a hung call",
        &hung(Rules {
            full_queue_leaves: false,
            ..Rules::today()
        }),
    );
    assert!(t.contains("thread 1's call on port 1 to nobody"), "{t}");
    sound("today, a hung read", hung);
}

/// Output that waits for room (a write too long to post) ran on a base worker at
/// c839d74; with the worker taken by a FIFO open whose writer writes first, the write
/// never runs although stdout has room. Today a write that waits for the reader runs on
/// a waiter of its own, and a job stuck in the queue gets a worker: either mends it.
#[test]
fn output_waiting_for_a_base_worker_behind_a_fifo_open_waits_for_ever() {
    let f6 = |rules| {
        config(
            vec![
                (0, vec![FifoOpenRead(0)]),
                (0, vec![Write, FifoOpenWrite(0)]),
            ],
            2,
            rules,
        )
    };
    let t = found(
        "the pool of c839d74",
        "held up by waiting calls",
        &f6(old_pool()),
    );
    assert!(
        t.contains("thread 1's call on port 0 to the workers' queue"),
        "{t}"
    );
    sound("today", f6);
    either_pool_rule_mends(f6);
}

/// Reads of a hung mount only take time, so at c839d74 they were never parked and
/// kept their ports for ever: two of them hold every port a `stat` could take. Today
/// they are parked (after a longer delay) and free their ports.
#[test]
fn hung_reads_that_keep_their_ports_hold_up_every_other_call() {
    let f8 = |rules| {
        config(
            vec![(0, vec![HungRead]), (1, vec![HungRead]), (0, vec![Stat])],
            3,
            rules,
        )
    };
    let t = found(
        "no parking of calls that take time",
        "held up by a hung call",
        &f8(Rules {
            parks_time_calls: false,
            ..Rules::today()
        }),
    );
    assert!(!t.contains("thread 2: takes"), "{t}");
    sound("today", f8);
}

/// A hung read keeps its worker for good, so with the base workers only, as many hung
/// reads as there are workers hold up every later call that takes time (a `stat` of a
/// healthy file system among them), though each is parked and frees its port. Today a
/// job that waits first in the queue while no worker is idle gets one more worker.
#[test]
fn as_many_hung_reads_as_workers_hold_up_every_stat() {
    let hung = |rules| config(vec![(0, vec![HungRead]), (0, vec![Stat])], 2, rules);
    let t = found(
        "the base workers only",
        "held up by a hung call",
        &hung(Rules {
            replaces_stuck_workers: false,
            ..Rules::today()
        }),
    );
    assert!(t.contains("a worker takes thread 0's call"), "{t}");
    assert!(t.contains("parks thread 0's call, frees its port"), "{t}");
    assert!(
        t.contains("thread 1's call on port 0 to the workers' queue"),
        "{t}"
    );
    sound("today", hung);
}

/// At c839d74 the run's end handed stdout every piece still held back, past
/// its bound, and the process exited a fixed time later, losing what the reader had not
/// taken. Today the run returns once everything printed is written.
#[test]
fn the_end_passed_the_bound_and_the_exit_lost_output() {
    let f2 = |rules| config(vec![(0, vec![Print, Print])], 2, rules);
    let end = f2(Rules {
        end_waits_written: false,
        ..Rules::today()
    });
    found("the end of c839d74", "output past its bound", &end);
    let t = found("the end of c839d74", "output lost", &end);
    assert!(t.contains("end: the process exits"), "{t}");
    sound("today", f2);
}

/// The checker's own verdicts: a program whose threads open two FIFOs in crossed order
/// deadlocks as it would on Linux, and that is a deadlock, not a call held up by the
/// host.
#[test]
fn fifos_opened_in_crossed_order_deadlock_on_their_own() {
    let crossed = config(
        vec![
            (0, vec![FifoOpenRead(0), FifoOpenWrite(1)]),
            (0, vec![FifoOpenRead(1), FifoOpenWrite(0)]),
        ],
        2,
        Rules::today(),
    );
    let r = check_resources(&crossed);
    println!("crossed: {r}");
    assert!(r.find("deadlock").is_some());
    assert_eq!(r.violations.len(), 1, "only the deadlock");
}

/// Today's host in a mixed run with a reader that may stall for good; the same run at
/// c839d74 breaks four ways.
#[test]
fn todays_host_holds_every_invariant_in_a_mixed_run() {
    let r = sound("today, mixed", ResourceConfig::mixed);
    assert!(r.states > 100_000, "the whole space was explored");
    let r = check_resources(&ResourceConfig::mixed(Rules::c839d74()));
    println!("c839d74, mixed: {r}");
    for kind in [
        "held up by a hung call",
        "held up by waiting calls",
        "launch failed",
        "output past its bound",
    ] {
        assert!(r.find(kind).is_some(), "c839d74: {kind}");
    }
}
