//! A launch's memory (its ports, heap, thread areas, stream rings) goes when the launch
//! ends. It stayed until the module was dropped: a program launching one module many
//! times (the benchmark: about a hundred launches) held every launch's 256 MiB heap, and
//! a larger heap would run the GPU out of memory.

mod common;

use common::quiet;
use hostcall_emulator::{EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::stream::{Callbacks, StreamSpec};
use hostcall_runtime::{KernelArg, Launch, Outcome};

#[test]
fn a_module_holds_no_launchs_memory_once_it_ended() {
    let mut host = quiet().heap_bytes(8 << 20).build().unwrap();
    let stream = host.stream(StreamSpec::default(), Callbacks::new());
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |_: &EmuThread| {});
    let launch = Launch::linear("k", 2, 32, vec![KernelArg::Stream(stream)]);
    for _ in 0..5 {
        let r = host.run(&mut m, &launch).unwrap();
        assert_eq!(r.outcome, Outcome::Completed);
        assert_eq!(m.allocated_bytes(), 0, "memory left after a launch");
    }
}

#[test]
fn a_service_reading_after_its_launch_ended_gets_an_error_not_freed_memory() {
    use hostcall_runtime::GpuModule;
    let mut m = EmulatedModule::new(WarpMode::Independent);
    let addr = m.alloc_device_zeroed(64).unwrap();
    let reader = m.device_memory();
    let mut got = Vec::new();
    let (n, stop) = reader.stream(addr, 64, &mut |b| {
        got.extend_from_slice(b);
        Ok(())
    });
    assert_eq!((n, stop.is_none(), got.len()), (64, true, 64));
    m.end_launch();
    assert_eq!(m.allocated_bytes(), 0);
    let (n, stop) = reader.stream(addr, 64, &mut |_| panic!("read freed memory"));
    assert_eq!(n, 0);
    assert!(
        matches!(&stop, Some(hostcall_runtime::StreamStop::Copy(why)) if why.contains("ended")),
        "{stop:?}"
    );
}
