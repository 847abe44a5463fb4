//! `fs::copy`: contents and permissions, onto a new and an existing file.

use std::fs;
use std::os::unix::fs::PermissionsExt;

pub fn main() {
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    fs::write("src.bin", &data).unwrap();
    fs::set_permissions("src.bin", fs::Permissions::from_mode(0o640)).unwrap();
    println!("copied {}", fs::copy("src.bin", "dst.bin").unwrap());
    println!("same {}", fs::read("dst.bin").unwrap() == data);
    println!("mode {:o}", fs::metadata("dst.bin").unwrap().permissions().mode() & 0o777);
    fs::write("small.txt", "small").unwrap();
    println!("over existing {}", fs::copy("small.txt", "dst.bin").unwrap());
    println!("{:?}", fs::read_to_string("dst.bin").unwrap());
    println!("missing source: {:?}", fs::copy("nope", "x").map_err(|e| e.kind()));
    fs::create_dir("d").unwrap();
    println!("onto a directory: {:?}", fs::copy("small.txt", "d").map_err(|e| e.kind()));
}
