//! As AMDGPU.jl stops its hostcalls after synchronisation: once a launch has
//! ended, nothing of the host polls. Its consumer threads and its blocking pool's
//! workers are gone, and a host between launches costs no CPU. A test binary of its
//! own, so that no other test's launch runs beside it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::services::{Call, Handler, Malformed, Reply};
use hostcall_runtime::{Host, Launch, Outcome};

/// A service the server runs on its blocking pool, so that the launch starts workers.
const SLOW: u32 = 300;

struct Slow;

impl Handler for Slow {
    fn call(&self, _: &mut Call<'_>) -> Result<Reply, Malformed> {
        std::thread::sleep(Duration::from_millis(1));
        Ok(Reply::value(1))
    }

    fn can_block(&self, _: u32) -> bool {
        true
    }
}

/// CPU time this process's threads have used so far (the kernel's per-thread
/// `schedstat`, in nanoseconds).
fn cpu_time() -> Duration {
    let ns: u64 = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

#[test]
fn no_host_thread_outlives_its_launch_and_a_host_between_launches_uses_no_cpu() {
    let host = Host::builder()
        .echo_output(false)
        .capture_output(true)
        .consumers(4)
        .service(SLOW, Arc::new(Slow))
        .build()
        .unwrap();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        for _ in 0..4 {
            let r = t.channel().call::<Emu>(SLOW, [0; 6], &[], &mut [], None);
            assert_eq!(r.result, 1);
        }
    });
    for _ in 0..2 {
        let r = host
            .run(&mut m, &Launch::linear("k", 2, 32, vec![]))
            .unwrap();
        assert_eq!(r.outcome, Outcome::Completed);
        assert_eq!(r.calls, 2 * 32 * 4);
        assert_eq!(common::host_threads(), Vec::<String>::new());
        let before = cpu_time();
        std::thread::sleep(Duration::from_millis(500));
        let used = cpu_time().saturating_sub(before);
        assert!(
            used < Duration::from_millis(10),
            "the idle host used {used:?} of CPU in 500 ms"
        );
    }
}
