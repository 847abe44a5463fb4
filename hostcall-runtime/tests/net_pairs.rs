//! Many GPU threads using sockets at once, in pairs: 512 threads exchanging datagrams
//! and TCP messages with a partner that waits on them, in every arrangement of warps,
//! which a host that gave each waiting call a worker of its own could not finish.

mod common;

use std::sync::atomic::AtomicU16;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sockets::{local, sockaddr, tcp};
use common::{quiet, svc};
use hostcall_abi::errno::{ECONNABORTED, ECONNREFUSED};
use hostcall_abi::net::SOCKADDR_MAX;
use hostcall_abi::net::consts::*;
use hostcall_abi::std_services::Net;
use hostcall_abi::typed::Errno;
use hostcall_client::{Channel, fd_io};
use hostcall_emulator::{Emu, EmuThread, EmulatedModule, WarpMode};
use hostcall_runtime::{HostBuilder, Launch, Outcome, RunReport};

/// Threads in a launch of 512, in pairs by thread index, and the run's report: each
/// thread's value by its index in the launch. A thread's partner is its neighbour (the
/// other lane of its pair in one warp); blocks of 64 threads.
fn run_pairs<T: Send + 'static>(
    host: HostBuilder,
    mode: WarpMode,
    body: impl Fn(&Channel, usize) -> T + Send + Sync + 'static,
) -> (Vec<T>, RunReport) {
    const THREADS: u32 = 512;
    const BLOCK: u32 = 64;
    let out = Arc::new(Mutex::new((0..THREADS).map(|_| None).collect::<Vec<_>>()));
    let o = out.clone();
    let mut m = EmulatedModule::new(mode).kernel("k", move |t: &EmuThread| {
        let i = (t.block * BLOCK + t.thread) as usize;
        let v = body(t.channel(), i);
        o.lock().unwrap()[i] = Some(v);
    });
    let report = common::within(Duration::from_secs(60), "Host::run", move || {
        host.timeout(Duration::from_secs(30))
            .max_sockets(1024)
            .build()
            .unwrap()
            .run(&mut m, &Launch::linear("k", THREADS / BLOCK, BLOCK, vec![]))
            .unwrap()
    });
    let v = std::mem::take(&mut *out.lock().unwrap());
    (
        v.into_iter()
            .map(|v| v.expect("every thread finished"))
            .collect(),
        report,
    )
}

/// 512 GPU threads exchange datagrams in pairs, every receiver
/// waiting before its sender sends. Calls that wait on a peer each took a pool worker,
/// at most 128: 256 receivers held all of them, the senders' calls queued behind, and
/// no datagram arrived before the timeout. Linux runs the same program to its end; so
/// does the GPU, in any arrangement of warps.
#[test]
fn five_hundred_and_twelve_threads_exchange_datagrams_in_pairs() {
    for mode in [
        WarpMode::Independent,
        WarpMode::Lockstep,
        WarpMode::Divergent { seed: 31 },
    ] {
        let ports = Arc::new((0..512).map(|_| AtomicU16::new(0)).collect::<Vec<_>>());
        let host = quiet()
            .allow_listen("127.0.0.1:*")
            .allow_connect("127.0.0.1:*");
        let started = Instant::now();
        let (got, report) = run_pairs(host, mode, move |ch, i| {
            let net = svc::<dyn Net>(ch);
            let fd = net.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
            net.bind(fd, &sockaddr("127.0.0.1:0")).unwrap();
            ports[i].store(local(ch, fd).port(), Release);
            let partner = i ^ 1;
            while ports[partner].load(Acquire) == 0 {
                std::thread::yield_now();
            }
            let to = sockaddr(&format!("127.0.0.1:{}", ports[partner].load(Acquire)));
            let mine = format!("from {i}");
            let receive = || {
                let mut buf = [0; SOCKADDR_MAX + 16];
                let n = net.recvfrom(fd, 0, &mut buf).unwrap();
                String::from_utf8(buf[SOCKADDR_MAX..SOCKADDR_MAX + n].to_vec()).unwrap()
            };
            // Even threads receive first; odd ones send once the receivers wait.
            if i % 2 == 0 {
                let got = receive();
                net.sendto(fd, mine.as_bytes(), 0, &to).unwrap();
                got
            } else {
                std::thread::sleep(Duration::from_millis(300));
                net.sendto(fd, mine.as_bytes(), 0, &to).unwrap();
                receive()
            }
        });
        assert_eq!(report.outcome, Outcome::Completed, "{mode:?}");
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, format!("from {}", i ^ 1), "{mode:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{mode:?}");
    }
}

/// Over TCP: 256 GPU servers each accept one connection from a GPU
/// client and answer its line, every server waiting in `accept` before its client
/// connects.
#[test]
fn five_hundred_and_twelve_threads_talk_tcp_in_pairs() {
    for mode in [WarpMode::Independent, WarpMode::Lockstep] {
        let ports = Arc::new((0..512).map(|_| AtomicU16::new(0)).collect::<Vec<_>>());
        let host = quiet()
            .allow_listen("127.0.0.1:*")
            .allow_connect("127.0.0.1:*");
        let (got, report) = run_pairs(host, mode, move |ch, i| {
            let net = svc::<dyn Net>(ch);
            let fd = tcp(ch);
            let mut buf = [0u8; 64];
            // Both sides make their calls in step, so that lockstep lanes meet at each and
            // every wait ends within the call it is in (a lockstep lane waits for its whole
            // warp to call): socket, bind, name; then listen or connect, accept or write,
            // read or ping, write or read.
            net.bind(fd, &sockaddr("127.0.0.1:0")).unwrap();
            ports[i].store(local(ch, fd).port(), Release);
            while ports[i ^ 1].load(Acquire) == 0 {
                std::thread::yield_now();
            }
            if i % 2 == 0 {
                net.listen(fd, 4).unwrap();
                let mut peer = [0; SOCKADDR_MAX];
                let conn = net.accept(fd, 0, &mut peer).unwrap();
                let n = fd_io::read::<Emu>(ch, conn, &mut buf);
                let line = String::from_utf8(buf[..n as usize].to_vec()).unwrap();
                fd_io::write::<Emu>(ch, conn, format!("{line} back").as_bytes());
                line
            } else {
                // Lockstep: the server's listen comes first in a packet of both (lower
                // lane). Independent lanes have no packet in common: a client whose server
                // has not listened yet (a starved machine) is refused and tries again, as
                // a client of a server still starting would. On a machine starved by
                // other test binaries at once (Buck2 runs them side by side), Linux also
                // aborts some of 256 loopback connects (`ECONNABORTED`, seen at 87c1ada
                // as now): the client tries again then too.
                std::thread::sleep(Duration::from_millis(300));
                let to = sockaddr(&format!("127.0.0.1:{}", ports[i ^ 1].load(Acquire)));
                loop {
                    match net.connect(fd, &to) {
                        Err(Errno(ECONNREFUSED)) if mode == WarpMode::Independent => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(Errno(ECONNABORTED)) => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        r => break r.unwrap(),
                    }
                }
                fd_io::write::<Emu>(ch, fd, format!("hello {i}").as_bytes());
                ch.ping::<Emu>(0);
                let n = fd_io::read::<Emu>(ch, fd, &mut buf);
                String::from_utf8(buf[..n as usize].to_vec()).unwrap()
            }
        });
        assert_eq!(report.outcome, Outcome::Completed, "{mode:?}");
        for (i, g) in got.iter().enumerate() {
            let expected = match i % 2 {
                0 => format!("hello {}", i + 1),
                _ => format!("hello {i} back"),
            };
            assert_eq!(*g, expected, "{mode:?}");
        }
    }
}
