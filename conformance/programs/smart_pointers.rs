//! `Box<dyn Trait>`, `Rc`/`Weak`, `RefCell`, `Cell`, `Cow` and closures.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

trait Shape {
    fn area(&self) -> f64;
    fn name(&self) -> String;
}
struct Square(f64);
struct Circle(f64);
impl Shape for Square {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
    fn name(&self) -> String {
        format!("square {}", self.0)
    }
}
impl Shape for Circle {
    fn area(&self) -> f64 {
        3.0 * self.0 * self.0
    }
    fn name(&self) -> String {
        format!("circle {}", self.0)
    }
}

struct Node {
    value: u32,
    parent: RefCell<Weak<Node>>,
    children: RefCell<Vec<Rc<Node>>>,
}

pub fn main() {
    let shapes: Vec<Box<dyn Shape>> = vec![Box::new(Square(2.0)), Box::new(Circle(1.5))];
    for s in &shapes {
        println!("{}: {}", s.name(), s.area());
    }
    let leaf = Rc::new(Node { value: 3, parent: RefCell::new(Weak::new()), children: RefCell::new(vec![]) });
    let branch = Rc::new(Node { value: 5, parent: RefCell::new(Weak::new()), children: RefCell::new(vec![leaf.clone()]) });
    *leaf.parent.borrow_mut() = Rc::downgrade(&branch);
    println!("parent {:?}", leaf.parent.borrow().upgrade().map(|p| p.value));
    println!("counts {} {} {}", Rc::strong_count(&leaf), Rc::strong_count(&branch), Rc::weak_count(&branch));
    println!("children {:?}", branch.children.borrow().iter().map(|c| c.value).collect::<Vec<_>>());
    let counter = Cell::new(0);
    let bump = |by: i32| counter.set(counter.get() + by);
    (1..=4).for_each(bump);
    println!("cell {}", counter.get());
    let cell = RefCell::new(vec![1]);
    {
        let _first = cell.borrow();
        println!("try_borrow_mut while borrowed: {}", cell.try_borrow_mut().is_err());
    }
    cell.borrow_mut().push(2);
    println!("refcell {:?}", cell.borrow());
    let text: Cow<str> = Cow::Borrowed("plain");
    let fixed: Cow<str> = if text.contains(' ') { Cow::Owned(text.replace(' ', "_")) } else { text };
    println!("cow {fixed} owned={}", matches!(fixed, Cow::Owned(_)));
    let make_adder = |n: i32| move |x: i32| x + n;
    let adders: Vec<Box<dyn Fn(i32) -> i32>> = (0..3).map(|n| Box::new(make_adder(n)) as Box<dyn Fn(i32) -> i32>).collect();
    println!("closures {:?}", adders.iter().map(|f| f(10)).collect::<Vec<_>>());
    drop(branch);
    println!("after drop {:?}", leaf.parent.borrow().upgrade().is_none());
}
