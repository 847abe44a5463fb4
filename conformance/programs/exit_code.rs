//! `process::exit` with a code, after output on both streams.

pub fn main() {
    println!("about to exit");
    eprintln!("with code 7");
    print!("unterminated ");
    std::process::exit(7);
}
