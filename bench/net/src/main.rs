//! Loopback TCP, timed: an echo server that runs as it is on the CPU and on the GPU
//! (`cargo gpu build`), and a client (always on the CPU) that measures it and prints one
//! JSON object. The device run starts the server on each side in turn and points the
//! same client at it (`bench/device-runs/run.sh NAME net`).
//!
//!     net-bench echo ADDR CONNECTIONS    serve CONNECTIONS connections, one at a time
//!     net-bench client ADDR              measure the server at ADDR
//!     net-bench pairs THREADS            THREADS threads talking in pairs
//!
//! - `round_trips_per_s`, `rtt_median_us`: 64-byte messages, each waiting for its echo,
//!   on one connection with `TCP_NODELAY` (2,000 after 200 to warm up).
//! - `mb_per_s`: 256 MiB written in 64 KiB pieces while a second thread reads the echo
//!   back, on a second connection.
//!
//! `pairs` runs THREADS threads at once, thread `i` paired with `i ^ 1`: each pair
//! exchanges `PAIR_ROUNDS` datagrams each way over UDP, then as many 64-byte messages
//! over a TCP connection one of them accepts, every call waiting on the peer's. It
//! prints what was exchanged and one JSON line of times; the lines but the times are
//! the same on the CPU and the GPU.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

const SMALL: usize = 64;
const WARM: usize = 200;
const ROUND_TRIPS: usize = 2000;
const PIECE: usize = 64 << 10;
const STREAM_BYTES: usize = 256 << 20;
/// Messages each way per pair and protocol in `pairs`.
const PAIR_ROUNDS: usize = 20;

/// Echoes everything `conn` sends until it closes.
fn echo(mut conn: TcpStream) -> std::io::Result<u64> {
    conn.set_nodelay(true)?;
    let mut buf = vec![0u8; PIECE];
    let mut total = 0;
    loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        conn.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// Connects to `addr`, retrying while the server starts (a GPU program takes seconds).
fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let started = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(e),
        }
    }
}

fn client(addr: &str) -> std::io::Result<()> {
    let mut s = connect(addr)?;
    s.set_nodelay(true)?;
    let msg = [7u8; SMALL];
    let mut back = [0u8; SMALL];
    let mut rtts = Vec::with_capacity(ROUND_TRIPS);
    let t = Instant::now();
    for i in 0..WARM + ROUND_TRIPS {
        let one = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut back)?;
        if i >= WARM {
            rtts.push(one.elapsed());
        }
    }
    let total = t.elapsed();
    drop(s);
    rtts.sort();
    let per_s = ROUND_TRIPS as f64 / rtts.iter().sum::<Duration>().as_secs_f64();

    let mut w = connect(addr)?;
    let mut r = w.try_clone()?;
    let reader = std::thread::spawn(move || -> std::io::Result<usize> {
        let mut buf = vec![0u8; PIECE];
        let mut got = 0;
        while got < STREAM_BYTES {
            let n = r.read(&mut buf)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(got)
    });
    let piece = vec![1u8; PIECE];
    let t = Instant::now();
    for _ in 0..STREAM_BYTES / PIECE {
        w.write_all(&piece)?;
    }
    let got = reader.join().expect("reader thread")?;
    let secs = t.elapsed().as_secs_f64();
    w.shutdown(std::net::Shutdown::Both)?;
    assert_eq!(got, STREAM_BYTES);
    println!(
        "{{\"round_trips_per_s\": {per_s:.0}, \"rtt_median_us\": {:.1}, \"rtt_p99_us\": {:.1}, \
         \"round_trips_s\": {:.3}, \"mb_per_s\": {:.1}, \"stream_mib\": {}}}",
        rtts[rtts.len() / 2].as_secs_f64() * 1e6,
        rtts[rtts.len() * 99 / 100].as_secs_f64() * 1e6,
        total.as_secs_f64(),
        STREAM_BYTES as f64 / secs / 1e6,
        STREAM_BYTES >> 20
    );
    Ok(())
}

/// One thread of `pairs`: the exchange with `i ^ 1` over UDP (the odd thread sends
/// first), then over TCP (the even thread listens, the odd one connects), each side's
/// address published in `addrs` between two meetings of all threads; each socket closed
/// before the next opens. Returns the bytes it received.
fn pair(i: usize, addrs: &Mutex<Vec<Option<SocketAddr>>>, met: &Barrier) -> std::io::Result<usize> {
    let odd = i % 2 == 1;
    let mut got = 0;
    let mut buf = [0u8; SMALL];
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    addrs.lock().unwrap()[i] = Some(udp.local_addr()?);
    met.wait();
    let theirs = addrs.lock().unwrap()[i ^ 1].expect("every thread published");
    met.wait();
    for round in 0..PAIR_ROUNDS {
        let msg = [(i + round) as u8; SMALL];
        if odd {
            udp.send_to(&msg, theirs)?;
        }
        let (n, from) = udp.recv_from(&mut buf)?;
        assert_eq!(from, theirs, "a datagram from the peer");
        got += n;
        if !odd {
            udp.send_to(&msg, from)?;
        }
    }
    drop(udp);
    let listener = if odd {
        None
    } else {
        let l = TcpListener::bind("127.0.0.1:0")?;
        addrs.lock().unwrap()[i] = Some(l.local_addr()?);
        Some(l)
    };
    met.wait();
    let mut conn = match listener {
        Some(l) => l.accept()?.0,
        None => {
            let at = addrs.lock().unwrap()[i ^ 1].expect("every even thread listens");
            TcpStream::connect(at)?
        }
    };
    conn.set_nodelay(true)?;
    for round in 0..PAIR_ROUNDS {
        let msg = [(i + round) as u8; SMALL];
        if odd {
            conn.write_all(&msg)?;
        }
        conn.read_exact(&mut buf)?;
        got += SMALL;
        if !odd {
            conn.write_all(&msg)?;
        }
    }
    Ok(got)
}

/// `pairs`: `threads` threads (even) exchanging in pairs, all at once.
fn pairs(threads: usize) -> std::io::Result<()> {
    let addrs = Mutex::new(vec![None; threads]);
    let met = Barrier::new(threads);
    let started = Instant::now();
    let got: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (addrs, met) = (&addrs, &met);
                // A thread that fails leaves its peer waiting for ever: the whole
                // program ends at once instead, saying why.
                s.spawn(move || {
                    pair(i, addrs, met).unwrap_or_else(|e| {
                        eprintln!("net-bench pairs: thread {i}: {e}");
                        std::process::exit(1)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a pair thread"))
            .collect()
    });
    let took = started.elapsed();
    let total: usize = got.iter().sum();
    println!(
        "{threads} threads in {} pairs: {total} bytes received ({PAIR_ROUNDS} datagrams and {PAIR_ROUNDS} TCP messages of {SMALL} bytes each way per pair)",
        threads / 2
    );
    println!(
        "{{\"threads\": {threads}, \"pairs_s\": {:.3}}}",
        took.as_secs_f64()
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("echo"), Some(addr)) => {
            let n: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(2);
            TcpListener::bind(addr.as_str()).and_then(|l| {
                for _ in 0..n {
                    echo(l.accept()?.0)?;
                }
                Ok(())
            })
        }
        (Some("client"), Some(addr)) => client(addr),
        (Some("pairs"), Some(n)) => match n.parse::<usize>() {
            Ok(n) if n >= 2 && n % 2 == 0 => pairs(n),
            _ => {
                eprintln!("net-bench pairs: THREADS must be an even number, at least 2");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!(
                "usage: net-bench echo ADDR CONNECTIONS | net-bench client ADDR | net-bench pairs THREADS"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("net-bench: {e}");
        std::process::exit(1);
    }
}
