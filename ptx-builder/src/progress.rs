//! What a build says while it works: nothing, Cargo's kind of status lines, or every
//! stage. A GPU build takes from seconds to a few minutes (std the first time, then
//! ptxas), and a user should see which step it is in, as Cargo shows its own.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How much a build reports on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// Nothing; the nested cargo's diagnostics only when it fails.
    Quiet,
    /// As Cargo reports a build: the nested cargo's own lines (`Compiling ...`), then one
    /// line per step of the GPU build, with ptxas's parts counted on a live line when
    /// stderr is a terminal.
    Status,
    /// Every stage in detail (`ptx-builder: ...`) and the nested cargo's output: the
    /// default, as a build script's output is shown only when it fails.
    #[default]
    Stages,
}

impl Progress {
    /// Whether the nested cargo's stderr passes through (else it is kept for a failure).
    pub(crate) fn shows_cargo(self) -> bool {
        self != Progress::Quiet
    }

    /// A detailed stage message, shown at [`Progress::Stages`].
    pub(crate) fn stage(self, msg: &str) {
        if self == Progress::Stages {
            eprintln!("ptx-builder: {msg}");
        }
    }

    /// A Cargo-style status line (`{verb:>12} {msg}`, the verb bold green on a
    /// terminal), shown at [`Progress::Status`].
    pub(crate) fn status(self, verb: &str, msg: &str) {
        if self == Progress::Status {
            eprintln!("{} {msg}", styled(verb));
        }
    }

    /// Something the user should know (`warning: {msg}`), shown unless [`Progress::Quiet`].
    pub(crate) fn warn(self, msg: &str) {
        if self != Progress::Quiet {
            eprintln!("warning: {msg}");
        }
    }

    /// A step counted in parts (ptxas's), reported live on a terminal at
    /// [`Progress::Status`] and once done.
    pub(crate) fn counter(self, verb: &'static str, what: String, total: usize) -> Counter {
        Counter {
            on: self == Progress::Status,
            live: self == Progress::Status && std::io::stderr().is_terminal(),
            verb,
            what,
            total,
            started: Instant::now(),
            shown: None,
        }
    }
}

/// `verb` right-aligned to 12 columns, bold green when stderr is a terminal (as Cargo).
fn styled(verb: &str) -> String {
    if std::io::stderr().is_terminal() {
        format!("\x1b[1;32m{verb:>12}\x1b[0m")
    } else {
        format!("{verb:>12}")
    }
}

/// A step of `total` parts in progress.
pub(crate) struct Counter {
    on: bool,
    live: bool,
    verb: &'static str,
    what: String,
    total: usize,
    started: Instant,
    /// When the live line was last drawn.
    shown: Option<Instant>,
}

impl Counter {
    /// `done` parts are finished: redraws the live line, at most every 250 ms.
    pub(crate) fn update(&mut self, done: usize) {
        if !self.live
            || self
                .shown
                .is_some_and(|t| t.elapsed() < Duration::from_millis(250))
        {
            return;
        }
        self.shown = Some(Instant::now());
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{} {}: {done}/{} parts, {:.0} s\x1b[K",
            styled(self.verb),
            self.what,
            self.total,
            self.started.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }

    /// The step is over: its line, with the time it took.
    pub(crate) fn finish(self) {
        if !self.on {
            return;
        }
        let clear = if self.live { "\r\x1b[K" } else { "" };
        eprintln!(
            "{clear}{} {} in {:.1} s",
            styled(self.verb),
            self.what,
            self.started.elapsed().as_secs_f64()
        );
    }
}
