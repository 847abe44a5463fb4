//! `create_dir(_all)`, `read_dir` with `DirEntry` metadata, `remove_dir(_all)`.

use std::fs;

fn list(path: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(path)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            let kind = if t.is_dir() { "dir" } else if t.is_symlink() { "link" } else { "file" };
            format!("{} {kind} {}", e.file_name().to_string_lossy(), e.metadata().unwrap().len())
        })
        .collect();
    names.sort();
    names
}

pub fn main() {
    fs::create_dir("top").unwrap();
    println!("create twice: {:?}", fs::create_dir("top").map_err(|e| e.kind()));
    fs::create_dir_all("top/a/b/c").unwrap();
    fs::create_dir_all("top/a/b/c").unwrap();
    for i in 0..5 {
        fs::write(format!("top/f{i}.txt"), "x".repeat(i * 10)).unwrap();
    }
    fs::write("top/a/b/deep.txt", "deep").unwrap();
    println!("{:?}", list("top"));
    println!("{:?}", list("top/a/b"));
    let entry = fs::read_dir("top/a").unwrap().next().unwrap().unwrap();
    println!("path {}", entry.path().display());
    println!("remove non-empty: {:?}", fs::remove_dir("top/a").map_err(|e| e.kind()));
    fs::remove_dir("top/a/b/c").unwrap();
    println!("read_dir of a file: {:?}", fs::read_dir("top/f1.txt").map(|_| ()).map_err(|e| e.kind()));
    println!("create under a file: {:?}", fs::create_dir("top/f1.txt/x").map_err(|e| e.kind()));
    fs::remove_dir_all("top/a").unwrap();
    println!("{:?}", list("top"));
    let many = "wide";
    fs::create_dir(many).unwrap();
    for i in 0..300 {
        fs::write(format!("{many}/entry{i:03}"), [i as u8]).unwrap();
    }
    println!("wide has {} entries", fs::read_dir(many).unwrap().count());
    fs::remove_dir_all(many).unwrap();
    println!("wide exists {}", fs::exists(many).unwrap());
}
