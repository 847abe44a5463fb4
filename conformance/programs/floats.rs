//! Float formatting and the float functions whose results are exact.

pub fn main() {
    let values = [
        0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 2.0f64.sqrt(), 1e21, 1e-7, 123456789.125,
        f64::MAX, f64::MIN_POSITIVE, f64::EPSILON, f64::INFINITY, f64::NEG_INFINITY, f64::NAN,
    ];
    for v in values {
        println!("{v} | {v:?} | {v:.3} | {v:e} | {v:12.4e}");
    }
    let f: f32 = 16777217.0;
    println!("f32 {f} {} {}", 0.1f32 + 0.2f32, (0.1f64 + 0.2f64));
    println!("{} {} {} {}", 2.5f64.round(), -2.5f64.floor(), 7.9f64.trunc(), 9f64.sqrt());
    println!("{} {} {}", 1.5f64.mul_add(2.0, 0.25), 3.0f64.powi(5), (-8.0f64).abs());
    println!("{:?} {:?}", "3.25".parse::<f64>(), "x1".parse::<f64>().is_err());
    println!("{} {}", f64::from_bits(0x400921fb54442d18), (1u64 << 53) as f64);
    println!("{} {}", 1e300 * 1e10, (0.0f64 / 0.0).is_nan());
}
