//! `Once`, `OnceLock`, `LazyLock`, `OnceCell` and a `static Mutex`.

use std::cell::OnceCell;
use std::sync::{LazyLock, Mutex, Once, OnceLock};

static INIT: Once = Once::new();
static CONFIG: OnceLock<String> = OnceLock::new();
static PRIMES: LazyLock<Vec<u32>> = LazyLock::new(|| {
    println!("computing primes");
    (2..60).filter(|n| (2..*n).all(|d| n % d != 0)).collect()
});
static LOG: Mutex<Vec<&str>> = Mutex::new(Vec::new());

pub fn main() {
    for _ in 0..3 {
        INIT.call_once(|| LOG.lock().unwrap().push("once"));
    }
    println!("completed {}", INIT.is_completed());
    println!("{}", CONFIG.get_or_init(|| "first".to_owned()));
    println!("{:?}", CONFIG.set("second".to_owned()));
    println!("{}", CONFIG.get().unwrap());
    println!("{:?}", PRIMES.iter().rev().take(3).collect::<Vec<_>>());
    println!("{}", PRIMES.len());
    let cell: OnceCell<u64> = OnceCell::new();
    println!("{} {:?}", cell.get_or_init(|| 99), cell.get());
    LOG.lock().unwrap().push("done");
    println!("{:?}", LOG.lock().unwrap());
    let poisoned = std::sync::Mutex::new(1);
    println!("poisoned {}", poisoned.is_poisoned());
}
