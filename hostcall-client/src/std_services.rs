//! std's services declared as users declare theirs (`service!`): each is one
//! declaration here and one implementation in `hostcall-runtime`, which every host
//! serves. Their ids are fixed in `STD_IDS`, after those of `hostcall_abi::Service` (the
//! services not yet moved here, whose conventions that module's table gives).

use crate::service;

service! {
    /// The process the GPU program runs in: the host's.
    pub trait Identity {
        /// Its id (`getpid`, std's `process::id`).
        fn getpid(&self) -> i32 = 0x8000_001F;
        /// Its parent's id (`getppid`, std's `os::unix::process::parent_id`).
        fn getppid(&self) -> i32 = 0x8000_0020;
    }
}
