//! `stdin().read_line` and `stdin().lines()` on the host's stdin.

use std::io::{self, BufRead, Read};

pub fn main() {
    let mut first = String::new();
    let n = io::stdin().read_line(&mut first).unwrap();
    println!("first ({n} bytes): {first:?}");
    let mut numbered = 0;
    for (i, line) in io::stdin().lock().lines().take(3).enumerate() {
        numbered += 1;
        println!("{i}: {}", line.unwrap().to_uppercase());
    }
    let mut rest = String::new();
    io::stdin().read_to_string(&mut rest).unwrap();
    println!("{numbered} numbered, then {} bytes: {rest:?}", rest.len());
    let mut after = String::new();
    println!("at end: {}", io::stdin().read_line(&mut after).unwrap());
}
