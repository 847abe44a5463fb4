//! Every `OpenOptions` combination a program uses, with seeking.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};

pub fn main() {
    let mut f = OpenOptions::new().write(true).create_new(true).open("opts.txt").unwrap();
    f.write_all(b"0123456789").unwrap();
    drop(f);
    let again = OpenOptions::new().write(true).create_new(true).open("opts.txt");
    println!("create_new twice: {:?}", again.map_err(|e| e.kind()));
    let missing = OpenOptions::new().write(true).open("absent.txt");
    println!("open without create: {:?}", missing.map_err(|e| e.kind()));
    let mut rw = OpenOptions::new().read(true).write(true).open("opts.txt").unwrap();
    rw.seek(SeekFrom::Start(3)).unwrap();
    rw.write_all(b"abc").unwrap();
    let pos = rw.stream_position().unwrap();
    let mut rest = String::new();
    rw.read_to_string(&mut rest).unwrap();
    println!("after overwrite at 3: pos {pos}, rest {rest:?}");
    println!("seek end -2: {}", rw.seek(SeekFrom::End(-2)).unwrap());
    println!("seek before start: {:?}", rw.seek(SeekFrom::Current(-100)).map_err(|e| e.kind()));
    drop(rw);
    println!("{}", fs::read_to_string("opts.txt").unwrap());
    let mut t = OpenOptions::new().write(true).truncate(true).open("opts.txt").unwrap();
    t.write_all(b"short").unwrap();
    drop(t);
    println!("{}", fs::read_to_string("opts.txt").unwrap());
    let mut c = OpenOptions::new().create(true).append(true).open("made.txt").unwrap();
    c.write_all(b"one\n").unwrap();
    c.write_all(b"two\n").unwrap();
    drop(c);
    println!("{:?}", fs::read_to_string("made.txt").unwrap());
    let ro = OpenOptions::new().read(true).open("made.txt").unwrap();
    println!("write to read-only handle: {:?}", (&ro).write(b"x").map_err(|e| e.kind()));
    let nothing = OpenOptions::new().open("made.txt");
    println!("no access mode: {:?}", nothing.map_err(|e| e.kind()));
}
