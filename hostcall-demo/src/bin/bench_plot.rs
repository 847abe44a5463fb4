//! `bench_plot IN.json OUT.svg`: draws `hostcall_bench`'s sweep, null hostcalls per
//! second and `println!` lines per second against launched threads (log–log), with the
//! CUDA C references of the same run marked, as a self-contained SVG.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;

const W: f64 = 840.0;
const H: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 280.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = &args[..] else {
        eprintln!("usage: bench_plot IN.json OUT.svg");
        return ExitCode::from(2);
    };
    match std::fs::read_to_string(input)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
        .and_then(|doc| plot(&doc))
        .and_then(|svg| std::fs::write(output, svg).map_err(|e| e.to_string()))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_plot: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Maps a value onto a log axis of `[lo, hi]` decades spanning `len` pixels.
fn log_pos(v: f64, lo: f64, hi: f64, len: f64) -> f64 {
    (v.log10() - lo) / (hi - lo) * len
}

fn plot(doc: &Value) -> Result<String, String> {
    let sweep = doc["sweep"].as_array().ok_or("no \"sweep\" in the JSON")?;
    let series = |key: &str| -> Vec<(f64, f64)> {
        sweep
            .iter()
            .filter_map(|p| Some((p["threads"].as_f64()?, p[key].as_f64()?)))
            .collect()
    };
    let null = series("null_calls_per_s");
    let lines = series("println_lines_per_s");
    let limits = &doc["limits"];
    let refs: Vec<(f64, f64, &str)> = [
        (33792.0, "cuda_printf_lines_per_s", "CUDA printf"),
        (270336.0, "cuda_printf_lines_per_s_1056x256", "CUDA printf"),
    ]
    .into_iter()
    .filter_map(|(x, k, name)| Some((x, limits[k].as_f64()?, name)))
    .collect();
    let flag = limits["flag_roundtrips_per_s_132_channels"].as_f64();

    let all_y = null
        .iter()
        .chain(&lines)
        .map(|p| p.1)
        .chain(refs.iter().map(|r| r.1));
    let (ymin, ymax) = all_y.fold((f64::MAX, 0f64), |(a, b), y| (a.min(y), b.max(y)));
    if null.is_empty() || ymax <= 0.0 {
        return Err("the sweep is empty".into());
    }
    let (ylo, yhi) = ((ymin.log10() - 0.1).floor(), (ymax.log10() + 0.1).ceil());
    let (xlo, xhi) = (1.0, 6.0);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |v: f64| LEFT + log_pos(v, xlo, xhi, pw);
    let y = |v: f64| TOP + ph - log_pos(v, ylo, yhi, ph);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let title = format!(
        "hostcall_bench on {} ({}, commit {})",
        doc["hardware"]["gpu"].as_str().unwrap_or("?"),
        doc["date"].as_str().unwrap_or("?"),
        doc["commit"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="24" font-size="14">{title}</text>"#
    );
    for d in xlo as i32..=xhi as i32 {
        let px = x(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{px}" y1="{TOP}" x2="{px}" y2="{}" stroke="#ddd"/><text x="{px}" y="{}" text-anchor="middle">1e{d}</text>"##,
            TOP + ph,
            TOP + ph + 18.0
        );
    }
    for d in ylo as i32..=yhi as i32 {
        let py = y(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{py}" x2="{}" y2="{py}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">1e{d}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            py + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">GPU threads launched (one warp … 1056 × 256)</text>"#,
        LEFT + pw / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">per second</text>"#,
        TOP + ph / 2.0
    );
    let mut legend = TOP + 10.0;
    let mut entry = |s: &mut String, color: &str, dash: &str, name: &str| {
        let lx = LEFT + pw + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{legend}" x2="{}" y2="{legend}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="{}">{name}</text>"#,
            lx + 24.0,
            lx + 30.0,
            legend + 4.0
        );
        legend += 20.0;
    };
    for (points, color, name) in [
        (&null, "#1f77b4", "null hostcalls (lane-calls)"),
        (&lines, "#d62728", "println! lines"),
    ] {
        let path: Vec<String> = points
            .iter()
            .map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for &(px, py) in points.iter() {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                x(px),
                y(py)
            );
        }
        entry(&mut s, color, "none", name);
    }
    for (px, py, _) in &refs {
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="#ff7f0e"/>"##,
            x(*px) - 4.0,
            y(*py) - 4.0
        );
    }
    if !refs.is_empty() {
        entry(&mut s, "#ff7f0e", "none", "CUDA printf (same run)");
    }
    if let Some(f) = flag {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#2ca02c" stroke-dasharray="6,4"/>"##,
            y(f),
            LEFT + pw
        );
        entry(&mut s, "#2ca02c", "6,4", "CUDA C flag round trips,");
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">132 channels, 1 host thread</text>"#,
            LEFT + pw + 44.0,
            legend - 4.0
        );
    }
    s.push_str("</svg>\n");
    Ok(s)
}
