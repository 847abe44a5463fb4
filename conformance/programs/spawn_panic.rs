//! A panic in a spawned thread reaches `join` with its payload (a `String`, a `&str`),
//! from a named thread and a scoped one; a scope whose thread's panic nobody joined
//! panics itself; a detached thread's panic leaves the program running.

use std::thread;
use std::time::Duration;

pub fn main() {
    let step = std::env::args().count();
    let named = thread::Builder::new()
        .name("doomed".into())
        .spawn(move || -> u32 { panic!("failed at step {step}") })
        .unwrap();
    let payload = named.join().unwrap_err();
    println!("joined: {:?}", payload.downcast_ref::<String>());

    let plain = thread::spawn(|| panic!("a plain message")).join().unwrap_err();
    println!("joined: {:?}", plain.downcast_ref::<&str>());

    let data = [1, 2, 3];
    let scoped = thread::scope(|s| {
        s.spawn(|| {
            if data.len() == 3 {
                panic!("scoped thread saw {:?}", data);
            }
        })
        .join()
        .map_err(|p| p.downcast_ref::<String>().cloned())
    });
    println!("scoped: {scoped:?}");

    drop(thread::spawn(|| panic!("detached")));
    thread::sleep(Duration::from_millis(100));
    println!("after a detached panic: {}", thread::spawn(|| 6 * 7).join().unwrap());

    thread::scope(|s| {
        s.spawn(|| panic!("nobody joins this one"));
    });
    println!("not reached: the scope panics");
}
