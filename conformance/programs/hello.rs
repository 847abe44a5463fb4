//! `print!`, `println!`, `eprintln!` and the formatting machinery.

pub fn main() {
    println!("Hello from std!");
    print!("no newline, ");
    print!("then one\n");
    eprintln!("to stderr: {}", 42);
    let name = "GPU";
    let width = 12;
    println!("[{name:>width$}] [{name:<width$}] [{name:^width$}] [{name:*^9}]");
    println!("{:#x} {:#o} {:#b} {:08.3} {:+} {:e}", 255, 8, 5, 3.14159, 7, 1234.5);
    println!("{:?} {:?} {:?}", "quoted\t\"str\"", 'c', Some((1, "two", [3.0, 4.5])));
    println!("{:#?}", vec![(1, 'a'), (2, 'b')]);
    let s = format!("{}-{}", "joined", 1 + 1);
    println!("{s} has {} bytes", s.len());
}
