//! An ordinary std network program, unchanged for the GPU. With no arguments it talks
//! to itself over loopback: an HTTP/1.1 server thread and its client, a UDP echo, a
//! refused connection, non-blocking accept and a read timeout. `serve ADDR N` serves N
//! HTTP requests on ADDR and exits; `get ADDR PATH` fetches PATH from ADDR and prints
//! the body. Its output never shows a port, so the CPU's and the GPU's compare byte
//! for byte.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// Answers one HTTP/1.1 request on `conn`: the body names the path and `n`.
fn answer(conn: TcpStream, n: usize) -> std::io::Result<String> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let body = format!("request {n} for {path}\n");
    let mut conn = conn;
    write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()?;
    Ok(path)
}

/// Serves `n` requests from `listener`, one connection each.
fn serve(listener: TcpListener, n: usize) -> std::io::Result<Vec<String>> {
    let mut paths = Vec::new();
    for i in 1..=n {
        let (conn, peer) = listener.accept()?;
        assert!(peer.ip().is_loopback(), "peer {peer}");
        paths.push(answer(conn, i)?);
    }
    Ok(paths)
}

/// Fetches `path` from `addr`: the status line and the body.
fn get(addr: impl ToSocketAddrs, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: loopback\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_owned();
    Ok((status, body.to_owned()))
}

fn loopback() -> std::io::Result<()> {
    // HTTP: a server thread and three fetches, by address and by name.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let server = std::thread::spawn(move || serve(listener, 3));
    for (i, path) in ["/", "/index.html", "/a/b?c=d"].into_iter().enumerate() {
        let (status, body) = if i == 1 {
            get(("localhost", port), path)?
        } else {
            get(SocketAddr::from(([127, 0, 0, 1], port)), path)?
        };
        print!("http: {status} | {body}");
    }
    println!(
        "http: server saw {:?}",
        server.join().expect("server thread")?
    );

    // UDP echo: a thread answers each datagram in capitals, to its sender.
    let echo = UdpSocket::bind("127.0.0.1:0")?;
    let echo_addr = echo.local_addr()?;
    let echoer = std::thread::spawn(move || -> std::io::Result<usize> {
        let mut buf = [0u8; 1500];
        for _ in 0..3 {
            let (n, from) = echo.recv_from(&mut buf)?;
            echo.send_to(&buf[..n].to_ascii_uppercase(), from)?;
        }
        Ok(3)
    });
    let client = UdpSocket::bind("127.0.0.1:0")?;
    client.connect(echo_addr)?;
    for msg in ["hello", "datagram", &"x".repeat(1200)] {
        client.send(msg.as_bytes())?;
        let mut buf = [0u8; 1500];
        let (n, from) = client.recv_from(&mut buf)?;
        let text = String::from_utf8_lossy(&buf[..n]);
        let shown = if n > 16 {
            format!("{}... ({n} bytes)", &text[..8])
        } else {
            text.into()
        };
        println!("udp: {shown} from the echo: {}", from == echo_addr);
    }
    println!("udp: echoed {}", echoer.join().expect("echo thread")?);

    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    match TcpStream::connect(closed) {
        Ok(_) => println!("refused: connected?"),
        Err(e) => println!("refused: {:?}: {e}", e.kind()),
    }
    match TcpStream::connect_timeout(&closed, Duration::from_secs(2)) {
        Ok(_) => println!("refused with a timeout: connected?"),
        Err(e) => println!("refused with a timeout: {:?}", e.kind()),
    }

    // Non-blocking accept, a read timeout, and a shut-down stream.
    let idle = TcpListener::bind("127.0.0.1:0")?;
    idle.set_nonblocking(true)?;
    match idle.accept() {
        Ok(_) => println!("nonblocking: accepted?"),
        Err(e) => println!("nonblocking: {:?}", e.kind()),
    }
    let quiet = UdpSocket::bind("127.0.0.1:0")?;
    quiet.set_read_timeout(Some(Duration::from_millis(30)))?;
    println!(
        "timeout: {:?}",
        quiet
            .read_timeout()?
            .map(|d| d >= Duration::from_millis(30))
    );
    match quiet.recv(&mut [0u8; 8]) {
        Ok(n) => println!("timeout: got {n} bytes?"),
        Err(e) => println!("timeout: {:?}", e.kind()),
    }
    let a = TcpListener::bind("127.0.0.1:0")?;
    let s = TcpStream::connect(a.local_addr()?)?;
    let (mut t, _) = a.accept()?;
    s.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    println!(
        "shutdown: read {} bytes to the end",
        t.read_to_end(&mut rest)?
    );
    println!("nodelay: {}", {
        s.set_nodelay(true)?;
        s.nodelay()?
    });
    match "no-such-host.invalid:80".to_socket_addrs() {
        Ok(_) => println!("resolve: found?"),
        Err(e) => println!("resolve: {:?}", e.kind()),
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        None => loopback(),
        Some("serve") => {
            let n = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
            TcpListener::bind(args[2].as_str())
                .and_then(|l| serve(l, n))
                .map(|paths| println!("served {paths:?}"))
        }
        Some("get") => get(args[2].as_str(), args.get(3).map_or("/", String::as_str))
            .map(|(status, body)| print!("{status}\n{body}")),
        Some(other) => {
            eprintln!("net: unknown mode {other}; use serve ADDR N, get ADDR PATH, or nothing");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("net: {e}");
        std::process::exit(1);
    }
}
