//! `env::args()` and `env::args_os()`: the arguments the embedder passes.

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    println!("{} args", args.len());
    for (i, a) in args.iter().enumerate() {
        println!("{i}: {a:?}");
    }
    let os: Vec<_> = std::env::args_os().skip(1).collect();
    println!("{os:?}");
    println!("{:?}", std::env::args().nth(2));
}
