//! `process::abort`: no message of its own, the process ends as by SIGABRT.

pub fn main() {
    println!("aborting");
    std::process::abort();
}
