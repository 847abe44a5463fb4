//! Issue 19, item 5: log lines a GPU program causes are limited per launch and per
//! kind. A test binary of its own: it installs the process-wide logger, which keeps
//! every line it is given.

use std::sync::Mutex;

use hostcall_runtime::emulated::{EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Host, Launch, Outcome, Unserved};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Keep;

impl log::Log for Keep {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            LINES.lock().unwrap().push(r.args().to_string());
        }
    }

    fn flush(&self) {}
}

/// 2,000 calls of a service nobody serves: before, 2,000 warnings (a hostile kernel
/// made a million a second); now the first 20, one saying the rest are counted, and
/// at the end of the launch one saying how many more there were.
#[test]
fn unknown_services_warn_twenty_times_then_count() {
    log::set_logger(&Keep).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        for _ in 0..2000 {
            t.channel()
                .call::<hostcall_runtime::emulated::Emu>(999, [0; 6], &[], &mut [], None);
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
    let lines = LINES.lock().unwrap();
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
