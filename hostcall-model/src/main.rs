//! `hostcall-model [v1 | v1-recheck | v2]`: explores the protocol in the standard
//! configuration and prints each violation with its shortest trace. Exits 1 if any.

use std::process::ExitCode;

use hostcall_model::{Config, Protocol, check};

fn main() -> ExitCode {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "v2".into());
    let protocol = match arg.as_str() {
        "v1" => Protocol::V1 { recheck: false },
        "v1-recheck" => Protocol::V1 { recheck: true },
        "v2" => Protocol::V2,
        other => {
            eprintln!("hostcall-model: unknown protocol {other:?} (v1, v1-recheck or v2)");
            return ExitCode::from(2);
        }
    };
    let report = check(&Config::standard(protocol));
    println!(
        "{protocol:?}: {} states, {} correct ends, {} kinds of violation",
        report.states,
        report.ends,
        report.violations.len()
    );
    for t in &report.violations {
        println!("\n{}:\n{t}", t.violation.kind());
    }
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
