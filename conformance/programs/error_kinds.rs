//! `io::ErrorKind`, `raw_os_error` and the messages, as Linux reports them.

use std::fs;
use std::io;

fn show<T: std::fmt::Debug>(what: &str, r: io::Result<T>) {
    match r {
        Ok(v) => println!("{what}: ok {v:?}"),
        Err(e) => println!("{what}: {:?} {:?} {e}", e.kind(), e.raw_os_error()),
    }
}

pub fn main() {
    fs::write("file", "x").unwrap();
    fs::create_dir("dir").unwrap();
    fs::write("dir/inner", "y").unwrap();
    show("open missing", fs::File::open("missing"));
    show("create in missing dir", fs::File::create("missing/x"));
    show("file as dir", fs::File::open("file/x"));
    show("dir as file", fs::read_to_string("dir"));
    show("write a dir", fs::write("dir", "z"));
    show("mkdir existing", fs::create_dir("file"));
    show("rmdir non-empty", fs::remove_dir("dir"));
    show("rmdir a file", fs::remove_dir("file"));
    show("nul in path", fs::File::open("a\0b"));
    show("long name", fs::File::open("n".repeat(300)));
    show("rename dir onto file", fs::rename("dir", "file"));
    show("rename into itself", fs::rename("dir", "dir/sub"));
    show("read_to_string of bad utf8", {
        fs::write("bad", [0xff, 0xfe]).unwrap();
        fs::read_to_string("bad")
    });
    let custom = io::Error::new(io::ErrorKind::InvalidData, "custom message");
    println!("custom: {:?} {custom}", custom.kind());
    let from_raw = io::Error::from_raw_os_error(28);
    println!("raw 28: {:?} {from_raw}", from_raw.kind());
    for code in [1, 2, 5, 9, 11, 12, 13, 17, 20, 21, 22, 24, 27, 28, 30, 32, 36, 38, 39, 40, 95, 110] {
        let e = io::Error::from_raw_os_error(code);
        println!("{code}: {:?} {e}", e.kind());
    }
}
