//! Integer arithmetic: widths, overflow handling, parsing and 128-bit formatting.

pub fn main() {
    let a: u128 = u128::MAX / 3;
    let b: i128 = i128::MIN + 12345;
    println!("{a} {b} {:x}", a);
    println!("{:?} {:?}", 250u8.checked_add(10), 250u8.wrapping_add(10));
    println!("{} {}", i32::MAX.saturating_add(1), (-7i32).rem_euclid(3));
    println!("{:?}", 5u64.overflowing_sub(6));
    println!("{} {} {}", u64::MAX.count_ones(), 40u32.leading_zeros(), 96u16.trailing_zeros());
    println!("{} {}", 0x1234_5678u32.swap_bytes(), 0b1011u8.reverse_bits());
    println!("{:?} {:?} {:?}", "-17".parse::<i8>(), "300".parse::<u8>(), "".parse::<u32>());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut acc = 0u64;
    for i in 0..1000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_add(x.rotate_left((i % 64) as u32));
    }
    println!("xorshift {x} {acc}");
    println!("{} {}", i64::MIN / -1i64.wrapping_neg(), u32::try_from(-1i64).is_err());
    println!("{}", (1..=20u64).product::<u64>());
}
