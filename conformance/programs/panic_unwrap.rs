//! `Result::expect` on an error: the `Debug` of the error in the panic message.

pub fn main() {
    let parsed: Result<u32, _> = "12x".parse::<u32>();
    println!("parsing");
    let io = std::fs::File::open("does-not-exist");
    println!("open failed: {}", io.is_err());
    parsed.expect("a number");
}
