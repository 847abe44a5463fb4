//! `File::create`, `write!`, `fs::write`, `fs::read`, `read_to_string`, appending.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};

pub fn main() {
    let mut f = File::create("notes.txt").unwrap();
    for i in 0..5 {
        writeln!(f, "line {i}: {}", "x".repeat(i)).unwrap();
    }
    drop(f);
    println!("{}", fs::read_to_string("notes.txt").unwrap());
    let mut a = OpenOptions::new().append(true).open("notes.txt").unwrap();
    a.write_all(b"appended\n").unwrap();
    drop(a);
    let bytes = fs::read("notes.txt").unwrap();
    println!("{} bytes, last line {:?}", bytes.len(), String::from_utf8_lossy(&bytes).lines().last());
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
    fs::write("big.bin", &big).unwrap();
    let mut back = Vec::new();
    File::open("big.bin").unwrap().read_to_end(&mut back).unwrap();
    println!("big round trip {}", back == big);
    let mut partial = [0u8; 10];
    let mut f = File::open("big.bin").unwrap();
    f.read_exact(&mut partial).unwrap();
    println!("{partial:?}");
    println!("input.txt: {:?}", fs::read_to_string("input.txt").unwrap().lines().next());
}
