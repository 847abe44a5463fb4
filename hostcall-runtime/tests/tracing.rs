//! `HOSTCALL_DEBUG=1` traces hostcalls for every embedder, not only those that set up a
//! logger themselves (the porting guide's host binary did not, and printed nothing).
//! A test binary of its own: the logger is process-wide.

use hostcall_runtime::Host;

#[test]
fn a_tracing_host_sets_up_logging_when_the_embedder_did_not() {
    assert!(
        !log::log_enabled!(target: "hostcall", log::Level::Info),
        "nothing has set up a logger yet"
    );
    let _host = Host::builder().trace(true).build().unwrap();
    assert!(log::log_enabled!(target: "hostcall", log::Level::Info));
}
