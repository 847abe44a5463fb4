//! The conformance suite: small std programs, each built for the host and for the GPU
//! and run both ways by `conformance` (see its crate docs for the rules).
//!
//! The one list of programs. A *single* program is `pub fn main()`, run by one thread. A
//! *threaded* program is `pub fn worker(index, count)`, run by `count` threads, and
//! `pub fn finish(count)`, run once by the thread that ends its worker last. An
//! *unsupported* program uses what a GPU cannot do; its GPU output is checked against
//! `expected/NAME.stdout`, since the CPU succeeds where the GPU must fail cleanly. A
//! *spawning* program is `pub fn main()` of a process that starts threads of its own:
//! on the GPU it runs as a binary's `main` (`conformance/spawning`), with GPU threads
//! held back for it to spawn. A *limits* program is a spawning one that reaches a limit
//! the CPU does not have; its GPU output is checked against `expected/NAME.stdout`.
//! Threaded programs that use crates from the registry are listed in `registry/`, with
//! a GPU module of their own.

macro_rules! suite {
    (
        single: [$($s:ident),* $(,)?],
        threaded: [$($t:ident),* $(,)?],
        unsupported: [$($u:ident),* $(,)?],
        spawning: [$($p:ident),* $(,)?],
        limits: [$($l:ident),* $(,)?] $(,)?
    ) => {
        $(pub mod $s;)*
        $(pub mod $t;)*
        $(pub mod $u;)*
        $(pub mod $p;)*
        $(pub mod $l;)*

        /// Calls `$m!` with every single, threaded, unsupported, spawning and limits
        /// program, in this order.
        macro_rules! with_suite {
            ($m:ident) => {
                $m! {
                    single: [$($s),*],
                    threaded: [$($t),*],
                    unsupported: [$($u),*],
                    spawning: [$($p),*],
                    limits: [$($l),*],
                }
            };
        }
        pub(crate) use with_suite;
    };
}

suite! {
    single: [
        hello, floats, float_math, integers, strings, collections, hash_order, iterators, smart_pointers,
        fs_write_read, fs_open_options, fs_metadata, fs_set_len_sync, fs_rename_remove,
        fs_dirs, fs_links, fs_copy, error_kinds, bufreader_lines, stdin_lines, stdout_lock,
        env_args, env_vars, current_dir, set_current_dir, exit_code, panic_message, panic_unwrap, abort,
        time_instant, time_system, thread_local_single, once_lazy,
    ],
    threaded: [
        println_many, mutex_counter, rwlock_readers, atomics, condvar_gate, barrier,
        once_race, channel, arc_shared, heap_stress, heap_grows, files_per_thread,
        sleep_parallel, thread_local_dtors, thread_names,
    ],
    unsupported: [unsupported],
    spawning: [
        spawn_join, scope_borrow, channels_spawned, spawn_panic, rayon_parallel, spawn_beside_pool,
        tcp_loopback, udp_loopback, catch_unwind, sleep_past_the_clock,
    ],
    limits: [thread_limit],
}
