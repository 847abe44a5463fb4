//! An ordinary program using crates from the registry: serde and serde_json (derive),
//! regex, rand (seeded), sha2, itertools, hashbrown and smallvec. Nothing in it knows
//! about GPUs; each thread (`THREADS`, default 1) does the whole work and they must
//! agree.
//!
//!     cargo run                       # on the CPU
//!     cargo gpu run --env THREADS     # on the GPU, unchanged

use itertools::Itertools;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regex::Regex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use smallvec::SmallVec;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Entry {
    id: u32,
    name: String,
    tags: Vec<String>,
}

/// Everything, from `seed`: the same text on every thread and every machine.
fn work(seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let entries: Vec<Entry> = (0..40)
        .map(|id| Entry {
            id,
            name: format!("item-{}-{}", id, rng.random_range(100..1000)),
            tags: (0..rng.random_range(1..4))
                .map(|t| format!("t{t}"))
                .collect(),
        })
        .collect();
    let json = serde_json::to_string(&entries).unwrap();
    let back: Vec<Entry> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, entries);

    let re = Regex::new(r"item-(\d+)-(\d{3})").unwrap();
    let sum: u64 = re
        .captures_iter(&json)
        .map(|c| c[2].parse::<u64>().unwrap())
        .sum();

    let mut by_tags: hashbrown::HashMap<usize, SmallVec<[u32; 8]>> = hashbrown::HashMap::new();
    for e in &entries {
        by_tags.entry(e.tags.len()).or_default().push(e.id);
    }
    let groups = by_tags
        .iter()
        .sorted_by_key(|(k, _)| **k)
        .map(|(k, ids)| format!("{k}:{}", ids.len()))
        .join(",");

    let digest = Sha256::digest(json.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "json {} bytes, regex sum {sum}, groups {groups}, sha256 {hex}",
        json.len()
    )
}

fn main() {
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let results: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| work(17))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.iter().all_equal(), "threads disagree");
    println!("{} thread(s): {}", threads, results[0]);
}
