//! Running one side of a comparison as a child process and recording what it did:
//! exit status, stdout, stderr and the files it left in its working directory.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::exec::{Request, VAR};
use crate::suite;

/// Longest a child may run before it is killed and the run fails.
const CHILD_LIMIT: Duration = Duration::from_secs(240);

/// A file a program left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: permission bits and contents.
    File(u32, Vec<u8>),
    /// A directory: permission bits.
    Dir(u32),
    /// A symbolic link: where it points.
    Link(String),
}

/// What one run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The exit code, or 128 + the signal that ended it (as a shell reports it).
    pub code: i32,
    /// Everything written to fd 1.
    pub stdout: Vec<u8>,
    /// Everything written to fd 2.
    pub stderr: Vec<u8>,
    /// The working directory's contents afterwards, by relative path.
    pub files: BTreeMap<String, Entry>,
}

/// Runs `r` as a child of this binary in the fresh directory `dir`.
pub fn run(r: &Request, dir: &Path) -> Result<Observed, String> {
    let (name, contents) = suite::INPUT_FILE;
    std::fs::write(dir.join(name), contents).map_err(|e| format!("seeding {name}: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg0(r.program.name)
        .args(suite::ARGS)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !r.gpu {
        // The GPU side keeps this process's environment (the CUDA driver may need it)
        // and gives the GPU program only the suite's variables.
        cmd.env_clear().envs(suite::ENV);
    }
    cmd.env(VAR, r.encode());
    let mut child = cmd.spawn().map_err(|e| format!("starting a child: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || {
        // A program that reads no stdin closes it early: a broken pipe is expected.
        let _ = stdin.write_all(suite::STDIN.as_bytes());
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > CHILD_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("killed after {CHILD_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
    };
    let _ = feeder.join();
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1);
    Ok(Observed {
        code,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        files: files(dir)?,
    })
}

/// The directory's contents, by path relative to it.
fn files(dir: &Path) -> Result<BTreeMap<String, Entry>, String> {
    let mut found = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.map_err(|e| format!("listing {}: {e}", dir.display()))?;
        let rel = e.path().strip_prefix(dir).expect("under dir");
        let meta = e
            .metadata()
            .map_err(|e| format!("reading {}: {e}", rel.display()))?;
        let mode = meta.permissions().mode() & 0o7777;
        let entry = if e.path_is_symlink() {
            let to = std::fs::read_link(e.path()).map_err(|e| e.to_string())?;
            Entry::Link(to.to_string_lossy().into_owned())
        } else if meta.is_dir() {
            Entry::Dir(mode)
        } else {
            let bytes =
                std::fs::read(e.path()).map_err(|e| format!("reading {}: {e}", rel.display()))?;
            Entry::File(mode, bytes)
        };
        found.insert(rel.to_string_lossy().into_owned(), entry);
    }
    Ok(found)
}
