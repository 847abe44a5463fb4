//! Every thread prints lines to stdout and stderr (compared as sorted lines when more
//! than one thread runs), and builds one line from two writes under `stdout().lock()`.

use std::io::Write;

pub fn worker(index: usize, count: usize) {
    println!("thread {index} of {count}: {:?}", (index % 7, index * index));
    {
        // Holding the lock keeps the two writes one line, whatever other threads print.
        let mut out = std::io::stdout().lock();
        write!(out, "{index}a ").unwrap();
        writeln!(out, "{index}b").unwrap();
    }
    if index % 100 == 0 {
        eprintln!("stderr from {index}");
    }
}

pub fn finish(count: usize) {
    println!("all {count} printed");
}
