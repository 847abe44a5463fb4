//! regex on every thread: each compiles its own patterns (the registry kernel's among
//! them) and matches names made from its index; a fixed sample is printed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use regex::Regex;

static MATCHED: AtomicU64 = AtomicU64::new(0);
static CAPTURED: AtomicU64 = AtomicU64::new(0);

pub fn worker(index: usize, _count: usize) {
    let name = Regex::new(r"^[a-z]+\d+$").unwrap();
    let pair = Regex::new(r"(?<word>[a-z]+)-(?<num>\d{2,})").unwrap();
    let candidates = [
        format!("ab{index}"),
        format!("x{}y", index % 10),
        format!("Ab{index}"),
        format!("zz{}", index % 3),
    ];
    let matched = candidates.iter().filter(|c| name.is_match(c)).count();
    MATCHED.fetch_add(matched as u64, Relaxed);
    let text = format!("one-{index} two-{} three-7", index * 3 + 10);
    let sum: u64 = pair
        .captures_iter(&text)
        .map(|c| c["num"].parse::<u64>().unwrap())
        .sum();
    CAPTURED.fetch_add(sum, Relaxed);
}

pub fn finish(count: usize) {
    println!(
        "{count} threads: {} names matched, captured numbers sum to {}",
        MATCHED.load(Relaxed),
        CAPTURED.load(Relaxed)
    );
    let date = Regex::new(r"(\d{4})-(\d{2})-(\d{2})").unwrap();
    let text = "from 2026-11-26 to 2027-01-03, not 26-11-2026";
    println!("{}", date.replace_all(text, "$3/$2/$1"));
    let words: Vec<&str> = Regex::new(r"\W+").unwrap().split("a, b;c  d").collect();
    println!("{words:?}");
    println!("{}", Regex::new(r"(?i)ΣΑΣ").unwrap().is_match("σας"));
    match Regex::new(r"(unclosed") {
        Ok(_) => println!("compiled?"),
        Err(e) => println!("error:\n{e}"),
    }
}
