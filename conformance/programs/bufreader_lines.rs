//! `BufReader::lines`, `BufWriter`, `read_until` and a word count.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};

pub fn main() {
    let mut w = BufWriter::new(File::create("poem.txt").unwrap());
    for i in 0..200 {
        writeln!(w, "{} the {} line", ["alpha", "beta", "gamma"][i % 3], i).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines = 0;
    for line in BufReader::new(File::open("poem.txt").unwrap()).lines() {
        lines += 1;
        for word in line.unwrap().split_whitespace() {
            *counts.entry(word.to_owned()).or_default() += 1;
        }
    }
    println!("{lines} lines, {} distinct words", counts.len());
    println!("{:?}", counts.iter().filter(|(_, c)| **c > 10).collect::<Vec<_>>());
    let mut r = BufReader::with_capacity(16, File::open("poem.txt").unwrap());
    let mut chunk = Vec::new();
    r.read_until(b'e', &mut chunk).unwrap();
    println!("{:?}", String::from_utf8(chunk).unwrap());
    let input = BufReader::new(File::open("input.txt").unwrap());
    println!("input: {:?}", input.lines().map(|l| l.unwrap().len()).collect::<Vec<_>>());
}
