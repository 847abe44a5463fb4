//! What a run grants the program: directories, variables, stdin, working directory, and
//! the GPU's stack and heap. The same options are recorded in a packaged program and
//! parsed again when it starts, so one parser serves both.

use std::path::{Path, PathBuf};

use hostcall_runtime::HostBuilder;

/// The program's view of the host, all denied unless granted.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunOptions {
    /// Let the program read and write below DIR, seen at GUEST (repeatable)
    ///
    /// GUEST defaults to DIR's own absolute path, so that paths given as arguments work
    /// as on the CPU.
    #[arg(long = "grant", value_name = "DIR[:GUEST]")]
    pub grants: Vec<String>,
    /// As --grant, for reading only (repeatable)
    #[arg(long = "grant-ro", value_name = "DIR[:GUEST]")]
    pub grants_ro: Vec<String>,
    /// Pass an environment variable: NAME=VALUE sets it, NAME passes the host's (repeatable)
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Let the program read this process's stdin (denied by default)
    #[arg(long)]
    pub stdin: bool,
    /// The program's working directory, a guest path
    ///
    /// Default: this process's, when a grant at its own path holds it; else `/`.
    #[arg(long, value_name = "GUEST")]
    pub cwd: Option<String>,
    /// Each GPU thread's stack in KiB
    ///
    /// Default: what the build computed from ptxas's frames and the call graph, at least
    /// 16 KiB.
    #[arg(long, value_name = "KIB")]
    pub stack_kib: Option<usize>,
    /// The device heap in MiB
    ///
    /// Default: half the GPU memory free at start, as a process's heap is bounded by
    /// memory alone, up to the allocator's 64 GiB.
    #[arg(long, value_name = "MIB")]
    pub heap_mib: Option<u64>,
    /// Let the program connect (TCP) and send (UDP) to HOST:PORTS (repeatable)
    ///
    /// HOST is an address, `[v6]` or a name; PORTS a port, a range A-B, or `*`. No socket
    /// opens without a grant.
    #[arg(long = "connect", value_name = "HOST:PORTS")]
    pub connect: Vec<String>,
    /// Let the program listen (TCP) and bind (UDP) on HOST:PORTS (repeatable)
    #[arg(long = "listen", value_name = "HOST:PORTS")]
    pub listen: Vec<String>,
    /// Threads the program can have started at once (past it, spawning fails: EAGAIN)
    ///
    /// Each is a GPU thread held back at launch: spread over four warps per
    /// multiprocessor (one per warp scheduler), then sharing them lane by lane.
    /// `available_parallelism` is one per multiprocessor of those that have a warp to
    /// themselves, at most half of them (so a pool sized by it leaves threads to spawn;
    /// `hostcall_abi::spawn::processors` says why). Default: every lane
    /// of those warps (16,926 besides `main` on an H100). Each takes a frame stack of
    /// 1 MiB from the heap when it first runs; a spawn without room fails with EAGAIN.
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Stop the program after SECONDS (0: never)
    ///
    /// Default: the runtime's limit, 600 s or HOSTCALL_TIMEOUT_S, so that a program that
    /// hangs does not hold the GPU.
    #[arg(long = "timeout", value_name = "SECONDS")]
    pub timeout_s: Option<u64>,
    /// Sockets the program may have open at once (each also an open file)
    ///
    /// Default: the runtime's 256, a bound on what a hostile program holds; a server of
    /// many connections raises it.
    #[arg(long = "max-sockets", value_name = "N")]
    pub max_sockets: Option<usize>,
    /// Files the program may have open at once, beyond stdin, stdout and stderr
    ///
    /// Default: the runtime's 1,024, as Linux's usual soft limit; a program of
    /// thousands of threads each holding a file raises it (the host's own limit,
    /// `ulimit -n`, must then allow it).
    #[arg(long = "max-open-files", value_name = "N")]
    pub max_open_files: Option<usize>,
}

/// A `--grant` value made absolute: the host folder and the guest path it is mounted at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The folder on the host, canonical.
    pub host: PathBuf,
    /// Where the program sees it.
    pub guest: String,
}

/// Why options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("--grant {0}: {1}")]
    Grant(String, std::io::Error),
    #[error("--grant {0}: the host path is not UTF-8, so give its guest path (DIR:GUEST)")]
    NotUtf8(String),
    #[error("--env {0}: no such variable on the host (give NAME=VALUE)")]
    NoVariable(String),
}

impl Grant {
    /// Parses `DIR[:GUEST]`; DIR must exist, and the guest defaults to its canonical path.
    pub fn parse(spec: &str) -> Result<Grant, OptionsError> {
        let (dir, guest) = match spec.rsplit_once(':') {
            Some((d, g)) if g.starts_with('/') => (d, Some(g)),
            _ => (spec, None),
        };
        let host = Path::new(dir)
            .canonicalize()
            .map_err(|e| OptionsError::Grant(spec.to_owned(), e))?;
        let guest = match guest {
            Some(g) => g.to_owned(),
            None => host
                .to_str()
                .ok_or_else(|| OptionsError::NotUtf8(spec.to_owned()))?
                .to_owned(),
        };
        Ok(Grant { host, guest })
    }
}

impl RunOptions {
    /// The options as arguments that parse back to them (for a packaged program).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut push = |flag: &str, v: &str| {
            args.push(flag.to_owned());
            args.push(v.to_owned());
        };
        for g in &self.grants {
            push("--grant", g);
        }
        for g in &self.grants_ro {
            push("--grant-ro", g);
        }
        for e in &self.env {
            push("--env", e);
        }
        for c in &self.connect {
            push("--connect", c);
        }
        for l in &self.listen {
            push("--listen", l);
        }
        if let Some(c) = &self.cwd {
            push("--cwd", c);
        }
        if let Some(s) = self.stack_kib {
            push("--stack-kib", &s.to_string());
        }
        if let Some(h) = self.heap_mib {
            push("--heap-mib", &h.to_string());
        }
        if let Some(t) = self.threads {
            push("--threads", &t.to_string());
        }
        if let Some(t) = self.timeout_s {
            push("--timeout", &t.to_string());
        }
        if let Some(n) = self.max_sockets {
            push("--max-sockets", &n.to_string());
        }
        if let Some(n) = self.max_open_files {
            push("--max-open-files", &n.to_string());
        }
        if self.stdin {
            args.push("--stdin".to_owned());
        }
        args
    }

    /// The grants with their guest paths resolved: read-write ones, then read-only ones.
    pub fn resolved_grants(&self) -> Result<Vec<(Grant, bool)>, OptionsError> {
        let rw = self
            .grants
            .iter()
            .map(|g| Grant::parse(g).map(|g| (g, true)));
        let ro = self
            .grants_ro
            .iter()
            .map(|g| Grant::parse(g).map(|g| (g, false)));
        rw.chain(ro).collect()
    }

    /// The working directory: `--cwd`, else this process's when a grant mounted at its own
    /// host path holds it, else `/`.
    pub fn working_dir(&self, grants: &[(Grant, bool)]) -> String {
        if let Some(c) = &self.cwd {
            return c.clone();
        }
        let here = std::env::current_dir().and_then(|d| d.canonicalize()).ok();
        here.filter(|h| {
            grants
                .iter()
                .any(|(g, _)| Path::new(&g.guest) == g.host && h.starts_with(&g.host))
        })
        .and_then(|h| h.to_str().map(str::to_owned))
        .unwrap_or_else(|| "/".to_owned())
    }

    /// Applies the options to a host under construction, with `args` as the program's
    /// arguments (its name first), as bytes: an argument need not be UTF-8.
    pub fn apply(
        &self,
        mut host: HostBuilder,
        args: &[impl AsRef<[u8]>],
    ) -> Result<HostBuilder, OptionsError> {
        let grants = self.resolved_grants()?;
        host = host.cwd(&self.working_dir(&grants));
        for (g, writable) in grants {
            host = if writable {
                host.preopen_dir(&g.host, &g.guest)
            } else {
                host.preopen_dir_readonly(&g.host, &g.guest)
            };
        }
        for e in &self.env {
            host = match e.split_once('=') {
                Some((name, value)) => host.env(name, value),
                None if std::env::var_os(e).is_some() => host.inherit_env(e),
                None => return Err(OptionsError::NoVariable(e.clone())),
            };
        }
        for c in &self.connect {
            host = host.allow_connect(c);
        }
        for l in &self.listen {
            host = host.allow_listen(l);
        }
        if let Some(n) = self.max_sockets {
            host = host.max_sockets(n);
        }
        if let Some(n) = self.max_open_files {
            host = host.max_open_files(n);
        }
        host = match self.timeout_s {
            Some(0) => host.no_timeout(),
            Some(s) => host.timeout(std::time::Duration::from_secs(s)),
            None => host,
        };
        Ok(host.stdin(self.stdin).args(args))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: RunOptions,
    }

    #[test]
    fn options_written_as_arguments_parse_back_to_themselves() {
        let o = RunOptions {
            grants: vec!["a".into(), "b:/data".into()],
            grants_ro: vec!["c".into()],
            env: vec!["X=1".into(), "HOME".into()],
            connect: vec!["localhost:8080".into()],
            listen: vec!["127.0.0.1:*".into()],
            stdin: true,
            cwd: Some("/data".into()),
            stack_kib: Some(64),
            heap_mib: Some(4096),
            threads: Some(8),
            timeout_s: Some(30),
            max_sockets: Some(1024),
            max_open_files: Some(8192),
        };
        let back = Cli::parse_from(std::iter::once("x".to_owned()).chain(o.to_args())).options;
        assert_eq!(back.to_args(), o.to_args());
    }

    #[test]
    fn a_grant_is_seen_at_its_own_path_unless_a_guest_path_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        let own = Grant::parse(d.to_str().unwrap()).unwrap();
        assert_eq!(
            (own.host.as_path(), own.guest.as_str()),
            (d.as_path(), d.to_str().unwrap())
        );
        let mounted = Grant::parse(&format!("{}:/data", d.display())).unwrap();
        assert_eq!(mounted.guest, "/data");
        let missing = Grant::parse("/no/such/dir").unwrap_err().to_string();
        assert!(missing.starts_with("--grant /no/such/dir: "), "{missing}");
    }

    #[test]
    fn the_working_directory_follows_this_process_only_into_a_grant_at_its_own_path() {
        let here = std::env::current_dir().unwrap().canonicalize().unwrap();
        let o = RunOptions::default();
        let own = [(
            Grant {
                host: here.clone(),
                guest: here.to_str().unwrap().into(),
            },
            true,
        )];
        assert_eq!(o.working_dir(&own), here.to_str().unwrap());
        let moved = [(
            Grant {
                host: here.clone(),
                guest: "/data".into(),
            },
            true,
        )];
        assert_eq!(o.working_dir(&moved), "/");
        let set = RunOptions {
            cwd: Some("/data".into()),
            ..RunOptions::default()
        };
        assert_eq!(set.working_dir(&moved), "/data");
    }
}
