//! Replays every input of the fuzz corpus (`corpus/serve`, kept minimal with
//! `cargo fuzz cmin`): each must keep every invariant of `hostcall_fuzz::run`.

#[test]
fn the_fuzz_corpus_keeps_every_invariant() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/serve");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus dir")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 50,
        "{} corpus inputs: the corpus is missing",
        cases.len()
    );
    for case in &cases {
        hostcall_fuzz::run(&std::fs::read(case).expect("a corpus input"));
    }
    println!("{} corpus inputs replayed", cases.len());
}
