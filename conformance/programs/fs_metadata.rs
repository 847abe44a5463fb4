//! `metadata` with sizes, kinds, times and permissions; `set_permissions`.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

pub fn main() {
    let before = SystemTime::now();
    let mut f = File::create("meta.txt").unwrap();
    f.write_all(&[7u8; 1234]).unwrap();
    drop(f);
    let after = SystemTime::now();
    let m = fs::metadata("meta.txt").unwrap();
    println!("len {} file {} dir {} symlink {}", m.len(), m.is_file(), m.is_dir(), m.is_symlink());
    let slack = Duration::from_millis(50);
    let modified = m.modified().unwrap();
    println!("modified within the write: {}", modified + slack >= before && modified <= after + slack);
    println!("accessed readable: {}", m.accessed().is_ok());
    println!("mode {:o}", m.permissions().mode() & 0o777);
    let mut p = m.permissions();
    p.set_readonly(true);
    fs::set_permissions("meta.txt", p).unwrap();
    let m2 = fs::metadata("meta.txt").unwrap();
    println!("readonly {} mode {:o}", m2.permissions().readonly(), m2.permissions().mode() & 0o777);
    fs::set_permissions("meta.txt", fs::Permissions::from_mode(0o640)).unwrap();
    println!("mode {:o}", fs::metadata("meta.txt").unwrap().permissions().mode() & 0o777);
    let f = File::open("meta.txt").unwrap();
    let fm = f.metadata().unwrap();
    println!("handle metadata len {} same file {}", fm.len(), fm.modified().unwrap() == fs::metadata("meta.txt").unwrap().modified().unwrap());
    f.set_permissions(fs::Permissions::from_mode(0o600)).unwrap();
    println!("mode via handle {:o}", fs::metadata("meta.txt").unwrap().permissions().mode() & 0o777);
    let d = fs::metadata(".").unwrap();
    println!("cwd is dir {}", d.is_dir());
    println!("missing: {:?}", fs::metadata("nope").map_err(|e| e.kind()));
    println!("exists {} {}", fs::exists("meta.txt").unwrap(), fs::exists("nope").unwrap());
}
