//! Lifetimes (AMDGPU.jl's): a host closure or a declared service serves once,
//! N times or until finished; `finish()` ends it while a kernel calls it, `one_more()`
//! allows a single further call, and a call past the lifetime gets `EPIPE` on the GPU
//! and a line on the host. A test binary of its own: it installs the process-wide logger
//! that keeps every warning (`common::warnings`).

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::quiet;
use hostcall_abi::errno::EPIPE;
use hostcall_abi::typed::Errno;
use hostcall_client::typed::{CallHostFn, HostFn};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, KernelArg, Launch, Lifetime, Outcome, RunReport, Serving};

hostcall_client::service! {
    /// Counts by key; its methods share one lifetime.
    pub trait Tally {
        /// Adds one under `key`; the count now.
        fn bump(&self, key: &str) -> Result<u64, Errno>;
        /// Every key's count together.
        fn total(&self) -> Result<u64, Errno>;
    }
}

#[derive(Default)]
struct HostTally(Mutex<std::collections::HashMap<String, u64>>);

impl Tally for HostTally {
    fn bump(&self, key: &str) -> Result<u64, Errno> {
        let mut m = self.0.lock().unwrap();
        let n = m.entry(key.to_owned()).or_default();
        *n += 1;
        Ok(*n)
    }
    fn total(&self) -> Result<u64, Errno> {
        Ok(self.0.lock().unwrap().values().sum())
    }
}

/// The warnings logged so far that contain `text`.
fn warnings_with(text: &str) -> Vec<String> {
    common::warnings()
        .into_iter()
        .filter(|l| l.contains(text))
        .collect()
}

/// A closure that may fail, as the kernels here call it: its argument back.
type Echo = HostFn<(u64,), Result<u64, Errno>>;

/// Runs `kernel` on `blocks` x `threads` emulated GPU threads, each given `echo`'s
/// handle.
fn run(
    host: &Host,
    echo: Echo,
    (blocks, threads): (u32, u32),
    kernel: impl Fn(&EmuThread, Echo) + Send + Sync + 'static,
) -> RunReport {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the handle")
        };
        kernel(t, Echo::from_raw(raw));
    });
    let args = vec![KernelArg::U64(echo.raw())];
    host.run(&mut m, &Launch::linear("k", blocks, threads, args))
        .unwrap()
}

#[test]
fn a_once_closure_answers_one_call_and_then_epipe_with_a_line_naming_the_thread() {
    let _ = warnings_with("");
    let mut host = quiet().build().unwrap();
    let (echo, serving) =
        host.hostcall_for(Lifetime::Once, |x: u64| -> Result<u64, Errno> { Ok(x) });
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    // One thread of the launch calls, one no other test's kernel has: the lines are
    // this test's.
    let r = run(&host, echo, (4, 8), move |t, echo| {
        if (t.block, t.thread) == (3, 7) {
            for x in [5, 6, 7] {
                g.lock()
                    .unwrap()
                    .push(echo.call_on::<Emu>(t.channel(), (x,)));
            }
        }
    });
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(
        *got.lock().unwrap(),
        [Ok(5), Err(Errno(EPIPE)), Err(Errno(EPIPE))]
    );
    assert!(serving.is_finished());
    assert_eq!((serving.served(), serving.calls_left()), (1, Some(0)));
    let name = format!(
        "closure#{}",
        echo.id() - hostcall_abi::typed::NAMED_IDS.start
    );
    let lines = warnings_with(&format!(
        "GPU thread (block 3, thread 7) called {name}, which has finished serving"
    ));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines.iter().all(|l| l.ends_with("answered EPIPE")),
        "{lines:?}"
    );
}

#[test]
fn n_calls_are_served_exactly_however_many_threads_race_for_them() {
    let mut host = quiet().build().unwrap();
    let (echo, serving) = host.hostcall_for(Lifetime::Times(10), |x: u64| -> Result<u64, Errno> {
        Ok(x)
    });
    let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (o, f) = (ok.clone(), refused.clone());
    let r = run(&host, echo, (2, 64), move |t, echo| {
        let me = (t.block * 64 + t.thread) as u64;
        match echo.call_on::<Emu>(t.channel(), (me,)) {
            Ok(v) if v == me => o.fetch_add(1, Relaxed),
            Err(Errno(EPIPE)) => f.fetch_add(1, Relaxed),
            other => panic!("thread {me} got {other:?}"),
        };
    });
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!((ok.load(Relaxed), refused.load(Relaxed)), (10, 118));
    assert_eq!(serving.served(), 10);
}

#[test]
fn finish_ends_a_continuous_closure_while_a_kernel_calls_it() {
    let mut host = quiet().build().unwrap();
    let (echo, serving) = host.hostcall_for(Lifetime::Continuous, |x: u64| -> Result<u64, Errno> {
        Ok(x)
    });
    assert_eq!(serving.calls_left(), None);
    let finisher = {
        let serving = serving.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while serving.served() < 100 && started.elapsed() < Duration::from_secs(30) {
                std::thread::yield_now();
            }
            serving.finish();
        })
    };
    let ended = Arc::new(Mutex::new(None));
    let e = ended.clone();
    let r = run(&host, echo, (1, 1), move |t, echo| {
        let mut answered = 0u64;
        let err = loop {
            match echo.call_on::<Emu>(t.channel(), (answered,)) {
                Ok(v) => assert_eq!(v, answered),
                Err(err) => break err,
            }
            answered += 1;
        };
        *e.lock().unwrap() = Some((answered, err));
    });
    finisher.join().unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let (answered, err) = ended.lock().unwrap().unwrap();
    assert_eq!(err, Errno(EPIPE));
    assert!(answered >= 100, "finished after {answered} calls");
    assert_eq!(serving.served(), answered);
}

#[test]
fn one_more_allows_a_single_further_call_and_a_lifetime_outlives_its_launch() {
    let mut host = quiet().build().unwrap();
    let (echo, serving) =
        host.hostcall_for(Lifetime::Once, |x: u64| -> Result<u64, Errno> { Ok(x) });
    let two_calls = |t: &EmuThread, echo: Echo| {
        assert_eq!(echo.call_on::<Emu>(t.channel(), (1,)), Ok(1));
        assert_eq!(echo.call_on::<Emu>(t.channel(), (2,)), Err(Errno(EPIPE)));
    };
    assert_eq!(
        run(&host, echo, (1, 1), two_calls).outcome,
        Outcome::Completed
    );
    // Finished, and still finished in the next launch.
    let refused = |t: &EmuThread, echo: Echo| {
        assert_eq!(echo.call_on::<Emu>(t.channel(), (3,)), Err(Errno(EPIPE)));
    };
    assert_eq!(
        run(&host, echo, (1, 1), refused).outcome,
        Outcome::Completed
    );
    serving.one_more();
    assert_eq!(serving.calls_left(), Some(1));
    assert_eq!(
        run(&host, echo, (1, 1), two_calls).outcome,
        Outcome::Completed
    );
    assert_eq!(serving.served(), 2);
}

#[test]
fn a_closure_that_cannot_fail_ends_its_launch_when_called_past_its_lifetime() {
    let mut host = quiet().build().unwrap();
    let (add, _serving) = host.hostcall_for(Lifetime::Times(2), |x: u64| x + 1);
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!("the handle")
        };
        let add = HostFn::<(u64,), u64>::from_raw(raw);
        let mut x = 0;
        for _ in 0..3 {
            x = add.call_on::<Emu>(t.channel(), (x,));
        }
    });
    let args = vec![KernelArg::U64(add.raw())];
    let r = host.run(&mut m, &Launch::linear("k", 1, 1, args)).unwrap();
    let why = r.outcome.failure().expect("the launch failed");
    let name = format!(
        "closure#{}",
        add.id() - hostcall_abi::typed::NAMED_IDS.start
    );
    assert!(
        why.contains(&format!(
            "called `{name}`, which cannot return an error, and it failed with EPIPE"
        )),
        "{why}"
    );
}

#[test]
fn a_declared_services_methods_share_its_lifetime_across_launches() {
    let serving = Serving::new(Lifetime::Times(3));
    let host = quiet()
        .serve_for::<dyn Tally, _>(&serving, HostTally::default())
        .build()
        .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let launch = |host: &Host, body: fn(&EmuThread) -> Vec<Result<u64, Errno>>| {
        let g = got.clone();
        let mut m = EmulatedModule::new(WarpMode::Independent)
            .uses(<dyn Tally>::SERVICES)
            .kernel("k", move |t: &EmuThread| {
                g.lock().unwrap().extend(body(t));
            });
        let r = host
            .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
            .unwrap();
        assert_eq!(r.outcome, Outcome::Completed);
    };
    launch(&host, |t| {
        let tally = t.client::<dyn Tally>();
        vec![
            tally.bump("a"),
            tally.bump("a"),
            tally.total(),
            tally.bump("b"),
        ]
    });
    assert_eq!(
        *got.lock().unwrap(),
        [Ok(1), Ok(2), Ok(2), Err(Errno(EPIPE))]
    );
    assert!(serving.is_finished());
    serving.one_more();
    got.lock().unwrap().clear();
    launch(&host, |t| {
        let tally = t.client::<dyn Tally>();
        vec![tally.bump("c"), tally.total()]
    });
    assert_eq!(*got.lock().unwrap(), [Ok(1), Err(Errno(EPIPE))]);
    assert_eq!(serving.served(), 4);
}
