//! Log lines the GPU program causes (malformed requests, unknown services, escape
//! attempts, handler panics). A hostile kernel can cause millions a second, so each
//! kind is shown the first [`SHOWN_PER_KIND`] times in a launch and then only counted;
//! the end of the launch says how many were left out. Text that came from the GPU goes
//! through [`escaped`], so no raw control byte reaches an operator's terminal.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Lines of one kind a launch shows before it only counts them.
pub const SHOWN_PER_KIND: u64 = 20;

/// What a GPU-caused line is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A request that breaks its service's rules, or a packet that breaks the protocol.
    Malformed,
    /// A service id nobody serves.
    UnknownService,
    /// A path that tried to lead outside its pre-opened directory.
    Escape,
    /// A handler that panicked.
    HandlerPanic,
    /// A request the end-of-run drain left unserved.
    Unserved,
    /// An I/O failure while serving (writing the GPU's output, copying device memory).
    Io,
    /// A call of a service whose lifetime has ended.
    Finished,
    /// A GPU thread's `abort` or `panic_abort` (the first ends the run).
    Abort,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::Malformed,
        Kind::UnknownService,
        Kind::Escape,
        Kind::HandlerPanic,
        Kind::Unserved,
        Kind::Io,
        Kind::Finished,
        Kind::Abort,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Malformed => "malformed-request",
            Kind::UnknownService => "unknown-service",
            Kind::Escape => "path-escape",
            Kind::HandlerPanic => "handler-panic",
            Kind::Unserved => "unserved-request",
            Kind::Io => "host-io",
            Kind::Finished => "finished-service",
            Kind::Abort => "abort",
        }
    }
}

/// One launch's GPU-caused log lines, counted per kind.
#[derive(Default)]
pub(crate) struct GuestLog {
    counts: [AtomicU64; Kind::ALL.len()],
}

impl GuestLog {
    /// Logs `line` as a warning (an error for a handler panic or an abort) unless this
    /// launch has already shown [`SHOWN_PER_KIND`] lines of `kind`; the first one past
    /// the limit says that the rest are counted.
    pub fn warn(&self, kind: Kind, line: fmt::Arguments<'_>) {
        let n = self.counts[kind as usize].fetch_add(1, Relaxed);
        let level = if matches!(kind, Kind::HandlerPanic | Kind::Abort) {
            log::Level::Error
        } else {
            log::Level::Warn
        };
        if n < SHOWN_PER_KIND {
            log::log!(level, "{line}");
        } else if n == SHOWN_PER_KIND {
            log::log!(
                level,
                "{line} (further {} lines of this launch are counted, not shown)",
                kind.name()
            );
        }
    }

    /// Lines of each kind caused so far, shown or not.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        Kind::ALL
            .iter()
            .map(|&k| (k.name(), self.counts[k as usize].load(Relaxed)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// Says, once the launch has ended, how many lines of each kind were not shown.
    pub fn finish(&self) {
        for (name, n) in self.counts() {
            if n > SHOWN_PER_KIND + 1 {
                log::warn!("... and {} more {name} lines", n - SHOWN_PER_KIND - 1);
            }
        }
    }
}

/// GPU-supplied bytes as printable text: printable ASCII as is, everything else (control
/// bytes, escape sequences, invalid UTF-8, quotes and backslashes) escaped, so that a
/// log line shows what was sent and cannot move an operator's cursor.
pub fn escaped(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A GPU thread as the host's lines name it: `block B, thread T`, after `GPU G, ` in a
/// run over several GPUs.
#[derive(Clone, Copy, Debug)]
pub struct Who {
    /// The GPU's place in a run over several.
    pub gpu: Option<u32>,
    /// The linear block index.
    pub block: u32,
    /// The thread index within the block.
    pub thread: u32,
}

impl std::fmt::Display for Who {
    /// `block B, thread T`; with `{:#}`, a trace line's `block B thread T`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if f.alternate() { "" } else { "," };
        if let Some(g) = self.gpu {
            write!(f, "GPU {g}{sep} ")?;
        }
        write!(f, "block {}{sep} thread {}", self.block, self.thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_limit_are_counted_not_shown() {
        let log = GuestLog::default();
        for i in 0..1000 {
            log.warn(Kind::Malformed, format_args!("bad {i}"));
        }
        log.warn(Kind::Escape, format_args!("escape"));
        assert_eq!(
            log.counts(),
            [("malformed-request", 1000), ("path-escape", 1)]
        );
    }

    #[test]
    fn control_bytes_are_escaped() {
        assert_eq!(escaped(b"ok \x1b[2J\r\n\xff\""), r#"ok \x1b[2J\r\n\xff\""#);
        assert_eq!(escaped(b"plain/path.txt"), "plain/path.txt");
    }
}
