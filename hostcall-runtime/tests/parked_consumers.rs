//! The default of four consumer threads: while a GPU computes without calling
//! the host, every consumer but the first parks, so the host pays for one polling thread;
//! the calls that follow are still served. A test binary of its own, so that no other
//! test's consumer threads run beside it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::{Duration, Instant};

use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch, Outcome};

/// Voluntary context switches (each sleep or park is one) of this process's consumer
/// threads, by name (`hostcall-0` ...).
fn consumer_switches() -> BTreeMap<String, u64> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let name = std::fs::read_to_string(dir.join("comm"))
                .ok()?
                .trim()
                .to_owned();
            let digits = name.strip_prefix("hostcall-")?;
            digits.parse::<u32>().ok()?;
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let switches = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()?;
            Some((name, switches))
        })
        .collect()
}

#[test]
fn consumers_but_the_first_park_while_the_gpu_computes_and_still_serve_after() {
    let host = Host::builder()
        .echo_output(false)
        .capture_output(true)
        .consumers(4)
        .ports(8)
        .build()
        .unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", {
        let go = go.clone();
        move |t: &EmuThread| {
            assert_eq!(t.channel().ping::<Emu>(1), 1);
            while !go.load(Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(t.channel().ping::<Emu>(2), 2);
        }
    });
    let (before, after, report) = std::thread::scope(|s| {
        let run = s.spawn(|| host.run(&mut m, &Launch::linear("k", 1, 16, vec![])));
        let started = Instant::now();
        while consumer_switches().len() < 4 {
            assert!(started.elapsed() < Duration::from_secs(20), "no consumers");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Past the spin, yield and sleep phases: the consumers are idle for good.
        std::thread::sleep(Duration::from_millis(300));
        let before = consumer_switches();
        std::thread::sleep(Duration::from_millis(400));
        let after = consumer_switches();
        go.store(true, Release);
        (before, after, run.join().unwrap().unwrap())
    });
    assert_eq!(report.outcome, Outcome::Completed);
    assert_eq!(report.calls, 32);
    assert_eq!(before.len(), 4, "{before:?}");
    for (name, was) in &before {
        let woke = after[name] - was;
        println!("{name}: {woke} wake-ups in 400 ms");
        if name == "hostcall-0" {
            // Sleeps of up to 1 ms: about 400.
            assert!(woke > 100, "{name} polled only {woke} times");
        } else {
            // Parked, waking every 10 ms at most: about 40 (400 if it polled).
            assert!(woke < 100, "{name} woke {woke} times in 400 ms");
        }
    }
}
