//! Float math on the GPU beside the CPU: the same program, built for the CPU (glibc's
//! libm) and by `cargo gpu build` for the GPU (Rust's libm, which ptx-builder links).
//!
//!     math-bench values FILE         every function over its arguments, results to FILE
//!     math-bench compare GPU CPU     two `values` files: per function, how many results
//!                                    differ and the largest difference in ulps (JSON lines)
//!     math-bench rate THREADS N      THREADS threads each evaluate each function N times;
//!                                    evaluations per second (JSON lines)
//!
//! Arguments are the same on both sides: half spread over the function's ordinary
//! domain, half any finite bit pattern of the right sign (tiny, huge, subnormal).

use std::hint::black_box;
use std::io::{Read, Write};
use std::time::Instant;

/// Arguments per function in `values`.
const ARGS: usize = 1 << 16;

/// How a function is called: one or two `f64`s, or one or two `f32`s.
#[derive(Clone, Copy)]
enum Call {
    D1(fn(f64) -> f64),
    D2(fn(f64, f64) -> f64),
    F1(fn(f32) -> f32),
    F2(fn(f32, f32) -> f32),
}

/// A function, the interval its ordinary arguments come from, and whether arguments
/// must be positive.
struct Function {
    name: &'static str,
    call: Call,
    lo: f64,
    hi: f64,
    positive: bool,
}

const fn f(name: &'static str, call: Call, lo: f64, hi: f64, positive: bool) -> Function {
    Function {
        name,
        call,
        lo,
        hi,
        positive,
    }
}

/// Every function `values` computes, in the order of its file; `cuda.cu` beside this
/// computes CUDA's own over the same arguments, in the same order: keep the two in step.
const FUNCTIONS: &[Function] = &[
    f("sin", Call::D1(f64::sin), -10.0, 10.0, false),
    f("cos", Call::D1(f64::cos), -10.0, 10.0, false),
    f("tan", Call::D1(f64::tan), -10.0, 10.0, false),
    f("asin", Call::D1(f64::asin), -1.0, 1.0, false),
    f("acos", Call::D1(f64::acos), -1.0, 1.0, false),
    f("atan", Call::D1(f64::atan), -10.0, 10.0, false),
    f("atan2", Call::D2(f64::atan2), -10.0, 10.0, false),
    f("sinh", Call::D1(f64::sinh), -20.0, 20.0, false),
    f("cosh", Call::D1(f64::cosh), -20.0, 20.0, false),
    f("tanh", Call::D1(f64::tanh), -20.0, 20.0, false),
    f("asinh", Call::D1(f64::asinh), -100.0, 100.0, false),
    f("acosh", Call::D1(f64::acosh), 1.0, 100.0, true),
    f("atanh", Call::D1(f64::atanh), -1.0, 1.0, false),
    f("exp", Call::D1(f64::exp), -700.0, 700.0, false),
    f("exp2", Call::D1(f64::exp2), -1000.0, 1000.0, false),
    f("exp_m1", Call::D1(f64::exp_m1), -5.0, 5.0, false),
    f("ln", Call::D1(f64::ln), 0.0, 100.0, true),
    f("log2", Call::D1(f64::log2), 0.0, 100.0, true),
    f("log10", Call::D1(f64::log10), 0.0, 100.0, true),
    f("ln_1p", Call::D1(f64::ln_1p), -0.9, 10.0, false),
    f("powf", Call::D2(f64::powf), 0.0, 10.0, true),
    f(
        "powi",
        Call::D2(|x, y| x.powi(y as i32 % 64)),
        0.0,
        10.0,
        false,
    ),
    f("cbrt", Call::D1(f64::cbrt), -100.0, 100.0, false),
    f("hypot", Call::D2(f64::hypot), -100.0, 100.0, false),
    f("sinf", Call::F1(f32::sin), -10.0, 10.0, false),
    f("cosf", Call::F1(f32::cos), -10.0, 10.0, false),
    f("tanf", Call::F1(f32::tan), -10.0, 10.0, false),
    f("asinf", Call::F1(f32::asin), -1.0, 1.0, false),
    f("atanf", Call::F1(f32::atan), -10.0, 10.0, false),
    f("atan2f", Call::F2(f32::atan2), -10.0, 10.0, false),
    f("sinhf", Call::F1(f32::sinh), -20.0, 20.0, false),
    f("tanhf", Call::F1(f32::tanh), -20.0, 20.0, false),
    f("expf", Call::F1(f32::exp), -80.0, 80.0, false),
    f("exp2f", Call::F1(f32::exp2), -120.0, 120.0, false),
    f("lnf", Call::F1(f32::ln), 0.0, 100.0, true),
    f("log2f", Call::F1(f32::log2), 0.0, 100.0, true),
    f("log10f", Call::F1(f32::log10), 0.0, 100.0, true),
    f("powff", Call::F2(f32::powf), 0.0, 10.0, true),
    f("cbrtf", Call::F1(f32::cbrt), -100.0, 100.0, false),
];

/// The functions `rate` times: the ones CUDA's own are timed for in `bench/limits.cu`.
const RATED: [&str; 8] = ["sin", "exp", "ln", "powf", "sinf", "expf", "lnf", "powff"];

/// splitmix64: the same pseudo-random stream on both sides.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Argument `i` (stream `s`) of `func`: ordinary for even `i`, any finite value for odd.
fn arg(func: &Function, s: u64, i: usize) -> f64 {
    let r = mix(s.wrapping_mul(0x1000_0001) ^ i as u64);
    let x = if i % 2 == 0 {
        func.lo + (func.hi - func.lo) * ((r >> 11) as f64 / (1u64 << 53) as f64)
    } else {
        let v = f64::from_bits(r);
        let v = if v.is_finite() { v } else { (r >> 12) as f64 };
        if matches!(func.call, Call::F1(_) | Call::F2(_)) {
            // An f32's range, any of its exponents.
            f64::from(f32::from_bits((r >> 32) as u32))
                .clamp(-f64::from(f32::MAX), f64::from(f32::MAX))
        } else {
            v
        }
    };
    let x = if x.is_nan() { 0.5 } else { x };
    if func.positive { x.abs() } else { x }
}

/// `func` at argument `i`, as the bits of its result.
fn value(func: &Function, idx: usize, i: usize) -> u64 {
    let (x, y) = (arg(func, idx as u64, i), arg(func, idx as u64 + 1000, i));
    match func.call {
        Call::D1(g) => g(x).to_bits(),
        Call::D2(g) => g(x, y).to_bits(),
        Call::F1(g) => u64::from(g(x as f32).to_bits()),
        Call::F2(g) => u64::from(g(x as f32, y as f32).to_bits()),
    }
}

/// Every function's results over [`ARGS`] arguments, computed by `threads` threads.
fn values(threads: usize) -> Vec<u64> {
    let total = FUNCTIONS.len() * ARGS;
    let chunk = total.div_ceil(threads);
    let mut out = vec![0u64; total];
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (k, slot) in part.iter_mut().enumerate() {
                    let at = c * chunk + k;
                    *slot = value(&FUNCTIONS[at / ARGS], at / ARGS, at % ARGS);
                }
            });
        }
    });
    out
}

/// A float's bits as an integer that orders like the float (so differences count ulps).
fn ordered(bits: u64, single: bool) -> i64 {
    let (bits, sign) = if single {
        (bits as u32 as i32 as i64, bits as u32 >> 31 == 1)
    } else {
        (bits as i64, bits >> 63 == 1)
    };
    if sign {
        (if single { i32::MIN as i64 } else { i64::MIN }) - bits
    } else {
        bits
    }
}

/// Per function: results that differ, the largest difference in ulps, and results where
/// one side is NaN and the other not.
fn compare(gpu: &[u64], cpu: &[u64]) {
    for (idx, func) in FUNCTIONS.iter().enumerate() {
        let single = matches!(func.call, Call::F1(_) | Call::F2(_));
        let (mut differ, mut worst, mut nan) = (0usize, 0u64, 0usize);
        let mut worst_at = 0usize;
        for i in 0..ARGS {
            let (g, c) = (gpu[idx * ARGS + i], cpu[idx * ARGS + i]);
            if g == c {
                continue;
            }
            let is_nan = |b: u64| {
                if single {
                    f32::from_bits(b as u32).is_nan()
                } else {
                    f64::from_bits(b).is_nan()
                }
            };
            match (is_nan(g), is_nan(c)) {
                (true, true) => continue,
                (false, false) => {}
                _ => {
                    nan += 1;
                    continue;
                }
            }
            differ += 1;
            let d = ordered(g, single).abs_diff(ordered(c, single));
            if d > worst {
                (worst, worst_at) = (d, i);
            }
        }
        println!(
            "{{\"function\": \"{}\", \"args\": {ARGS}, \"differ\": {differ}, \"max_ulps\": {worst}, \
             \"worst_arg\": {:e}, \"nan_mismatch\": {nan}}}",
            func.name,
            arg(func, idx as u64, worst_at)
        );
    }
}

/// Evaluations per second of each [`RATED`] function: `threads` threads, started once,
/// each evaluating it `n` times between two barriers, at the arguments of
/// `bench/limits.cu`'s kernels (`0.5 + k * 1e-7`); thread 0 times from barrier to barrier.
fn rate(threads: usize, n: usize) {
    let barrier = std::sync::Barrier::new(threads);
    let seconds = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, seconds) = (&barrier, &seconds);
            s.spawn(move || {
                for name in RATED {
                    let func = FUNCTIONS.iter().find(|f| f.name == name).expect("rated");
                    barrier.wait();
                    let start = Instant::now();
                    let mut acc = 0.0f64;
                    for i in 0..n {
                        let x = 0.5 + (t * n + i) as f64 * 1e-7;
                        acc += match func.call {
                            Call::D1(g) => g(black_box(x)),
                            Call::D2(g) => g(black_box(x), 1.7),
                            Call::F1(g) => f64::from(g(black_box(x as f32))),
                            Call::F2(g) => f64::from(g(black_box(x as f32), 1.7)),
                        };
                    }
                    black_box(acc);
                    barrier.wait();
                    if t == 0 {
                        let mut s = seconds.lock().expect("not poisoned");
                        s.push((name, start.elapsed().as_secs_f64()));
                    }
                }
            });
        }
    });
    for (name, secs) in seconds.into_inner().expect("not poisoned") {
        println!(
            "{{\"function\": \"{name}\", \"threads\": {threads}, \"per_thread\": {n}, \
             \"seconds\": {secs:.4}, \"evals_per_s\": {:.4e}}}",
            (threads * n) as f64 / secs
        );
    }
}

fn read(path: &str) -> Vec<u64> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .unwrap_or_else(|e| panic!("reading {path}: {e}"));
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let word = |i: usize| args.get(i).map(String::as_str);
    let number =
        |i: usize, default: usize| word(i).map_or(default, |w| w.parse().expect("a number"));
    match word(1) {
        Some("values") => {
            let threads = number(3, 256);
            let out: Vec<u8> = values(threads)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let path = word(2).expect("values FILE");
            std::fs::File::create(path)
                .and_then(|mut f| f.write_all(&out))
                .unwrap_or_else(|e| panic!("writing {path}: {e}"));
            println!("{} results written to {path}", out.len() / 8);
        }
        Some("compare") => {
            let (gpu, cpu) = (
                read(word(2).expect("GPU file")),
                read(word(3).expect("CPU file")),
            );
            assert_eq!(gpu.len(), FUNCTIONS.len() * ARGS, "GPU file's length");
            assert_eq!(cpu.len(), FUNCTIONS.len() * ARGS, "CPU file's length");
            compare(&gpu, &cpu);
        }
        Some("rate") => rate(number(2, 16), number(3, 1 << 16)),
        _ => {
            eprintln!("usage: math-bench values FILE [THREADS] | compare GPU CPU | rate THREADS N");
            std::process::exit(2);
        }
    }
}
