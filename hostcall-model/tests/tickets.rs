//! The host's ordering of stdout and stderr (issue 19, B), before and after.

use hostcall_model::{TicketConfig, TicketHost, check_tickets};

/// Before: a write whose reservation spans more tickets than the window pushes the
/// short writes racing it out of the window, and the held budget fills: posted output
/// is refused, that is, lost.
#[test]
fn posting_every_write_whole_drops_output() {
    let r = check_tickets(&TicketConfig::standard(TicketHost::Dropping {
        window: 3,
        budget: 2,
    }));
    let t = r.find("dropped output").expect("output is dropped");
    println!("{} states; dropped:\n{t}", r.states);
}

/// Now: long writes go by DMA in their turn, or in parts whose pieces wait, and are
/// sent again on `EAGAIN`; nothing is dropped, torn, reordered or stalled, and every
/// run ends.
#[test]
fn waiting_parts_keep_every_piece_in_order() {
    let r = check_tickets(&TicketConfig::standard(TicketConfig::today()));
    for t in &r.violations {
        println!("{}:\n{t}", t.violation.kind());
    }
    println!("{} states, {} correct ends", r.states, r.ends);
    assert!(r.violations.is_empty());
    assert!(r.ends > 0);
}
