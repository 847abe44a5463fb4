//! The host's ordering of stdout and stderr, before and after posted writes waited for room.

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
    r.assert_sound("waiting_parts_keep_every_piece_in_order");
}

/// The host and client of 600ca0b, at their budget. A two-piece write
/// is posted whole; while its second piece waits for a port, five one-piece writes
/// arrive after it, and the budget of four held pieces is reached: the fifth is refused,
/// that is, lost.
#[test]
fn posted_writes_past_the_budget_were_lost() {
    let r = check_tickets(&TicketConfig {
        writers: vec![vec![2], vec![1, 1, 1, 1, 1]],
        host: TicketConfig::today(),
    });
    let t = r.find("dropped output").expect("output is dropped");
    println!("{} states; dropped:\n{t}", r.states);
}

/// The fix: only one-piece writes are posted, and a posted piece the
/// host cannot hold stays on its port (the port waits, nothing is lost). Held back so,
/// the ports can all be taken by pieces waiting for one that needs a port itself (a
/// part's later piece, or a piece sent again): with no port kept for those, the output
/// stops for good.
#[test]
fn posted_pieces_held_on_their_ports_stop_without_continuation_ports() {
    let r = check_tickets(&TicketConfig {
        writers: vec![vec![3], vec![1, 1, 1]],
        host: TicketConfig::holding(0),
    });
    let t = r
        .find("deadlock")
        .or_else(|| r.find("stalled output"))
        .expect("the output stops");
    println!("{} states; stopped:\n{t}", r.states);
    assert!(r.find("dropped output").is_none());
}

/// The fix: with a port kept for the pieces whose tickets were taken
/// before (which the host never holds back), nothing is dropped, torn, reordered or
/// stalled, whatever the order, and every run ends, at and past the budget.
#[test]
fn posted_pieces_held_on_their_ports_lose_nothing_with_a_continuation_port() {
    for writers in [
        vec![vec![2], vec![1, 1, 1, 1, 1]],
        vec![vec![3], vec![1, 1, 1]],
        vec![vec![5], vec![1, 1], vec![3]],
    ] {
        let r = check_tickets(&TicketConfig {
            writers: writers.clone(),
            host: TicketConfig::holding(1),
        });
        for t in &r.violations {
            println!("{writers:?} {}:\n{t}", t.violation.kind());
        }
        println!("{writers:?}: {} states, {} correct ends", r.states, r.ends);
        assert!(r.violations.is_empty(), "{writers:?}");
        assert!(r.ends > 0);
    }
}
