//! Issue 16's tagged streams, before they are built: the ring protocol of
//! `hostcall_model::check_streams` holds with a fence and a header that names its
//! position, and each of the two is needed.

use hostcall_model::{HeaderCheck, StreamConfig, WhenFull, check_streams};

#[test]
fn a_fenced_ring_delivers_every_message_whole_and_in_order_while_writers_wait() {
    let r = check_streams(&StreamConfig::standard(WhenFull::Wait));
    println!("{} states, {} ends", r.states, r.ends);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(
        r.ends > 0 && r.states > 10_000,
        "explored {} states",
        r.states
    );
}

#[test]
fn dropping_counts_every_message_that_does_not_arrive() {
    let r = check_streams(&StreamConfig::standard(WhenFull::Drop));
    println!("{} states, {} ends", r.states, r.ends);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(r.ends > 0);
}

#[test]
fn without_the_fence_the_host_takes_a_message_before_its_words_arrive() {
    let r = check_streams(&StreamConfig {
        fenced: false,
        ..StreamConfig::standard(WhenFull::Wait)
    });
    let t = r.find("torn message").expect("a torn message");
    println!("{t}");
}

#[test]
fn a_header_without_its_lap_lets_the_host_take_a_record_from_the_ring_s_last_lap() {
    let r = check_streams(&StreamConfig {
        check: HeaderCheck::Offset,
        ..StreamConfig::standard(WhenFull::Wait)
    });
    for t in &r.violations {
        println!("{}:\n{t}", t.violation.kind());
    }
    // With the fence in place, only a stale header can give the host words that are
    // not the record's, or another record than the one it expects.
    assert!(r.find("torn message").is_some() && r.find("output out of order").is_some());
}
