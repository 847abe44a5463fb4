//! Log lines a GPU program causes are limited per launch and per
//! kind. A test binary of its own: it installs the process-wide logger that keeps every
//! warning (`common::warnings`).

mod common;

use hostcall_abi::std_services::Lifecycle;
use hostcall_emulator::{EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch, Outcome, Unserved};

/// 2,000 calls of a service nobody serves: before, 2,000 warnings (a hostile kernel
/// made a million a second); now the first 20, one saying the rest are counted, and
/// at the end of the launch one saying how many more there were.
#[test]
fn unknown_services_warn_twenty_times_then_count() {
    common::warnings();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        for _ in 0..2000 {
            t.channel()
                .call::<hostcall_emulator::Emu>(999, [0; 6], &[], &mut [], None);
        }
    });
    let host = Host::builder()
        .echo_output(false)
        .unserved(Unserved::Enosys)
        .build()
        .unwrap();
    let report = host
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(report.outcome, Outcome::Completed);
    let lines = common::warnings();
    let unknown = lines
        .iter()
        .filter(|l| l.contains("unknown hostcall service id 0x3e7"))
        .count();
    assert_eq!(unknown, 21, "{} lines in all", lines.len());
    assert!(
        lines
            .iter()
            .any(|l| l == "... and 1979 more unknown-service lines"),
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
}

/// Every `abort` and `panic_abort` call logged a line of its own,
/// outside the per-launch limit (80,000 calls, 80,000 lines). The first ends the run;
/// the lines of those that follow are limited as every GPU-caused line is.
#[test]
fn aborts_log_at_most_the_launchs_lines() {
    common::warnings();
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        for _ in 0..200 {
            t.client::<dyn Lifecycle>().abort();
        }
    });
    let host = Host::builder().echo_output(false).build().unwrap();
    let report = host
        .run(&mut m, &Launch::linear("k", 4, 1, vec![]))
        .unwrap();
    assert!(
        matches!(report.outcome, Outcome::Aborted { .. }),
        "{report:?}"
    );
    let aborted = common::warnings()
        .iter()
        .filter(|l| l.contains(") aborted"))
        .count();
    assert!(aborted <= 21, "{aborted} lines about aborts");
}
