//! Every request a kernel's threads could make through the client, as a launch with a
//! short time limit: `Host::run` must return within it plus a second.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz::run_launch(
    data,
    hostcall_fuzz::RETURN_GRACE
));
