//! `thread_local!` with `Cell`, `RefCell` and a lazily built value.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

thread_local! {
    static COUNTER: Cell<u32> = const { Cell::new(0) };
    static LOG: RefCell<Vec<String>> = RefCell::new(Vec::new());
    static TABLE: HashMap<u32, &'static str> = HashMap::from([(1, "one"), (2, "two")]);
}

fn bump() -> u32 {
    COUNTER.with(|c| {
        c.set(c.get() + 1);
        c.get()
    })
}

pub fn main() {
    for _ in 0..5 {
        let n = bump();
        LOG.with_borrow_mut(|l| l.push(format!("bump {n}")));
    }
    println!("{}", COUNTER.get());
    LOG.with_borrow(|l| println!("{l:?}"));
    println!("{:?}", TABLE.with(|t| t.get(&2).copied()));
    COUNTER.set(100);
    println!("{}", COUNTER.take());
    println!("{}", COUNTER.get());
}
