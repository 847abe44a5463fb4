//! serde and serde_json with derive, on every thread: records built from the thread's
//! index go to JSON and back, and must round-trip; a fixed sample is printed whole.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Record {
    name: String,
    n: u64,
    x: f64,
    tags: Vec<String>,
    parent: Option<Box<Record>>,
}

fn records(seed: usize) -> Vec<Record> {
    (0..4)
        .map(|i| Record {
            name: format!("r{seed}-{i}"),
            n: (seed * 31 + i) as u64,
            x: (seed % 7) as f64 * 0.25 - i as f64 * 1.5,
            tags: (0..i).map(|t| format!("t{t}")).collect(),
            parent: (i % 2 == 1).then(|| {
                Box::new(Record {
                    name: "up".into(),
                    n: i as u64,
                    x: 1e-3,
                    tags: Vec::new(),
                    parent: None,
                })
            }),
        })
        .collect()
}

static ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);
static JSON_BYTES: AtomicU64 = AtomicU64::new(0);

pub fn worker(index: usize, _count: usize) {
    let original = records(index % 50);
    let json = serde_json::to_string(&original).unwrap();
    let back: Vec<Record> = serde_json::from_str(&json).unwrap();
    if back == original {
        ROUND_TRIPS.fetch_add(1, Relaxed);
    }
    JSON_BYTES.fetch_add(json.len() as u64, Relaxed);
}

pub fn finish(count: usize) {
    println!(
        "{} of {count} round-tripped, {} bytes of JSON",
        ROUND_TRIPS.load(Relaxed),
        JSON_BYTES.load(Relaxed)
    );
    println!("{}", serde_json::to_string(&records(3)[..2]).unwrap());
    let value: serde_json::Value =
        serde_json::from_str(r#"{"b": [1, 2.5, "three", null, true], "a": {"nested": -0.0}}"#)
            .unwrap();
    println!("{}", serde_json::to_string_pretty(&value).unwrap());
    match serde_json::from_str::<Record>(r#"{"name": "x", "n": -1}"#) {
        Ok(r) => println!("parsed {r:?}?"),
        Err(e) => println!("error: {e}"),
    }
}
