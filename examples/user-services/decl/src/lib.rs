//! The services the example kernels call, declared once for the GPU and the host.

#![no_std]

use hostcall_abi::errno::Errno;
use hostcall_abi::service;

service! {
    /// A counter on the host, by numeric ids (as AMD's hostcall API numbers services).
    pub trait Counter {
        /// Adds `by`; returns the new total.
        fn bump(&self, by: u64) -> u64 = 1;
        /// The total.
        fn total(&self) -> u64 = 2;
    }
}

service! {
    /// A greeting written by the host, by name: the id is bound when the module loads.
    pub trait Greeter {
        /// Writes a greeting for `name` into `out`; returns its length.
        fn greet(&self, name: &str, out: &mut [u8]) -> Result<usize, Errno>;
    }
}

service! {
    /// A service the host does not serve: its calls reach the default handler.
    pub trait Legacy {
        /// Anything the default handler answers.
        fn legacy(&self, x: u32) -> Result<u32, Errno> = 3;
    }
}
