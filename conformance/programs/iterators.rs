//! Iterator adapters, slices and sorting.

pub fn main() {
    let data: Vec<u32> = (1..=30).map(|i| (i * 17 + 3) % 23).collect();
    println!("{:?}", data.chunks(7).map(|c| c.iter().sum::<u32>()).collect::<Vec<_>>());
    println!("{:?}", data.windows(3).filter(|w| w[0] < w[1] && w[1] < w[2]).count());
    let mut people = vec![("eve", 31), ("bob", 25), ("amy", 31), ("dan", 19)];
    people.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    println!("{people:?}");
    let mut sorted = data.clone();
    sorted.sort();
    println!("{:?} {:?}", sorted.binary_search(&11), sorted.binary_search(&100));
    let (even, odd): (Vec<u32>, Vec<u32>) = data.iter().partition(|x| *x % 2 == 0);
    println!("{} {}", even.len(), odd.len());
    let zipped: Vec<String> = even.iter().zip(odd.iter().rev()).map(|(a, b)| format!("{a}{b}")).collect();
    println!("{}", zipped.join(" "));
    println!("{:?}", data.iter().max_by_key(|x| (*x % 5, *x)));
    println!("{:?}", (0..5).flat_map(|i| (0..i).map(move |j| i * j)).collect::<Vec<_>>());
    println!("{:?}", data.iter().position(|&x| x == 20));
    println!("{:?}", (1..100).step_by(13).skip_while(|x| *x < 20).take(3).collect::<Vec<_>>());
    let fib: Vec<u64> = std::iter::successors(Some((0u64, 1u64)), |&(a, b)| Some((b, a + b)))
        .map(|p| p.0)
        .take(15)
        .collect();
    println!("{fib:?}");
}
