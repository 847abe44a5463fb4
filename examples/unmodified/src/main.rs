//! An ordinary std program: nothing in it knows about GPUs. It counts the words of the
//! files named on its command line with a pool of threads, and reports through stdout,
//! stderr, a file and its exit code.
//!
//!     cargo run -- FILE...                        # on the CPU
//!     cargo gpu run --grant . -- FILE...          # on the GPU, unchanged

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

/// Words of `text`, lowercased, split at anything not alphanumeric.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: unmodified FILE...");
        std::process::exit(2);
    }
    let workers = std::env::var("WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(4usize);

    // Read every file; a missing one is reported and counted, as any tool would.
    let mut texts = Vec::new();
    let mut missing = 0;
    for path in &args {
        match std::fs::read_to_string(path) {
            Ok(t) => texts.push(t),
            Err(e) => {
                eprintln!("unmodified: {path}: {e}");
                missing += 1;
            }
        }
    }
    let lines: Vec<String> = texts
        .iter()
        .flat_map(|t| t.lines().map(str::to_owned))
        .collect();

    // Spawned threads take lines from a shared queue and send their counts back.
    let queue = Arc::new(Mutex::new(
        lines.into_iter().enumerate().collect::<Vec<_>>(),
    ));
    let taken = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let (queue, taken, tx) = (queue.clone(), taken.clone(), tx.clone());
            thread::Builder::new()
                .name(format!("counter-{i}"))
                .spawn(move || {
                    let mut counts: HashMap<String, usize> = HashMap::new();
                    loop {
                        let Some((_, line)) = queue.lock().unwrap().pop() else {
                            break;
                        };
                        taken.fetch_add(1, Ordering::Relaxed);
                        for w in words(&line) {
                            *counts.entry(w).or_default() += 1;
                        }
                    }
                    tx.send(counts).unwrap();
                    thread::current().name().unwrap().to_owned()
                })
                .expect("spawning a counter")
        })
        .collect();
    drop(tx);
    let mut names: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    names.sort();

    let mut total: BTreeMap<String, usize> = BTreeMap::new();
    for counts in rx {
        for (w, n) in counts {
            *total.entry(w).or_default() += n;
        }
    }

    // Scoped threads borrow: the longest word of each half of the vocabulary.
    let vocabulary: Vec<&String> = total.keys().collect();
    let (a, b) = vocabulary.split_at(vocabulary.len() / 2);
    let longest = |part: &[&String]| part.iter().map(|w| w.len()).max().unwrap_or(0);
    let (la, lb) = thread::scope(|s| {
        let ha = s.spawn(|| longest(a));
        let hb = s.spawn(|| longest(b));
        (ha.join().unwrap(), hb.join().unwrap())
    });

    // Scoped threads write into their parent's local array, one element each.
    let mut by_length = [0usize; 8];
    thread::scope(|s| {
        for (len, slot) in by_length.iter_mut().enumerate() {
            let total = &total;
            s.spawn(move || *slot = total.keys().filter(|w| w.len() % 8 == len).count());
        }
    });

    let mut by_count: Vec<(&String, &usize)> = total.iter().collect();
    by_count.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
    println!("threads: {}", names.join(" "));
    println!("lines: {}", taken.load(Ordering::Relaxed));
    println!(
        "words: {} ({} distinct)",
        total.values().sum::<usize>(),
        total.len()
    );
    println!("longest: {la} and {lb} letters");
    println!("distinct words by length mod 8: {by_length:?}");
    for (w, n) in by_count.iter().take(5) {
        println!("{n:6} {w}");
    }
    if let Ok(out) = std::env::var("SUMMARY") {
        let text: String = by_count.iter().map(|(w, n)| format!("{w} {n}\n")).collect();
        std::fs::write(&out, text).expect("writing the summary");
    }
    std::process::exit(missing);
}
