//! The protocol model check, as CI runs it: today's protocol must pass, the first one
//! must be caught with the packet-mixing race (bug 1 of the transport review), and the
//! runtime's pooled host must be caught with the late `response` store.

use hostcall_model::{CallKind, Config, HostModel, Protocol, Report, check};

fn show(name: &str, r: &Report) {
    println!("{name}: {r}");
}

#[test]
fn v2_holds_every_invariant_in_the_standard_configuration() {
    let r = check(&Config::standard(Protocol::V2));
    show("v2", &r);
    assert!(r.violations.is_empty());
    assert!(r.ends > 0, "some run ends correctly");
    assert!(r.states > 1_000_000, "the whole space was explored");
}

#[test]
fn v1_mixes_posted_and_waiting_lanes_and_hands_out_an_unanswered_slot() {
    let r = check(&Config::standard(Protocol::V1 { recheck: false }));
    show("v1", &r);
    let early = r.find("early release").expect("bug 1 is found");
    let text = early.to_string();
    assert!(
        text.contains("posted calls: {0}") && text.contains("activemask = {0,1}"),
        "a packet of a posted and a waiting lane:\n{text}"
    );
    assert!(
        early.steps.last().unwrap().ends_with("Publish"),
        "the posted leader releases the port at its publication:\n{text}"
    );
    let wrong = r.find("wrong reply").expect("a lane reads a wrong answer");
    assert!(wrong.to_string().contains("ReadSlot"), "{wrong}");
}

#[test]
fn v1s_slot_recheck_turns_the_wrong_reply_into_a_stall() {
    let r = check(&Config::standard(Protocol::V1 { recheck: true }));
    show("v1 with recheck", &r);
    assert!(r.find("early release").is_some());
    assert!(r.find("wrong reply").is_none(), "the recheck hides it");
    assert!(r.find("deadlock").is_some(), "as a lane that waits forever");
}

#[test]
fn v1_is_sound_when_no_packet_mixes_posted_and_waiting_lanes() {
    // No false alarms: with every call waiting, the first protocol is correct.
    let config = Config {
        protocol: Protocol::V1 { recheck: false },
        host: HostModel::Atomic,
        main: vec![vec![CallKind::Waiting; 2]; 3],
        foreign: vec![(1, vec![CallKind::Waiting])],
        ..Config::standard(Protocol::V1 { recheck: false })
    };
    let r = check(&config);
    show("v1, waiting calls only", &r);
    assert!(r.violations.is_empty());
    assert!(r.ends > 0);
}

/// A warp that reads a file (a waiting call, served on the pool) and prints twice, with
/// a second lane and a foreign lane whose calls may be either.
fn pooled(response_at_handover: bool) -> Config {
    use CallKind::{Either, Posted, Waiting};
    Config {
        protocol: Protocol::V2,
        host: HostModel::Pooled {
            response_at_handover,
        },
        main: vec![vec![Waiting, Posted, Posted], vec![Either]],
        foreign: vec![(1, vec![Either])],
        ..Config::standard(Protocol::V2)
    }
}

#[test]
fn v2_with_the_runtimes_pooled_host_holds_every_invariant_in_the_standard_configuration() {
    let r = check(&Config {
        host: HostModel::Pooled {
            response_at_handover: true,
        },
        ..Config::standard(Protocol::V2)
    });
    show("v2, pooled host", &r);
    assert!(r.violations.is_empty());
    assert!(r.ends > 0 && r.states > 1_000_000);
}

#[test]
fn the_pooled_host_deadlocks_when_the_pool_stores_response_after_its_answers() {
    let r = check(&pooled(false));
    show(
        "v2, pool stores response last (the runtime before the late store)",
        &r,
    );
    let t = r
        .find("deadlock")
        .expect("the late response store is found");
    let text = t.to_string();
    let inline = text.find("host: response = 2").expect(&text);
    let late = text.find("pool: response = 1").expect(&text);
    assert!(
        inline < late,
        "the pool's store of 1 lands after the consumer's 2:\n{text}"
    );
}

#[test]
fn the_pooled_host_holds_every_invariant_when_the_consumer_stores_response_at_handover() {
    let r = check(&pooled(true));
    show(
        "v2, the consumer stores response as it hands the packet over",
        &r,
    );
    assert!(r.violations.is_empty());
    assert!(r.ends > 0);
}
