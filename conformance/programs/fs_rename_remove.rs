//! `rename` (files and directories, over an existing file), `remove_file`.

use std::fs;

pub fn main() {
    fs::write("a.txt", "first").unwrap();
    fs::write("b.txt", "second").unwrap();
    fs::rename("a.txt", "c.txt").unwrap();
    println!("a exists {} c = {}", fs::exists("a.txt").unwrap(), fs::read_to_string("c.txt").unwrap());
    fs::rename("c.txt", "b.txt").unwrap();
    println!("b = {}", fs::read_to_string("b.txt").unwrap());
    fs::create_dir("dir").unwrap();
    fs::rename("b.txt", "dir/b.txt").unwrap();
    fs::rename("dir", "moved").unwrap();
    println!("moved/b = {}", fs::read_to_string("moved/b.txt").unwrap());
    println!("rename missing: {:?}", fs::rename("nope", "x").map_err(|e| e.kind()));
    fs::remove_file("moved/b.txt").unwrap();
    println!("remove again: {:?}", fs::remove_file("moved/b.txt").map_err(|e| e.kind()));
    println!("remove_file on a dir: {:?}", fs::remove_file("moved").map_err(|e| e.kind()));
    fs::write("keep.txt", "kept").unwrap();
}
