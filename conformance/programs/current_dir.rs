//! `env::current_dir`, relative paths and `canonicalize(".")`.

use std::{env, fs};

pub fn main() {
    let cwd = env::current_dir().unwrap();
    println!("absolute {}", cwd.is_absolute());
    println!("canonical . == cwd: {}", fs::canonicalize(".").unwrap() == cwd);
    fs::create_dir("inner").unwrap();
    fs::write("inner/f", "in").unwrap();
    println!("canonical inner/./f == cwd/inner/f: {}", fs::canonicalize("inner/./f").unwrap() == cwd.join("inner/f"));
    println!("absolute path read: {}", fs::read_to_string(cwd.join("inner/f")).unwrap());
    println!("cwd name non-empty: {}", cwd.file_name().is_some());
}
