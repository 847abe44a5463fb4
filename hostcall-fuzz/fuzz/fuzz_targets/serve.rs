//! Every request a kernel could write into a port, served against a seeded root.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz::run(data));
