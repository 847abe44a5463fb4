//! Replays every input of the fuzz corpus (`corpus/serve`, kept minimal with
//! `cargo fuzz cmin`): each must keep every invariant of `hostcall_fuzz::run`, and of
//! `hostcall_fuzz::run_launch` as a launch; and the launches of `corpus/launch`, whose
//! threads print.

/// The inputs of `corpus/<target>`, in name order.
fn corpus(target: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus dir")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    cases.sort();
    cases
}

#[test]
fn the_fuzz_corpus_keeps_every_invariant() {
    let cases = corpus("serve");
    assert!(
        cases.len() >= 50,
        "{} corpus inputs: the corpus is missing",
        cases.len()
    );
    for case in &cases {
        // Shown with the failure, which names no input itself.
        println!("replaying {}", case.display());
        hostcall_fuzz::run(&std::fs::read(case).expect("a corpus input"));
    }
    println!("{} corpus inputs replayed", cases.len());
}

/// Every sixteenth input, as a launch (one that waits takes its 300 ms limit and the
/// run's end: all of them take a minute; the fuzzer runs them all). `Host::run` may take
/// 5 s past the limit here, not the fuzzer's one: the test binaries run side by side
/// on two cores, where a starved run's teardown took 1.4 s after a 5 ms launch.
#[test]
fn the_fuzz_corpus_as_launches_returns_within_the_time_limit() {
    let cases = corpus("serve");
    let started = std::time::Instant::now();
    for case in cases.iter().step_by(16) {
        println!("launching {}", case.display());
        let input = std::fs::read(case).expect("a corpus input");
        hostcall_fuzz::run_launch(&input, std::time::Duration::from_secs(5));
    }
    println!(
        "{} corpus inputs launched in {:?}",
        cases.len().div_ceil(16),
        started.elapsed()
    );
}

/// Launches whose threads print across the print path's sizes while the readers of
/// stdout and stderr stall or trickle: nothing printed may be lost.
#[test]
fn the_launch_corpus_loses_nothing_printed() {
    let cases = corpus("launch");
    assert!(!cases.is_empty(), "the launch corpus is missing");
    for case in &cases {
        println!("launching {}", case.display());
        let input = std::fs::read(case).expect("a corpus input");
        hostcall_fuzz::run_launch(&input, std::time::Duration::from_secs(5));
    }
}
