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

/// What the GPU sees of its heap, and what asking for more gives, from one thread.
fn heap_seen(
    mut m: EmulatedModule,
    kernel: &str,
    asks: &'static [u64],
) -> (Vec<u64>, EmulatedModule) {
    use hostcall_abi::std_services::Memory;
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    m = m.kernel(kernel, move |t: &EmuThread| {
        // SAFETY: the host allocated the launch's LaunchState, atomics only.
        let state = unsafe { &*(t.config().launch_state as *const hostcall_abi::LaunchState) };
        let mut s = s.lock().unwrap();
        s.push(state.heap_mapped.load(std::sync::atomic::Ordering::Acquire));
        for &to in asks {
            s.push(match t.client::<dyn Memory>().grow_heap(to) {
                Ok(n) => n,
                Err(e) => u64::MAX - e.0 as u64,
            });
        }
    });
    let host = quiet().heap_bytes(8 << 20).build().unwrap();
    let r = host
        .run(&mut m, &Launch::linear(kernel, 1, 1, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let seen = seen.lock().unwrap().clone();
    (seen, m)
}

#[test]
fn a_heap_backed_in_part_says_so_and_grows_when_the_gpu_asks() {
    const EINVAL: u64 = u64::MAX - hostcall_abi::errno::EINVAL as u64;
    let m = EmulatedModule::new(WarpMode::Independent).backing_heap(1 << 20);
    let (seen, m) = heap_seen(m, "k", &[1 << 20, 3 << 20, (2 << 20) + 1, 9 << 20]);
    assert_eq!(
        seen,
        [1 << 20, 1 << 20, 3 << 20, 3 << 20, EINVAL],
        "backed at the launch; asked within it; asked past it; asked less; past the heap"
    );
    assert_eq!(
        m.heap_grown(),
        1,
        "only the request past what was backed backs more"
    );
}

#[test]
fn a_heap_allocated_whole_is_backed_whole() {
    let (seen, _) = heap_seen(EmulatedModule::new(WarpMode::Independent), "k", &[8 << 20]);
    assert_eq!(seen, [8 << 20, 8 << 20]);
}

#[test]
fn a_binarys_launch_finds_the_main_threads_frame_stack_backed() {
    use hostcall_abi::{FRAME_STACK_BYTES, HEAP_RESERVED, START_KERNEL};
    // The main thread takes its stack before it could ask for memory.
    let m = EmulatedModule::new(WarpMode::Independent).backing_heap(4096);
    let (seen, _) = heap_seen(m, START_KERNEL, &[]);
    assert!(
        seen[0] >= (HEAP_RESERVED + FRAME_STACK_BYTES) as u64,
        "{seen:?}"
    );
}
