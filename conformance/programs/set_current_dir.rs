//! `env::set_current_dir`: relative paths follow it, through a link it lands on the
//! directory itself (`current_dir` names it canonically, as Linux's `getcwd`), a file or
//! a missing path is refused with the working directory left as it was, and the program
//! returns to where it started. `env::current_exe`: the executable, by the same path
//! on both sides (the harness grants the GPU its folder at its own path).

use std::os::unix::fs::symlink;
use std::path::Path;
use std::{env, fs};

fn show(what: &str, r: std::io::Result<()>, start: &Path) {
    let now = env::current_dir().unwrap();
    let at = now.strip_prefix(start).unwrap();
    match r {
        Ok(()) => println!("{what}: ok, now at {at:?}"),
        Err(e) => println!("{what}: {:?} {e}, still at {at:?}", e.kind()),
    }
}

pub fn main() {
    let start = env::current_dir().unwrap();
    fs::create_dir_all("a/b").unwrap();
    fs::write("file", "f").unwrap();
    symlink("a/b", "to_b").unwrap();
    show("into a", env::set_current_dir("a"), &start);
    fs::write("written_in_a", "relative").unwrap();
    show("into b", env::set_current_dir("b"), &start);
    show("up", env::set_current_dir(".."), &start);
    show("through a link", env::set_current_dir(start.join("to_b")), &start);
    println!("canonical . is the cwd: {}", fs::canonicalize(".").unwrap() == env::current_dir().unwrap());
    show("a file", env::set_current_dir(start.join("file")), &start);
    show("nothing", env::set_current_dir("missing"), &start);
    show("back", env::set_current_dir(&start), &start);
    println!("read back: {}", fs::read_to_string("a/written_in_a").unwrap());
    let exe = env::current_exe().unwrap();
    println!("current_exe absolute: {}, a file: {}", exe.is_absolute(), exe.is_file());
    println!("current_exe name: {:?}", exe.file_name().unwrap());
    println!("current_exe is this binary: {}", exe == fs::canonicalize(env::current_exe().unwrap()).unwrap());
}
