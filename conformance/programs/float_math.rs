//! Every float function of std, `f64` and `f32`, and the C math functions crates call
//! directly, over ordinary, tiny, huge and special arguments.
//!
//! Printed to 12 significant digits (`f64`) and 6 (`f32`): the GPU's functions (Rust's
//! libm, a port of musl's) and glibc's are each within about an ulp of the true value and
//! may differ from each other in the last bit, which these precisions do not show.
//! `bench/math` measures the differences in ulps.

use std::hint::black_box;

unsafe extern "C" {
    fn tgamma(x: f64) -> f64;
    fn lgamma_r(x: f64, sign: *mut i32) -> f64;
    fn erf(x: f64) -> f64;
    fn erfc(x: f64) -> f64;
    fn erff(x: f32) -> f32;
    fn exp10(x: f64) -> f64;
    fn fmod(x: f64, y: f64) -> f64;
    fn remainder(x: f64, y: f64) -> f64;
    fn nextafter(x: f64, y: f64) -> f64;
}

const F64_ARGS: [f64; 14] = [
    0.0,
    -0.0,
    0.5,
    -0.75,
    1.0,
    2.0,
    3.141592653589793,
    10.0,
    -33.25,
    1e-300,
    1e22,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

const F32_ARGS: [f32; 10] = [
    0.0,
    -0.5,
    0.75,
    1.0,
    3.0,
    -17.5,
    1e-30,
    1e10,
    f32::INFINITY,
    f32::NAN,
];

fn row64(name: &str, f: impl Fn(f64) -> f64) {
    let out: Vec<String> = F64_ARGS
        .iter()
        .map(|&x| format!("{:.11e}", f(black_box(x))))
        .collect();
    println!("{name}: {}", out.join(" "));
}

fn row32(name: &str, f: impl Fn(f32) -> f32) {
    let out: Vec<String> = F32_ARGS
        .iter()
        .map(|&x| format!("{:.5e}", f(black_box(x))))
        .collect();
    println!("{name}: {}", out.join(" "));
}

pub fn main() {
    row64("sin", f64::sin);
    row64("cos", f64::cos);
    row64("tan", f64::tan);
    row64("asin", f64::asin);
    row64("acos", f64::acos);
    row64("atan", f64::atan);
    row64("atan2(x, -1.5)", |x| x.atan2(-1.5));
    row64("sinh", f64::sinh);
    row64("cosh", f64::cosh);
    row64("tanh", f64::tanh);
    row64("asinh", f64::asinh);
    row64("acosh", f64::acosh);
    row64("atanh", f64::atanh);
    row64("exp", f64::exp);
    row64("exp2", f64::exp2);
    row64("exp_m1", f64::exp_m1);
    row64("ln", f64::ln);
    row64("log(x, 3)", |x| x.log(3.0));
    row64("log2", f64::log2);
    row64("log10", f64::log10);
    row64("ln_1p", f64::ln_1p);
    row64("powf(x, 1.7)", |x| x.powf(1.7));
    row64("powf(2.5, x)", |x| 2.5f64.powf(x));
    row64("powi(x, 7)", |x| x.powi(7));
    row64("powi(x, n)", |x| x.powi(black_box(-3)));
    row64("sqrt", f64::sqrt);
    row64("cbrt", f64::cbrt);
    row64("hypot(x, 4)", |x| x.hypot(4.0));
    row64("mul_add", |x| x.mul_add(1.25, -0.5));
    row64("sin_cos", |x| {
        let (s, c) = x.sin_cos();
        s + c
    });
    row64("to_degrees", f64::to_degrees);
    row64("rem_euclid", |x| x.rem_euclid(2.5));
    row64("x % 0.7", |x| x % 0.7);
    // SAFETY: the C math functions take plain values; lgamma_r writes one i32 through a
    // pointer to a local.
    unsafe {
        row64("tgamma", |x| tgamma(x));
        row64("lgamma_r", |x| {
            let mut sign = 0;
            lgamma_r(x, &mut sign) * f64::from(sign)
        });
        row64("erf", |x| erf(x));
        row64("erfc", |x| erfc(x));
        row64("exp10", |x| exp10(x));
        row64("fmod(x, 0.3)", |x| fmod(x, 0.3));
        row64("remainder(x, 0.3)", |x| remainder(x, 0.3));
        row64("nextafter(x, 0)", |x| nextafter(x, 0.0) - x);
    }

    row32("sinf", f32::sin);
    row32("cosf", f32::cos);
    row32("tanf", f32::tan);
    row32("asinf", f32::asin);
    row32("acosf", f32::acos);
    row32("atanf", f32::atan);
    row32("atan2f(x, 2)", |x| x.atan2(2.0));
    row32("sinhf", f32::sinh);
    row32("coshf", f32::cosh);
    row32("tanhf", f32::tanh);
    row32("expf", f32::exp);
    row32("exp2f", f32::exp2);
    row32("exp_m1f", f32::exp_m1);
    row32("lnf", f32::ln);
    row32("log2f", f32::log2);
    row32("log10f", f32::log10);
    row32("ln_1pf", f32::ln_1p);
    row32("powff(x, 0.3)", |x| x.powf(0.3));
    row32("powif(x, 5)", |x| x.powi(black_box(5)));
    row32("cbrtf", f32::cbrt);
    row32("hypotf(x, 2)", |x| x.hypot(2.0));
    // SAFETY: as above.
    row32("erff", |x| unsafe { erff(x) });
}
