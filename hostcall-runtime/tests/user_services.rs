//! Declared services (`hostcall_client::service!`) and host closures, through the real
//! device half of the transport on the emulated backend: typed stubs, the check at load,
//! ids by number and by name, the default handler and the no-handler policy, closures.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::quiet;
use hostcall_abi::errno::{EACCES, ENOENT};
use hostcall_client::typed::{CallHostFn, HostFn};
use hostcall_client::{DeviceSlice, Errno, service};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{Error, KernelArg, Launch, Outcome};

service! {
    /// Every shape the wire carries.
    pub trait Store {
        /// A value by key.
        fn get(&self, key: &str) -> Result<u64, Errno>;
        /// Sets a value, under a fixed id.
        fn set(&self, key: &str, value: u64) -> () = 7;
        /// A float answer, inline.
        fn add(&self, a: f32, b: f32) -> f32;
        /// A value of 24 bytes, in the slot's words.
        fn triple(&self, x: u64) -> [u64; 3];
        /// A value of 128 bytes, in the bulk buffer.
        fn block(&self, seed: u32) -> [u64; 16];
        /// An output buffer the host fills, beside a u64 value.
        fn fill(&self, out: &mut [u8], byte: u8) -> usize;
        /// Three slices, each its own bulk part.
        fn concat_len(&self, a: &str, b: &[u8], c: &str) -> u32;
        /// A fixed part over 40 bytes, sent in the bulk buffer.
        fn wide(&self, a: [u64; 6], b: u32) -> u64;
        /// A service that cannot fail, whose host side panics for 0.
        fn strict(&self, x: u32) -> u32;
    }
}

#[derive(Default)]
struct HostStore {
    map: Mutex<std::collections::HashMap<String, u64>>,
}

impl Store for HostStore {
    fn get(&self, key: &str) -> Result<u64, Errno> {
        self.map
            .lock()
            .unwrap()
            .get(key)
            .copied()
            .ok_or(Errno(ENOENT))
    }
    fn set(&self, key: &str, value: u64) {
        self.map.lock().unwrap().insert(key.to_owned(), value);
    }
    fn add(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn triple(&self, x: u64) -> [u64; 3] {
        [x, x.wrapping_mul(3), !x]
    }
    fn block(&self, seed: u32) -> [u64; 16] {
        std::array::from_fn(|i| seed as u64 * 1000 + i as u64)
    }
    fn fill(&self, out: &mut [u8], byte: u8) -> usize {
        out.fill(byte);
        // Not the length the request carried: a value read from the wrong place shows.
        out.len() * 3
    }
    fn concat_len(&self, a: &str, b: &[u8], c: &str) -> u32 {
        assert!(a.starts_with('a') && b.iter().all(|&x| x == b'b') && c.starts_with('c'));
        (a.len() + b.len() + c.len()) as u32
    }
    fn wide(&self, a: [u64; 6], b: u32) -> u64 {
        a.iter().sum::<u64>() + b as u64
    }
    fn strict(&self, x: u32) -> u32 {
        assert!(x != 0, "strict(0)");
        x + 1
    }
}

/// Runs `kernel` on `blocks` x `threads` emulated threads of `mode` that use `Store`.
fn run_store(
    host: hostcall_runtime::HostBuilder,
    mode: WarpMode,
    blocks: u32,
    threads: u32,
    kernel: impl Fn(&EmuThread) + Send + Sync + 'static,
) -> hostcall_runtime::Result<hostcall_runtime::RunReport> {
    let mut m = EmulatedModule::new(mode)
        .uses(<dyn Store>::SERVICES)
        .kernel("k", kernel);
    host.build()?
        .run(&mut m, &Launch::linear("k", blocks, threads, vec![]))
}

#[test]
fn typed_stubs_carry_every_shape_both_ways_from_every_lane() {
    for mode in [WarpMode::Independent, WarpMode::Lockstep] {
        let errors = Arc::new(AtomicU64::new(0));
        let e = errors.clone();
        let host = quiet().serve::<dyn Store, _>(HostStore::default());
        let r = run_store(host, mode, 2, 64, move |t| {
            let s = t.client::<dyn Store>();
            let me = t.block * 64 + t.thread;
            let key = format!("k{me}");
            let mut ok = s.get(&key) == Err(Errno(ENOENT));
            s.set(&key, me as u64 * 10);
            ok &= s.get(&key) == Ok(me as u64 * 10);
            ok &= s.add(me as f32, 0.5) == me as f32 + 0.5;
            let x = u64::MAX - me as u64;
            ok &= s.triple(x) == [x, x.wrapping_mul(3), !x];
            ok &= s.block(me) == std::array::from_fn(|i| me as u64 * 1000 + i as u64);
            let mut buf = vec![0u8; 100 + me as usize];
            ok &= s.fill(&mut buf, me as u8) == buf.len() * 3 && buf.iter().all(|&b| b == me as u8);
            let b = vec![b'b'; me as usize];
            ok &= s.concat_len("aa", &b, "ccc") == 5 + me;
            ok &= s.wide([1, 2, 3, 4, 5, me as u64], 7) == 22 + me as u64;
            if !ok {
                e.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
        assert_eq!(r.outcome, Outcome::Completed, "{mode:?}");
        assert_eq!(errors.load(Ordering::Relaxed), 0, "{mode:?}");
        assert_eq!(r.calls, 128 * 9, "{mode:?}");
    }
}

mod other_version {
    use hostcall_client::{Errno, service};

    service! {
        /// `Store` as another version of its declaration has it: `get` returns a u32.
        pub trait Store {
            fn get(&self, key: &str) -> Result<u32, Errno>;
        }
    }

    pub struct Old;

    impl Store for Old {
        fn get(&self, _key: &str) -> Result<u32, Errno> {
            Ok(0)
        }
    }
}

#[test]
fn a_service_served_with_another_signature_is_refused_at_load_naming_both() {
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    let err = run_store(
        quiet().serve::<dyn other_version::Store, _>(other_version::Old),
        WarpMode::Independent,
        1,
        1,
        move |_| {
            r.fetch_add(1, Ordering::Relaxed);
        },
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Service(_)), "{text}");
    assert!(
        text.contains("`Store.get`")
            && text.contains("fn get(&self, key: &str) -> Result<u64, Errno>")
            && text.contains("fn get(&self, key: &str) -> Result<u32, Errno>"),
        "{text}"
    );
    assert_eq!(ran.load(Ordering::Relaxed), 0, "no kernel ran");
}

#[test]
fn a_service_the_host_does_not_serve_is_refused_at_load() {
    let err = run_store(quiet(), WarpMode::Independent, 1, 1, |_| {}).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("calls service `Store.get`") && text.contains("does not serve"),
        "{text}"
    );
}

#[test]
fn services_by_name_get_ids_at_load_and_fixed_ids_keep_theirs() {
    let ids = Arc::new(Mutex::new(Vec::new()));
    let i = ids.clone();
    let host = quiet().serve::<dyn Store, _>(HostStore::default());
    let r = run_store(host, WarpMode::Independent, 1, 1, move |t| {
        let s = t.client::<dyn Store>();
        s.set("x", 5);
        i.lock().unwrap().push(s.get("x"));
    })
    .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(*ids.lock().unwrap(), [Ok(5)]);
    let sigs = <dyn Store>::SERVICES;
    assert_eq!(sigs[1].id, 7, "set's fixed id");
    assert_eq!(sigs[0].id, hostcall_abi::typed::UNBOUND, "get goes by name");
    assert_ne!(sigs[0].fingerprint, sigs[1].fingerprint);
}

service! {
    /// Services the host serves only through its default handler.
    pub trait Unserved9 {
        /// A fixed id nobody registers.
        fn nine(&self, x: u32) -> Result<u32, Errno> = 9;
    }
}

#[test]
fn the_default_handler_catches_ids_nobody_serves() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let host = quiet().default_handler(move |c| {
        s.lock().unwrap().push((c.id, c.block, c.thread));
        if c.id == 9 {
            Ok(99)
        } else {
            Err(Errno(EACCES))
        }
    });
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Unserved9>::SERVICES)
        .kernel("k", move |t: &EmuThread| {
            let typed = t.client::<dyn Unserved9>().nine(1);
            let raw = t.channel().call::<Emu>(12345, [0; 6], &[], &mut [], None);
            g.lock().unwrap().push((typed, raw.result));
        });
    let r = host
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(*got.lock().unwrap(), [(Ok(99), -(EACCES as i64))]);
    assert_eq!(*seen.lock().unwrap(), [(9, 0, 0), (12345, 0, 0)]);
}

#[test]
fn a_call_nobody_serves_halts_the_run_by_default_naming_thread_and_id() {
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", |t: &EmuThread| {
        if t.thread == 3 {
            t.channel().call::<Emu>(4242, [0; 6], &[], &mut [], None);
        }
    });
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 8, vec![]))
        .unwrap();
    let Outcome::Faulted(why) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!(
        why.contains("(block 0, thread 3)") && why.contains("0x1092") && why.contains("halts"),
        "{why}"
    );
}

#[test]
fn a_failure_of_a_service_that_cannot_fail_ends_the_launch_naming_it() {
    let host = quiet().serve::<dyn Store, _>(HostStore::default());
    let r = run_store(host, WarpMode::Independent, 1, 4, |t| {
        let s = t.client::<dyn Store>();
        assert_eq!(s.strict(5), 6);
        if t.thread == 2 {
            s.strict(0);
            unreachable!("strict(0) cannot return");
        }
    })
    .unwrap();
    let Outcome::Faulted(why) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!(
        why.contains("(block 0, thread 2)")
            && why.contains("`Store.strict`")
            && why.contains("EIO"),
        "{why}"
    );
}

#[test]
fn a_host_closure_is_called_from_every_thread_with_typed_arguments() {
    let mut host = quiet().build().unwrap();
    let add42 = host.hostcall(|x: f32| x + 42.0);
    let scale = host.hostcall(|x: u64, by: u32| -> Result<u64, Errno> {
        x.checked_mul(by as u64)
            .ok_or(Errno(hostcall_abi::errno::ERANGE))
    });
    let wrong = Arc::new(AtomicU64::new(0));
    let w = wrong.clone();
    let mut m = EmulatedModule::new(WarpMode::Lockstep).kernel("k", move |t: &EmuThread| {
        let [KernelArg::U64(a), KernelArg::U64(s)] = t.args[..] else {
            panic!("two handles")
        };
        let add42 = HostFn::<(f32,), f32>::from_raw(a);
        let scale = HostFn::<(u64, u32), Result<u64, Errno>>::from_raw(s);
        let x = (t.block * 64 + t.thread) as f32;
        let ok = add42.call_on::<Emu>(t.channel(), (x,)) == x + 42.0
            && scale.call_on::<Emu>(t.channel(), (t.thread as u64, 3)) == Ok(t.thread as u64 * 3)
            && scale.call_on::<Emu>(t.channel(), (u64::MAX, 2))
                == Err(Errno(hostcall_abi::errno::ERANGE));
        if !ok {
            w.fetch_add(1, Ordering::Relaxed);
        }
    });
    let args = vec![KernelArg::U64(add42.raw()), KernelArg::U64(scale.raw())];
    let r = host.run(&mut m, &Launch::linear("k", 2, 64, args)).unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    assert_eq!(r.calls, 128 * 3);
}

#[test]
fn a_closure_handle_used_with_other_types_is_refused() {
    let mut host = quiet().build().unwrap();
    let add42 = host.hostcall(|x: f32| x + 42.0);
    let mut m = EmulatedModule::new(WarpMode::Independent).kernel("k", move |t: &EmuThread| {
        let KernelArg::U64(raw) = t.args[0] else {
            panic!()
        };
        // The handle of an f32 closure, called as if it took and returned i32.
        let as_int = HostFn::<(i32,), Result<i32, Errno>>::from_raw(raw);
        assert_eq!(
            as_int.call_on::<Emu>(t.channel(), (1,)),
            Err(Errno(hostcall_abi::errno::EINVAL))
        );
    });
    let r = host
        .run(
            &mut m,
            &Launch::linear("k", 1, 1, vec![KernelArg::U64(add42.raw())]),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
}

#[test]
fn the_summary_counts_calls_errors_and_time_per_service() {
    let host = quiet()
        .summary(true)
        .serve::<dyn Store, _>(HostStore::default());
    let r = run_store(host, WarpMode::Independent, 1, 4, |t| {
        let s = t.client::<dyn Store>();
        let _ = s.get("missing");
        s.set("k", 1);
        let _ = s.get("k");
    })
    .unwrap();
    let table = r.summary.expect("a summary");
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in\n{table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(line("Store.get")[1..3], ["8", "4"], "{table}");
    assert_eq!(line("Store.set")[1..3], ["4", "0"], "{table}");
}

service! {
    /// Data passed by device address.
    pub trait Summer {
        /// The sum of the bytes.
        fn sum(&self, data: DeviceSlice<'_>) -> Result<u64, Errno>;
    }
}

struct HostSummer;

impl Summer for HostSummer {
    fn sum(&self, data: DeviceSlice<'_>) -> Result<u64, Errno> {
        let mut total = 0u64;
        data.read(&mut |b| total += b.iter().map(|&x| x as u64).sum::<u64>())?;
        Ok(total)
    }
}

#[test]
fn device_pointers_inside_the_launch_heap_are_read_and_others_refused() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Summer>::SERVICES)
        .kernel("k", move |t: &EmuThread| {
            // 100,000 bytes in the launch's device heap (emulated: host memory), more than
            // any bulk buffer holds.
            let n = 100_000;
            // SAFETY: the heap is the launch's, at least 1 MiB, and no one else uses it
            // in this test's one-thread launch.
            let heap =
                unsafe { std::slice::from_raw_parts_mut(t.config().heap_base as *mut u8, n) };
            heap.iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = (i % 7) as u8);
            let s = t.client::<dyn Summer>();
            let inside = s.sum(DeviceSlice::new(heap));
            let local = vec![1u8; 64];
            let outside = s.sum(DeviceSlice::new(&local));
            g.lock().unwrap().push((inside, outside));
        });
    let r = quiet()
        .serve::<dyn Summer, _>(HostSummer)
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let expected: u64 = (0..100_000u64).map(|i| i % 7).sum();
    assert_eq!(
        *got.lock().unwrap(),
        [(Ok(expected), Err(Errno(hostcall_abi::errno::EINVAL)))]
    );
}

/// std's declared services are served by every host: a module that calls them (as every
/// std program does through `getpid`) loads without the embedder serving anything.
#[test]
fn modules_calling_std_declared_services_load_on_any_host() {
    use hostcall_abi::std_services::Identity;
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(<dyn Identity>::SERVICES)
        .kernel("k", move |t: &EmuThread| {
            *g.lock().unwrap() = Some(t.client::<dyn Identity>().getpid());
        });
    let r = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(*got.lock().unwrap(), Some(std::process::id() as i32));
}

/// A declared `&mut [u8]` output of more than one lane's bulk buffer
/// (4 KiB). A thread calling alone got all of it (`Ok(8192)` here) and one sharing its
/// packet `EINVAL`: the answer depended on which threads happened to call together. The
/// stub now cuts the buffer to what any packet carries, so every lane gets the same
/// short answer, as a short `read` does.
#[test]
fn a_large_output_buffer_gets_the_same_answer_alone_and_in_a_packet() {
    for (mode, threads) in [(WarpMode::Independent, 1), (WarpMode::Lockstep, 2)] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let host = quiet().serve::<dyn Store, _>(HostStore::default());
        let r = run_store(host, mode, 1, threads, move |t| {
            let mut buf = vec![0u8; 8192];
            let n = t.client::<dyn Store>().fill(&mut buf, 9);
            let filled = buf.iter().take_while(|&&b| b == 9).count();
            g.lock().unwrap().push((n, filled));
        })
        .unwrap();
        assert_eq!(r.outcome, Outcome::Completed, "{mode:?}");
        let per_lane = hostcall_abi::BULK_PER_LANE;
        assert!(
            got.lock()
                .unwrap()
                .iter()
                .all(|&g| g == (per_lane * 3, per_lane)),
            "{mode:?}: {:?}",
            got.lock().unwrap()
        );
    }
}

/// A module's service names and declarations are the GPU program's
/// bytes; the load error that quotes them reached the operator's terminal raw (an
/// escape sequence clears the screen). Now they are quoted escaped.
#[test]
fn a_modules_service_names_reach_load_errors_escaped() {
    static EVIL: [hostcall_abi::typed::Signature; 1] = [hostcall_abi::typed::Signature {
        name: "Evil.\x1b[2Jname",
        text: "fn x(&self)\r\n",
        id: hostcall_abi::typed::UNBOUND,
        fingerprint: 1,
        reads_input: false,
        waits: hostcall_abi::typed::Waits::Never,
        answer: hostcall_abi::typed::AnswerBytes::Nothing,
    }];
    let mut m = EmulatedModule::new(WarpMode::Independent)
        .uses(&EVIL)
        .kernel("k", |_| {});
    let err = quiet()
        .build()
        .unwrap()
        .run(&mut m, &Launch::linear("k", 1, 1, vec![]))
        .unwrap_err()
        .to_string();
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
    assert!(err.contains(r"Evil.\x1b[2Jname"), "{err}");
}
