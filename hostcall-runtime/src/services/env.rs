//! The program's arguments and environment (std's `Environment` services): the GPU sees
//! only the arguments and variables the embedder grants.

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;

use hostcall_abi::errno::{EINVAL, ENOENT, ERANGE};
use hostcall_abi::{STARTUP_ARGS, STARTUP_ENV};

use hostcall_abi::std_services::Environment;
use hostcall_abi::typed::Errno;

/// What the GPU program is given: arguments, and which environment variables it sees.
#[derive(Debug, Default)]
pub(crate) struct EnvPolicy {
    /// `argv`, the program's name first.
    pub args: Vec<Vec<u8>>,
    /// Variables set for the GPU program, in the order set, whatever the host's
    /// environment says.
    pub vars: Vec<(Vec<u8>, Vec<u8>)>,
    /// Host variables the GPU may read as they are.
    pub inherit: Vec<Vec<u8>>,
    /// Whether every host variable may be read.
    pub inherit_all: bool,
}

impl EnvPolicy {
    /// Sets `name` (replacing an earlier value in place, so the order is first-set).
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(v) => v.1 = value.to_vec(),
            None => self.vars.push((name.to_vec(), value.to_vec())),
        }
    }

    fn lookup(&self, name: &[u8]) -> Option<Vec<u8>> {
        if let Some((_, v)) = self.vars.iter().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        if self.inherit_all || self.inherit.iter().any(|n| n == name) {
            return std::env::var_os(OsStr::from_bytes(name)).map(|v| v.as_bytes().to_vec());
        }
        None
    }

    /// The environment the GPU program starts with: the host variables it may read, in
    /// the host's order, then the ones set for it (a set one replaces an inherited one
    /// in place).
    pub fn environment(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut env: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os()
            .map(|(k, v)| (k.into_vec(), v.into_vec()))
            .filter(|(k, _)| self.inherit_all || self.inherit.contains(k))
            .collect();
        for (k, v) in &self.vars {
            match env.iter_mut().find(|(n, _)| n == k) {
                Some(e) => e.1 = v.clone(),
                None => env.push((k.clone(), v.clone())),
            }
        }
        env
    }

    /// The two start-up blocks of a run (`Environment.startup`), taken when it starts.
    pub fn startup(&self) -> Startup {
        let mut args = Vec::new();
        for a in &self.args {
            args.extend_from_slice(a);
            args.push(0);
        }
        let mut env = Vec::new();
        for (k, v) in self.environment() {
            env.extend_from_slice(&k);
            env.push(b'=');
            env.extend_from_slice(&v);
            env.push(0);
        }
        Startup { args, env }
    }
}

/// One run's start-up blocks (NUL-terminated strings back to back).
#[derive(Debug)]
pub(crate) struct Startup {
    args: Vec<u8>,
    env: Vec<u8>,
}

/// std's `Environment` services: variables as granted, and the run's start-up blocks.
pub(crate) struct HostEnvironment {
    pub policy: Arc<EnvPolicy>,
    pub startup: Startup,
}

impl Environment for HostEnvironment {
    fn getenv(&self, name: &[u8], value: &mut [u8]) -> Result<usize, Errno> {
        // The name was copied out of the port before this call: the name checked against
        // the grants is the name looked up.
        let v = self.policy.lookup(name).ok_or(Errno(ENOENT))?;
        value
            .get_mut(..v.len())
            .ok_or(Errno(ERANGE))?
            .copy_from_slice(&v);
        Ok(v.len())
    }

    fn startup(&self, which: u64, offset: u64, out: &mut [u8]) -> Result<usize, Errno> {
        let block = match which {
            STARTUP_ARGS => &self.startup.args,
            STARTUP_ENV => &self.startup.env,
            _ => return Err(Errno(EINVAL)),
        };
        let from = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(block.len());
        let n = (block.len() - from).min(out.len());
        out[..n].copy_from_slice(&block[from..from + n]);
        Ok(block.len())
    }
}
