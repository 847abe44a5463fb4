//! The protocol model check, as CI runs it: today's protocol must pass, the first one
//! must be caught with the packet-mixing race (bug 1 of the transport review).

use hostcall_model::{CallKind, Config, Protocol, Report, check};

fn show(name: &str, r: &Report) {
    println!(
        "{name}: {} states, {} correct ends, violations: {:?}",
        r.states,
        r.ends,
        r.violations
            .iter()
            .map(|t| t.violation.kind())
            .collect::<Vec<_>>()
    );
    for t in &r.violations {
        println!("{}:\n{t}", t.violation.kind());
    }
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
        main: vec![vec![CallKind::Waiting; 2]; 3],
        foreign: vec![(1, vec![CallKind::Waiting])],
    };
    let r = check(&config);
    show("v1, waiting calls only", &r);
    assert!(r.violations.is_empty());
    assert!(r.ends > 0);
}
