//! `hostcall-model [v1 | v1-recheck | v2] [atomic | pooled | pooled-late]`: explores the
//! protocol in the standard configuration, with the host served as `HostModel` says
//! (`pooled` is the runtime's server at 600ca0b, `pooled-late` the one before its
//! late `response` store), and prints each violation with its shortest trace. Exits 1 if any.
//!
//! `hostcall-model holding`: today's server (`HostModel::Holding`) in `Config::holding`'s
//! scope, a stop explored at every step.
//!
//! `hostcall-model tickets [waiting | dropping]`: the same for the host's ordering of
//! posted output (`waiting` is today's, `dropping` the one before posted writes waited for room).
//!
//! `hostcall-model resources [today | c839d74]`: the host's bounded resources in
//! `ResourceConfig::mixed` (a reader that may stall for good), under today's rules or
//! those of c839d74.
//!
//! `hostcall-model streams [wait | drop | unfenced | offset]`: the same for the
//! tagged-stream ring (`unfenced` leaves out the writer's fence, `offset` the header's
//! lap).

use std::process::ExitCode;

use hostcall_model::{
    Config, HeaderCheck, Holding, HostModel, Protocol, Report, ResourceConfig, Rules, StreamConfig,
    TicketConfig, TicketHost, WhenFull, check, check_resources, check_streams, check_tickets,
};

fn main() -> ExitCode {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "v2".into());
    if arg == "holding" {
        let config = Config::holding(Holding::today());
        return print("Holding::today() on two ports", &check(&config));
    }
    if arg == "tickets" {
        let host = match std::env::args().nth(2).as_deref().unwrap_or("waiting") {
            "waiting" => TicketConfig::today(),
            "dropping" => TicketHost::Dropping {
                window: 3,
                budget: 2,
            },
            other => {
                eprintln!("hostcall-model: unknown ticket host {other:?} (waiting or dropping)");
                return ExitCode::from(2);
            }
        };
        return print(
            &format!("{host:?}"),
            &check_tickets(&TicketConfig::standard(host)),
        );
    }
    if arg == "resources" {
        let rules = match std::env::args().nth(2).as_deref().unwrap_or("today") {
            "today" => Rules::today(),
            "c839d74" => Rules::c839d74(),
            other => {
                eprintln!("hostcall-model: unknown rules {other:?} (today or c839d74)");
                return ExitCode::from(2);
            }
        };
        return print(
            &format!("{rules:?}"),
            &check_resources(&ResourceConfig::mixed(rules)),
        );
    }
    if arg == "streams" {
        let wait = StreamConfig::standard(WhenFull::Wait);
        let config = match std::env::args().nth(2).as_deref().unwrap_or("wait") {
            "wait" => wait,
            "drop" => StreamConfig::standard(WhenFull::Drop),
            "unfenced" => StreamConfig {
                fenced: false,
                ..wait
            },
            "offset" => StreamConfig {
                check: HeaderCheck::Offset,
                ..wait
            },
            other => {
                eprintln!(
                    "hostcall-model: unknown stream ring {other:?} (wait, drop, unfenced or offset)"
                );
                return ExitCode::from(2);
            }
        };
        return print(&format!("{config:?}"), &check_streams(&config));
    }
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
    print(&format!("{protocol:?}, {host:?}"), &report)
}

/// Prints what was explored and each violation's trace; fails if there is one.
fn print(what: &str, report: &Report) -> ExitCode {
    println!("{what}: {report}");
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
