//! `io::stdout().lock()`, `writeln!` on it, `BufWriter` over stdout, and `print!` after.

use std::io::{self, BufWriter, Write};

pub fn main() {
    {
        let mut out = io::stdout().lock();
        for i in 0..5 {
            writeln!(out, "locked {i}").unwrap();
        }
        out.write_all(b"raw bytes without newline, ").unwrap();
        out.flush().unwrap();
    }
    println!("then println");
    let mut buffered = BufWriter::new(io::stdout());
    for i in 0..1000 {
        write!(buffered, "{i} ").unwrap();
    }
    writeln!(buffered).unwrap();
    drop(buffered);
    let mut err = io::stderr().lock();
    writeln!(err, "stderr locked").unwrap();
    print!("last");
    io::stdout().flush().unwrap();
    println!();
}
