//! `hostcall-model [v1 | v1-recheck | v2] [atomic | pooled | pooled-late]`: explores the
//! protocol in the standard configuration, with the host served as `HostModel` says
//! (`pooled` is the runtime's server, `pooled-late` the one before issue 19), and prints
//! each violation with its shortest trace. Exits 1 if any.

use std::process::ExitCode;

use hostcall_model::{Config, HostModel, Protocol, check};

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
    let host = match std::env::args().nth(2).as_deref().unwrap_or("atomic") {
        "atomic" => HostModel::Atomic,
        "pooled" => HostModel::Pooled {
            response_at_handover: true,
        },
        "pooled-late" => HostModel::Pooled {
            response_at_handover: false,
        },
        other => {
            eprintln!("hostcall-model: unknown host {other:?} (atomic, pooled or pooled-late)");
            return ExitCode::from(2);
        }
    };
    let report = check(&Config {
        host,
        ..Config::standard(protocol)
    });
    println!(
        "{protocol:?}, {host:?}: {} states, {} correct ends, {} kinds of violation",
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
