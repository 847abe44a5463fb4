//! `getenv`: the GPU sees only the variables the embedder grants.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use hostcall_abi::errno::{ENOENT, ERANGE};

use super::{Call, Handler, Malformed, Reply};

/// Which environment variables the GPU may read.
#[derive(Debug, Default)]
pub(crate) struct EnvPolicy {
    /// Variables set for the GPU program, whatever the host's environment says.
    pub vars: HashMap<Vec<u8>, Vec<u8>>,
    /// Host variables the GPU may read as they are.
    pub inherit: Vec<Vec<u8>>,
    /// Whether every host variable may be read.
    pub inherit_all: bool,
}

impl EnvPolicy {
    fn lookup(&self, name: &[u8]) -> Option<Vec<u8>> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        if self.inherit_all || self.inherit.iter().any(|n| n == name) {
            return std::env::var_os(OsStr::from_bytes(name)).map(|v| v.as_bytes().to_vec());
        }
        None
    }
}

impl Handler for EnvPolicy {
    fn call(&self, call: &mut Call<'_>) -> Result<Reply, Malformed> {
        // The name was copied out of the port before this call: the name checked against
        // the grants is the name looked up.
        let Some(value) = self.lookup(call.input) else {
            return Ok(Reply::errno(ENOENT));
        };
        if value.len() > call.out.len() {
            return Ok(Reply::errno(ERANGE));
        }
        call.out[..value.len()].copy_from_slice(&value);
        Ok(Reply::bytes(value.len()))
    }
}
