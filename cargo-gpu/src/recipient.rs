//! What the user of a packaged program may say of what it is granted, before the
//! program's own arguments: see it (`--gpu-grants`), take grants away (`--gpu-no-grant`,
//! `--gpu-no-env`, `--gpu-no-stdin`, `--gpu-no-net`), and set its time limit
//! (`--gpu-timeout`). A packaged program's grants are resolved where it starts: the
//! person who runs it, not the one who built it, is the one whose files and variables
//! are at stake, so they can see and narrow them, never widen them.

use std::fmt::Write as _;
use std::path::Path;

use crate::options::{Grant, RunOptions};

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
    /// The run's time limit in seconds (0: none).
    pub timeout_s: Option<u64>,
}

/// How a packaged program's own help names these flags.
pub const USAGE: &str = "runner flags, before the program's arguments (`--` ends them): \
    --gpu-grants (show what the program is granted here, and exit), --gpu-no-grant DIR, \
    --gpu-no-env NAME, --gpu-no-stdin, --gpu-no-net, --gpu-timeout SECONDS (0: none)";

/// Splits a packaged program's arguments into the runner's flags (leading, each
/// `--gpu-...`; `--` ends them) and the program's own.
pub fn split(args: Vec<String>) -> Result<(RecipientFlags, Vec<String>), String> {
    let mut flags = RecipientFlags::default();
    let mut rest = args.into_iter().peekable();
    let value = |rest: &mut std::iter::Peekable<std::vec::IntoIter<String>>, flag: &str| {
        rest.next()
            .ok_or_else(|| format!("{flag} needs a value ({USAGE})"))
    };
    while let Some(a) = rest.peek().cloned() {
        if a == "--" {
            rest.next();
            break;
        }
        if !a.starts_with("--gpu-") {
            break;
        }
        rest.next();
        match a.as_str() {
            "--gpu-grants" => flags.show = true,
            "--gpu-no-grant" => flags.no_grant.push(value(&mut rest, &a)?),
            "--gpu-no-env" => flags.no_env.push(value(&mut rest, &a)?),
            "--gpu-no-stdin" => flags.no_stdin = true,
            "--gpu-no-net" => flags.no_net = true,
            "--gpu-timeout" => {
                let v = value(&mut rest, &a)?;
                let s = v
                    .parse::<u64>()
                    .map_err(|_| format!("--gpu-timeout {v}: not a number of seconds"))?;
                flags.timeout_s = Some(s);
            }
            other => return Err(format!("unknown runner flag {other} ({USAGE})")),
        }
    }
    Ok((flags, rest.collect()))
}

impl RecipientFlags {
    /// Takes away from `o` what these flags take away; a flag that names nothing the
    /// program was granted is an error, so that a typing mistake never leaves a grant
    /// in place unnoticed.
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
            o.timeout_s = Some(t);
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

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn runner_flags_come_first_and_the_program_keeps_the_rest() {
        let (f, rest) = split(strings(&[
            "--gpu-no-stdin",
            "--gpu-timeout",
            "30",
            "file.txt",
            "--gpu-grants",
        ]))
        .unwrap();
        assert!(f.no_stdin && !f.show && f.timeout_s == Some(30));
        assert_eq!(rest, ["file.txt", "--gpu-grants"], "the program's own");
        let (f, rest) = split(strings(&["--", "--gpu-grants"])).unwrap();
        assert_eq!(
            (f, rest),
            (RecipientFlags::default(), strings(&["--gpu-grants"]))
        );
        assert!(
            split(strings(&["--gpu-bogus"]))
                .unwrap_err()
                .contains("unknown runner flag")
        );
        assert!(split(strings(&["--gpu-timeout", "soon"])).is_err());
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
        let (flags, _) = split(strings(&[
            "--gpu-no-grant",
            ".",
            "--gpu-no-grant",
            "/data",
            "--gpu-no-env",
            "HOME",
            "--gpu-no-stdin",
            "--gpu-no-net",
        ]))
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
