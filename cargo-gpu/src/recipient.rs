//! What the user of a packaged program may say of what it is granted: see it
//! (`--gpu-grants`), take grants away (`--gpu-no-grant`, `--gpu-no-env`,
//! `--gpu-no-stdin`, `--gpu-no-net`), and shorten its time limit (`--gpu-timeout`). A
//! packaged program's grants are resolved where it starts: the person who runs it, not
//! the one who built it, is the one whose files and variables are at stake, so they can
//! see and narrow them, never widen them.
//!
//! These runner flags are read from the variable [`FLAGS_VAR`] alone, never from the
//! command line: a packaged program is run as `prog.gpu "$untrusted"` as its CPU build
//! is, so every argument is the program's, byte for byte (`--` and `--gpu-...` too, and
//! ones that are not UTF-8), and no argument can be taken as the runner's.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::Path;

use crate::options::{Grant, RunOptions};

/// The variable that holds a packaged program's runner flags: words separated by
/// whitespace, as `RUSTFLAGS`.
pub const FLAGS_VAR: &str = "CARGO_GPU_RUNNER_FLAGS";

/// The runner's flags a packaged program's user gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecipientFlags {
    /// Print what the program is granted here, and exit.
    pub show: bool,
    /// Directory grants to take away: as recorded, or by the folder they resolve to.
    pub no_grant: Vec<String>,
    /// Variables to take away.
    pub no_env: Vec<String>,
    /// Take stdin away.
    pub no_stdin: bool,
    /// Take every socket grant away.
    pub no_net: bool,
    /// A time limit in seconds, at least 1, to shorten the recorded one to.
    pub timeout_s: Option<u64>,
}

/// Every runner flag and where it is given, for an error about one.
pub const USAGE: &str = "runner flags, in CARGO_GPU_RUNNER_FLAGS (never among the \
    program's arguments): --gpu-grants (show what the program is granted here, and exit), \
    --gpu-no-grant DIR, --gpu-no-env NAME, --gpu-no-stdin, --gpu-no-net, \
    --gpu-timeout SECONDS (shortens the time limit)";

/// Splits what a packaged program was started with into the runner's flags, from the
/// value of [`FLAGS_VAR`] (`flags`), and the program's arguments: `argv` (after the
/// program's name), every one of them, as they came.
pub fn split(
    flags: Option<&OsStr>,
    argv: Vec<OsString>,
) -> Result<(RecipientFlags, Vec<OsString>), String> {
    let words = match flags.map(OsStr::to_str) {
        None => "",
        Some(Some(words)) => words,
        Some(None) => return Err(format!("{FLAGS_VAR} is not UTF-8 ({USAGE})")),
    };
    Ok((parse(words)?, argv))
}

/// [`split`] of this process's variable and arguments.
pub fn of_this_process() -> Result<(RecipientFlags, Vec<OsString>), String> {
    split(
        std::env::var_os(FLAGS_VAR).as_deref(),
        std::env::args_os().skip(1).collect(),
    )
}

/// The runner's flags in `words`, separated by whitespace.
fn parse(words: &str) -> Result<RecipientFlags, String> {
    let mut flags = RecipientFlags::default();
    let mut words = words.split_whitespace();
    while let Some(flag) = words.next() {
        let mut value = || {
            words
                .next()
                .map(str::to_owned)
                .ok_or_else(|| format!("{flag} needs a value ({USAGE})"))
        };
        match flag {
            "--gpu-grants" => flags.show = true,
            "--gpu-no-grant" => flags.no_grant.push(value()?),
            "--gpu-no-env" => flags.no_env.push(value()?),
            "--gpu-no-stdin" => flags.no_stdin = true,
            "--gpu-no-net" => flags.no_net = true,
            "--gpu-timeout" => {
                let v = value()?;
                let s = v
                    .parse::<u64>()
                    .map_err(|_| format!("--gpu-timeout {v}: not a number of seconds"))?;
                flags.timeout_s = Some(s);
            }
            other => return Err(format!("unknown runner flag {other} ({USAGE})")),
        }
    }
    Ok(flags)
}

impl RecipientFlags {
    /// Takes away from `o` what these flags take away, and shortens its time limit to
    /// theirs where theirs is shorter: never longer than recorded, nor than the
    /// runtime's default where none was, and never none. A flag that names nothing the
    /// program was granted is an error, so that a typing mistake never leaves a grant in
    /// place unnoticed.
    pub fn narrow(&self, o: &mut RunOptions) -> Result<(), String> {
        for denied in &self.no_grant {
            let resolved = Path::new(denied).canonicalize().ok();
            let matches = |spec: &String| {
                spec == denied
                    || Grant::parse(spec)
                        .ok()
                        .is_some_and(|g| Some(&g.host) == resolved.as_ref() || g.guest == *denied)
            };
            let before = o.grants.len() + o.grants_ro.len();
            o.grants.retain(|g| !matches(g));
            o.grants_ro.retain(|g| !matches(g));
            if o.grants.len() + o.grants_ro.len() == before {
                return Err(format!(
                    "--gpu-no-grant {denied}: the program is granted no such folder"
                ));
            }
        }
        for name in &self.no_env {
            let before = o.env.len();
            o.env
                .retain(|e| e.split_once('=').map_or(e.as_str(), |(n, _)| n) != name);
            if o.env.len() == before {
                return Err(format!(
                    "--gpu-no-env {name}: the program is granted no such variable"
                ));
            }
        }
        if self.no_stdin {
            o.stdin = false;
        }
        if self.no_net {
            o.connect.clear();
            o.listen.clear();
        }
        if let Some(t) = self.timeout_s {
            if t == 0 {
                return Err(
                    "--gpu-timeout 0: the runner's flags only shorten the time limit, and 0 \
                     would lift it"
                        .to_owned(),
                );
            }
            // What was recorded: a limit, none (0), or the runtime's (at most its default).
            let recorded = match o.timeout_s {
                Some(0) => None,
                Some(r) => Some(r),
                None => Some(hostcall_runtime::DEFAULT_TIMEOUT.as_secs()),
            };
            o.timeout_s = Some(recorded.map_or(t, |r| r.min(t)));
        }
        Ok(())
    }
}

/// What `o` grants the program when it starts here, one line each: folders with the
/// path each resolves to (a relative one resolves against the working directory), the
/// variables and their source, stdin, sockets, and the time limit.
pub fn describe(o: &RunOptions) -> String {
    let mut t = String::new();
    let folders = o
        .grants
        .iter()
        .map(|g| (g, "read-write"))
        .chain(o.grants_ro.iter().map(|g| (g, "read-only")));
    for (spec, access) in folders {
        let dir = spec.rsplit_once(":/").map_or(spec.as_str(), |(d, _)| d);
        let relative = if Path::new(dir).is_relative() {
            " (relative: resolved against the directory this is started in)"
        } else {
            ""
        };
        let _ = match Grant::parse(spec) {
            Ok(g) => writeln!(
                t,
                "{access} folder {} seen at {}{relative} (recorded as `{spec}`)",
                g.host.display(),
                g.guest
            ),
            Err(e) => writeln!(t, "{access} folder `{spec}`: not usable here: {e}"),
        };
    }
    for e in &o.env {
        let _ = match e.split_once('=') {
            Some((name, value)) => writeln!(t, "variable {name}={value}"),
            None => writeln!(t, "variable {e}, with this machine's value"),
        };
    }
    if o.stdin {
        t.push_str("stdin\n");
    }
    for c in &o.connect {
        let _ = writeln!(t, "sockets connecting to {c}");
    }
    for l in &o.listen {
        let _ = writeln!(t, "sockets listening on {l}");
    }
    if let Some(n) = o.max_sockets {
        let _ = writeln!(t, "at most {n} sockets open at once");
    }
    if let Some(n) = o.max_open_files {
        let _ = writeln!(t, "at most {n} files open at once");
    }
    if t.is_empty() {
        t.push_str("nothing: no folder, variable, stdin or socket\n");
    }
    let _ = match o.timeout_s {
        Some(0) => writeln!(t, "no time limit"),
        Some(s) => writeln!(t, "a time limit of {s} s"),
        None => writeln!(
            t,
            "the runtime's time limit ({} s, or HOSTCALL_TIMEOUT_S)",
            hostcall_runtime::DEFAULT_TIMEOUT.as_secs()
        ),
    };
    t
}

/// For `cargo gpu build`: a sentence about each option of `o` that resolves where the
/// program starts, not where it was built (a relative folder, a variable passed by
/// name), so that the builder knows what the recipient will be asked for.
pub fn resolved_at_start(o: &RunOptions) -> Vec<String> {
    let mut notes = Vec::new();
    for (flag, spec) in o
        .grants
        .iter()
        .map(|g| ("--grant", g))
        .chain(o.grants_ro.iter().map(|g| ("--grant-ro", g)))
    {
        let dir = spec.rsplit_once(":/").map_or(spec.as_str(), |(d, _)| d);
        if Path::new(dir).is_relative() {
            notes.push(format!(
                "{flag} {spec} is relative: it grants that folder of the directory the program is started in, wherever that is"
            ));
        }
    }
    for e in o.env.iter().filter(|e| !e.contains('=')) {
        notes.push(format!(
            "--env {e} passes the value the variable has where the program is started"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    #[test]
    fn runner_flags_are_the_variables_words() {
        let (f, rest) = split(
            Some(OsStr::new(
                " --gpu-no-stdin\t--gpu-timeout 30\n--gpu-grants ",
            )),
            os(&["file.txt"]),
        )
        .unwrap();
        assert!(f.no_stdin && f.show && f.timeout_s == Some(30));
        assert_eq!(rest, os(&["file.txt"]), "the program's own");
        assert!(USAGE.contains(FLAGS_VAR));
        assert_eq!(
            split(Some(OsStr::new("")), Vec::new()),
            Ok(Default::default())
        );
        for (words, why) in [
            ("--gpu-bogus", "unknown runner flag --gpu-bogus"),
            ("--gpu-grants x", "unknown runner flag x"),
            ("--gpu-timeout soon", "not a number of seconds"),
            ("--gpu-no-env", "--gpu-no-env needs a value"),
        ] {
            let refused = split(Some(OsStr::new(words)), Vec::new()).unwrap_err();
            assert!(refused.contains(why), "{words}: {refused}");
        }
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = split(Some(OsStr::from_bytes(b"--gpu-no-env \xff")), Vec::new());
        assert!(
            not_utf8
                .unwrap_err()
                .starts_with("CARGO_GPU_RUNNER_FLAGS is not UTF-8")
        );
    }

    /// argv is the program's, whole, as its CPU build gets it, whatever the
    /// variable holds.
    #[test]
    fn the_programs_arguments_are_all_its_own() {
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = OsStr::from_bytes(b"caf\xe9").to_owned();
        for argv in [
            os(&["--", "--delete-everything"]),
            os(&["--gpu-timeout", "0", "x"]),
            os(&["--gpu-grants"]),
            os(&["--gpu-no-stdin", "--", "y"]),
            vec![not_utf8],
        ] {
            let (flags, rest) = split(None, argv.clone()).unwrap();
            assert_eq!((flags, &rest), (RecipientFlags::default(), &argv));
            let (flags, rest) = split(Some(OsStr::new("--gpu-no-net")), argv.clone()).unwrap();
            assert!(flags.no_net);
            assert_eq!(rest, argv);
        }
    }

    /// A time limit is only ever shortened.
    #[test]
    fn the_runners_time_limit_only_shortens_the_recorded_one() {
        let limit = |recorded: Option<u64>, asked: u64| {
            let mut o = RunOptions {
                timeout_s: recorded,
                ..RunOptions::default()
            };
            let flags = RecipientFlags {
                timeout_s: Some(asked),
                ..RecipientFlags::default()
            };
            flags.narrow(&mut o).map(|()| o.timeout_s)
        };
        assert_eq!(limit(Some(30), 10), Ok(Some(10)));
        assert_eq!(limit(Some(30), 100), Ok(Some(30)), "never lengthened");
        assert_eq!(limit(Some(0), 10), Ok(Some(10)), "none recorded: any limit");
        assert_eq!(limit(None, 60), Ok(Some(60)));
        let default = hostcall_runtime::DEFAULT_TIMEOUT.as_secs();
        assert_eq!(
            limit(None, default + 1),
            Ok(Some(default)),
            "the runtime's at most"
        );
        let lifted = limit(Some(30), 0).unwrap_err();
        assert!(lifted.contains("only shorten the time limit"), "{lifted}");
    }

    /// A packaged program granted `.` and a variable by name: its
    /// user sees what that means where they start it, and takes each away.
    #[test]
    fn a_recipient_sees_and_narrows_what_a_package_grants() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        let mut o = RunOptions {
            grants: vec![".".into(), format!("{}:/data", d.display())],
            env: vec!["HOME".into(), "MODE=fast".into()],
            stdin: true,
            connect: vec!["127.0.0.1:80".into()],
            ..RunOptions::default()
        };
        let shown = describe(&o);
        let here = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert!(
            shown.contains(&format!("read-write folder {} seen at", here.display()))
                && shown.contains("(relative: resolved against the directory this is started in)")
                && shown.contains("variable HOME, with this machine's value")
                && shown.contains("variable MODE=fast")
                && shown.contains("stdin\n")
                && shown.contains("the runtime's time limit"),
            "{shown}"
        );
        let notes = resolved_at_start(&o);
        assert_eq!(notes.len(), 2, "{notes:?}");
        let (flags, _) = split(
            Some(OsStr::new(
                "--gpu-no-grant . --gpu-no-grant /data --gpu-no-env HOME --gpu-no-stdin \
                 --gpu-no-net",
            )),
            Vec::new(),
        )
        .unwrap();
        flags.narrow(&mut o).unwrap();
        assert!(o.grants.is_empty() && !o.stdin && o.connect.is_empty());
        assert_eq!(o.env, ["MODE=fast"]);
        let unknown = RecipientFlags {
            no_grant: vec!["/nowhere".into()],
            ..RecipientFlags::default()
        };
        assert!(
            unknown
                .narrow(&mut o)
                .unwrap_err()
                .contains("no such folder")
        );
    }
}
