//! rand, seeded, and sha2 on every thread: each draws from a generator seeded with its
//! index and digests what it drew; the digests' XOR and a fixed sample are printed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256, Sha512};

static DIGESTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn worker(index: usize, _count: usize) {
    let mut rng = StdRng::seed_from_u64(index as u64);
    let mut hasher = Sha256::new();
    for _ in 0..64 {
        hasher.update(rng.random::<u64>().to_le_bytes());
    }
    let digest = hasher.finalize();
    for (word, part) in DIGESTS.iter().zip(digest.chunks(8)) {
        word.fetch_xor(u64::from_le_bytes(part.try_into().unwrap()), Relaxed);
    }
}

pub fn finish(count: usize) {
    let xor: Vec<u8> = DIGESTS
        .iter()
        .flat_map(|w| w.load(Relaxed).to_le_bytes())
        .collect();
    println!("{count} threads, digests XOR {}", hex(&xor));
    let mut rng = StdRng::seed_from_u64(42);
    let draws: Vec<u32> = (0..5).map(|_| rng.random_range(0..1000)).collect();
    let f: f64 = rng.random();
    let mut deck: Vec<u8> = (1..=10).collect();
    deck.shuffle(&mut rng);
    println!("seed 42: {draws:?} {f:.6} {deck:?} {}", rng.random_bool(0.5));
    println!("sha256(abc) {}", hex(&Sha256::digest(b"abc")));
    println!("sha512('') {}", &hex(&Sha512::digest(b""))[..32]);
}
