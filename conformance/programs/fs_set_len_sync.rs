//! `set_len` (grow and shrink), `sync_all`, `sync_data`, `flush`.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};

pub fn main() {
    let mut f = File::create("len.bin").unwrap();
    f.write_all(b"hello world").unwrap();
    f.sync_all().unwrap();
    f.set_len(5).unwrap();
    println!("shrunk {}", fs::metadata("len.bin").unwrap().len());
    f.set_len(8).unwrap();
    f.sync_data().unwrap();
    f.flush().unwrap();
    drop(f);
    println!("grown {:?}", fs::read("len.bin").unwrap());
    let mut rw = OpenOptions::new().read(true).write(true).open("len.bin").unwrap();
    rw.seek(SeekFrom::End(0)).unwrap();
    rw.write_all(b"!").unwrap();
    rw.rewind().unwrap();
    let mut s = Vec::new();
    rw.read_to_end(&mut s).unwrap();
    println!("{s:?}");
    let ro = File::open("len.bin").unwrap();
    println!("set_len on read-only: {:?}", ro.set_len(0).map_err(|e| e.kind()));
}
