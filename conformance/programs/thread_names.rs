//! `thread::current()`: every thread has a name and a distinct id.

use std::collections::HashSet;
use std::sync::Mutex;

static IDS: Mutex<Vec<std::thread::ThreadId>> = Mutex::new(Vec::new());

pub fn worker(index: usize, _count: usize) {
    let me = std::thread::current();
    if index < 3 {
        println!("{index}: {:?}", me.name());
    }
    IDS.lock().unwrap().push(me.id());
}

pub fn finish(count: usize) {
    let ids = IDS.lock().unwrap();
    let distinct: HashSet<_> = ids.iter().collect();
    println!("{} ids, {} distinct, {count} threads", ids.len(), distinct.len());
}
