//! `hard_link`, `symlink`, `read_link` (of a target longer than its first buffer too),
//! `symlink_metadata`, `canonicalize`. (A link
//! whose target has `..` is refused on the GPU by the host's rule for links, see the
//! README's threat model, so none is made here.)

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};

pub fn main() {
    fs::write("target.txt", "the target").unwrap();
    fs::hard_link("target.txt", "hard.txt").unwrap();
    println!("links {}", fs::metadata("target.txt").unwrap().nlink());
    symlink("target.txt", "soft.txt").unwrap();
    println!("read_link {:?}", fs::read_link("soft.txt").unwrap());
    println!("through link: {}", fs::read_to_string("soft.txt").unwrap());
    let lm = fs::symlink_metadata("soft.txt").unwrap();
    println!("is_symlink {} len {}", lm.file_type().is_symlink(), lm.len());
    let here = std::env::current_dir().unwrap();
    let canon = fs::canonicalize("soft.txt").unwrap();
    println!("canonical is cwd/target.txt: {}", canon == here.join("target.txt"));
    fs::create_dir("sub").unwrap();
    fs::write("sub/inner.txt", "inner").unwrap();
    symlink("sub/inner.txt", "down.txt").unwrap();
    println!("link into a subdirectory: {}", fs::read_to_string("down.txt").unwrap());
    println!("canonical sub/../sub: {}", fs::canonicalize("sub/../sub").unwrap() == here.join("sub"));
    symlink("missing.txt", "dangling.txt").unwrap();
    println!("dangling: {:?}", fs::read_to_string("dangling.txt").map_err(|e| e.kind()));
    println!("read_link of a file: {:?}", fs::read_link("target.txt").map_err(|e| e.kind()));
    // A target longer than the 256 bytes std's read_link first offers: it grows its buffer
    // while readlink fills it.
    let long = "sub/".repeat(80) + "far.txt";
    symlink(&long, "long.txt").unwrap();
    let back = fs::read_link("long.txt").map(|p| p.as_os_str().len() == long.len());
    println!("read_link of a {}-byte target: {:?}", long.len(), back);
    println!("link over existing: {:?}", fs::hard_link("target.txt", "hard.txt").map_err(|e| e.kind()));
    fs::remove_file("target.txt").unwrap();
    println!("hard survives: {}", fs::read_to_string("hard.txt").unwrap());
}
