//! `mpsc` channels: every thread sends; the finisher receives them all.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};

struct Pipe {
    tx: Mutex<Sender<(usize, String)>>,
    rx: Mutex<Receiver<(usize, String)>>,
}

static PIPE: OnceLock<Pipe> = OnceLock::new();

fn pipe() -> &'static Pipe {
    PIPE.get_or_init(|| {
        let (tx, rx) = channel();
        Pipe { tx: Mutex::new(tx), rx: Mutex::new(rx) }
    })
}

pub fn worker(index: usize, _count: usize) {
    let tx = pipe().tx.lock().unwrap().clone();
    tx.send((index, format!("msg{}", index % 10))).unwrap();
}

pub fn finish(count: usize) {
    let rx = pipe().rx.lock().unwrap();
    let mut got: Vec<(usize, String)> = rx.try_iter().collect();
    got.sort();
    println!("received {} of {count}", got.len());
    println!("in order: {}", got.iter().enumerate().all(|(i, (j, m))| i == *j && *m == format!("msg{}", i % 10)));
    println!("empty now: {:?}", rx.try_recv().is_err());
}
