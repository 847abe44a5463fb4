//! `String` and `&str`: UTF-8, searching, splitting, case and conversions.

pub fn main() {
    let s = String::from("Grüße, GPU! 数字 🚀");
    println!("{} bytes, {} chars", s.len(), s.chars().count());
    println!("{}", s.to_uppercase());
    println!("{:?}", s.char_indices().filter(|(_, c)| !c.is_ascii()).collect::<Vec<_>>());
    println!("{:?}", "a,b,,c".split(',').collect::<Vec<_>>());
    println!("{:?}", "  trim me \n".trim());
    println!("{:?}", "one two  three".split_whitespace().rev().collect::<Vec<_>>());
    println!("{:?} {:?}", s.find("GPU"), s.rfind('x'));
    println!("{}", "abc".repeat(3).replace("ca", "-"));
    let mut owned = String::with_capacity(4);
    for i in 0..10 {
        owned.push_str(&i.to_string());
        owned.push(' ');
    }
    owned.truncate(owned.trim_end().len());
    println!("{owned:?}");
    println!("{:?}", String::from_utf8(vec![0xff, 0x41]).map_err(|e| e.to_string()));
    println!("{}", String::from_utf8_lossy(&[0x48, 0x69, 0xf0, 0x9f]));
    let words: Vec<&str> = "the quick brown fox".split(' ').collect();
    println!("{}", words.iter().map(|w| w.len().to_string()).collect::<Vec<_>>().join("+"));
    println!("{}", "Zebra".cmp("apple") as i8);
}
