//! A panic: its message and location on stderr, the process ending with 101.

pub fn main() {
    println!("before the panic");
    let v: Vec<u32> = (0..3).collect();
    let n = v.len() * 14;
    panic!("boom: {n} is too many");
}
