//! The collections: `Vec`, `VecDeque`, `BTreeMap`, `BTreeSet`, `HashMap`, `HashSet`,
//! `BinaryHeap`, `LinkedList` (hash-ordered ones printed sorted).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};

pub fn main() {
    let mut v: Vec<i32> = (0..20).map(|i| (i * 7919) % 31).collect();
    v.sort_unstable();
    v.dedup();
    println!("vec {v:?}");
    let mut d: VecDeque<i32> = VecDeque::new();
    for i in 0..5 {
        d.push_front(i);
        d.push_back(-i);
    }
    d.rotate_left(3);
    println!("deque {d:?}");
    let text = "it was the best of times it was the worst of times";
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in text.split(' ') {
        *counts.entry(w).or_default() += 1;
    }
    let mut sorted: Vec<_> = counts.into_iter().collect();
    sorted.sort();
    println!("hash {sorted:?}");
    let tree: BTreeMap<_, _> = sorted.iter().map(|(w, c)| (*c, *w)).collect();
    println!("tree {tree:?} first {:?}", tree.first_key_value());
    let a: BTreeSet<u32> = (0..30).filter(|x| x % 3 == 0).collect();
    let b: BTreeSet<u32> = (0..30).filter(|x| x % 5 == 0).collect();
    println!("sets {:?} {:?}", a.intersection(&b).collect::<Vec<_>>(), a.difference(&b).count());
    let hs: HashSet<String> = ["x", "y", "x", "z"].iter().map(|s| s.to_string()).collect();
    let mut hv: Vec<_> = hs.iter().collect();
    hv.sort();
    println!("hashset {hv:?}");
    let mut heap: BinaryHeap<(u8, &str)> = BinaryHeap::new();
    heap.extend([(3, "c"), (9, "z"), (1, "a"), (5, "m")]);
    let order: Vec<_> = std::iter::from_fn(|| heap.pop()).collect();
    println!("heap {order:?}");
    let list: LinkedList<u8> = (1..6).collect();
    println!("list {:?} {}", list, list.iter().sum::<u8>());
    let big: BTreeMap<u32, String> = (0..2000).map(|i| (i * 37 % 2000, format!("v{i}"))).collect();
    println!("big {} {:?} {:?}", big.len(), big.range(100..103).collect::<Vec<_>>(), big.last_key_value());
}
