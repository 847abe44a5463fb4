//! The conformance programs that use crates from the registry (serde and serde_json
//! with derive, regex, rand, sha2, itertools, hashbrown, smallvec). Each is a *threaded*
//! program (`worker(index, count)` on every thread, `finish(count)` once, as in
//! `programs/mod.rs`), and they have a GPU module of their own (`conformance/registry`):
//! their crates make a module many times the size of the others, which the rest of the
//! suite should not wait for.

macro_rules! registry {
    ($($r:ident),* $(,)?) => {
        $(pub mod $r;)*

        /// Calls `$m!` with every registry program, in this order.
        macro_rules! with_registry {
            ($m:ident) => {
                $m! { $($r),* }
            };
        }
        pub(crate) use with_registry;
    };
}

registry!(serde_records, regex_compile, rand_sha2, crate_collections);
