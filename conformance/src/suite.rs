//! The programs, from the one list in `programs/mod.rs`, with what each run gets.

/// The programs' sources, compiled for the host: the CPU side of every comparison.
/// They are the suite's inputs, written as users write std code (some do odd things on
/// purpose: `0.0 / 0.0`, a `print!` ending in `\n`), so the project's lints stay out.
#[allow(clippy::all)]
#[path = "../programs/mod.rs"]
mod programs;

/// The programs that use registry crates (`programs/registry`), compiled for the host.
#[allow(clippy::all)]
#[path = "../programs/registry/mod.rs"]
mod registry;

/// How a program runs.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `main()` on one thread.
    Single(fn()),
    /// `worker(index, count)` on every thread, then `finish(count)` on the last to end.
    Threaded(fn(usize, usize), fn(usize)),
    /// `main()` on one thread; the GPU must fail cleanly where the CPU succeeds, so the
    /// GPU's stdout is checked against `expected/NAME.stdout` (the second field, built
    /// in) instead of the CPU's.
    Unsupported(fn(), &'static str),
    /// `main()` of a process that spawns threads: on the GPU, `conformance/spawning`'s
    /// `main` with GPU threads held back ([`SPAWN_WORKERS`]). With the second field, the
    /// program reaches a limit the CPU does not have, and the GPU's stdout is checked
    /// against it (`expected/NAME.stdout`) instead of the CPU's.
    Spawning(fn(), Option<&'static str>),
    /// A threaded program that uses crates from the registry: on the GPU, the registry
    /// module's (`conformance/registry`).
    Registry(fn(usize, usize), fn(usize)),
}

/// GPU threads a spawning program's run holds back: the threads it can have at once.
pub const SPAWN_WORKERS: u32 = 16;

/// One program of the suite.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    /// Its file name in `programs/`, without `.rs`.
    pub name: &'static str,
    /// How it runs.
    pub kind: Kind,
    /// Its index among the GPU module's single (unsupported included), threaded or
    /// registry programs: the kernel's parameter (spawning programs are found by name).
    pub gpu_index: u32,
}

impl Program {
    /// Whether it runs on many threads.
    pub fn threaded(&self) -> bool {
        matches!(self.kind, Kind::Threaded(..) | Kind::Registry(..))
    }
}

macro_rules! table {
    (
        single: [$($s:ident),*],
        threaded: [$($t:ident),*],
        unsupported: [$($u:ident),*],
        spawning: [$($p:ident),*],
        limits: [$($l:ident),*] $(,)?
    ) => {
        /// Every program, in the list's order, then the registry programs.
        pub fn all() -> Vec<Program> {
            let mut all = Vec::new();
            let mut single = 0..;
            let mut threaded = 0..;
            $(all.push(Program {
                name: stringify!($s),
                kind: Kind::Single(programs::$s::main),
                gpu_index: single.next().unwrap(),
            });)*
            $(all.push(Program {
                name: stringify!($u),
                kind: Kind::Unsupported(
                    programs::$u::main,
                    include_str!(concat!("../expected/", stringify!($u), ".stdout")),
                ),
                gpu_index: single.next().unwrap(),
            });)*
            $(all.push(Program {
                name: stringify!($t),
                kind: Kind::Threaded(programs::$t::worker, programs::$t::finish),
                gpu_index: threaded.next().unwrap(),
            });)*
            $(all.push(Program {
                name: stringify!($p),
                kind: Kind::Spawning(programs::$p::main, None),
                gpu_index: 0,
            });)*
            $(all.push(Program {
                name: stringify!($l),
                kind: Kind::Spawning(
                    programs::$l::main,
                    Some(include_str!(concat!("../expected/", stringify!($l), ".stdout"))),
                ),
                gpu_index: 0,
            });)*
            all.extend(registry_programs());
            all
        }
    };
}
programs::with_suite!(table);

macro_rules! registry_table {
    ($($r:ident),*) => {
        /// The registry programs, in their list's order.
        fn registry_programs() -> Vec<Program> {
            let mut index = 0..;
            vec![$(Program {
                name: stringify!($r),
                kind: Kind::Registry(registry::$r::worker, registry::$r::finish),
                gpu_index: index.next().unwrap(),
            }),*]
        }
    };
}
registry::with_registry!(registry_table);

/// Finds a program by name.
pub fn find(name: &str) -> Option<Program> {
    all().into_iter().find(|p| p.name == name)
}

/// What every program's arguments are after its name (`env::args` shows them).
pub const ARGS: [&str; 3] = ["alpha", "beta gamma", "ünïcode"];

/// Every program's whole environment, in the order `env::vars` lists it on both sides.
pub const ENV: [(&str, &str); 3] = [
    ("CONFORMANCE_EMPTY", ""),
    ("CONFORMANCE_GREETING", "hello"),
    ("LANG", "C"),
];

/// The sockets a spawning program's GPU run is granted, to connect to and listen on:
/// loopback only, by address and by name (the CPU side needs no grant).
pub const LOOPBACK: [&str; 2] = ["127.0.0.1:*", "localhost:*"];

/// What every program reads from stdin.
pub const STDIN: &str = "first line\nsecond\nthird\nfourth\nfifth: the rest\nno newline at the end";

/// The file every program finds in its working directory.
pub const INPUT_FILE: (&str, &str) = ("input.txt", "one\ntwo two\nthree three three\n");
