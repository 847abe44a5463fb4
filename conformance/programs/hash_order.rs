//! SipHash with fixed keys: iteration order of a `HashMap` and hash values must agree
//! bit for bit between the CPU and the GPU.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};

pub fn main() {
    let mut map: HashMap<String, u32, BuildHasherDefault<DefaultHasher>> = HashMap::default();
    for i in 0..40 {
        map.insert(format!("key{i}"), i);
    }
    let order: Vec<u32> = map.values().copied().collect();
    println!("{order:?}");
    for v in [&b"abc"[..], b"", b"the quick brown fox"] {
        let mut h = DefaultHasher::new();
        v.hash(&mut h);
        (v.len() as u128).hash(&mut h);
        println!("{:016x}", h.finish());
    }
}
