//! `env::vars()`, `var`, `var_os`, `set_var`, `remove_var`, and `home_dir` without `HOME`
//! (the user database's entry, `getpwuid_r`).

use std::env;

pub fn main() {
    for (k, v) in env::vars() {
        println!("{k}={v}");
    }
    println!("{:?}", env::var("CONFORMANCE_GREETING"));
    println!("{:?}", env::var("CONFORMANCE_UNSET").map_err(|e| e.to_string()));
    println!("{:?}", env::var_os("CONFORMANCE_EMPTY"));
    // SAFETY: one thread runs this program.
    unsafe {
        env::set_var("CONFORMANCE_NEW", "set at run time");
        env::set_var("CONFORMANCE_GREETING", "replaced");
        env::remove_var("CONFORMANCE_EMPTY");
    }
    println!("{:?} {:?} {:?}", env::var("CONFORMANCE_NEW"), env::var("CONFORMANCE_GREETING"), env::var_os("CONFORMANCE_EMPTY"));
    let mut names: Vec<String> = env::vars().map(|(k, _)| k).collect();
    names.sort();
    println!("{names:?}");
    // SAFETY: as above.
    unsafe { env::remove_var("HOME") };
    println!("home without HOME: {:?}", env::home_dir());
}
