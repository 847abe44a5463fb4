//! TCP over loopback: a server thread answers line-based requests from clients that
//! connect by address and by name; a refused connection, a non-blocking accept, a read
//! timeout and a half-closed stream. Nothing printed shows a port.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Answers each line of each connection with its length and its words reversed, until
/// the client closes; returns what each connection asked.
fn serve(listener: TcpListener, connections: usize) -> std::io::Result<Vec<usize>> {
    let mut asked = Vec::new();
    for _ in 0..connections {
        let (conn, peer) = listener.accept()?;
        assert!(peer.ip().is_loopback());
        let mut out = conn.try_clone()?;
        let mut lines = 0;
        for line in BufReader::new(conn).lines() {
            let line = line?;
            let reversed: Vec<&str> = line.split(' ').rev().collect();
            writeln!(out, "{} {}", line.len(), reversed.join(" "))?;
            lines += 1;
        }
        asked.push(lines);
    }
    Ok(asked)
}

fn talk(mut s: TcpStream, lines: &[&str]) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut reader = BufReader::new(s.try_clone()?);
    for line in lines {
        writeln!(s, "{line}")?;
        let mut answer = String::new();
        reader.read_line(&mut answer)?;
        if line.len() > 40 {
            println!("tcp: {} bytes -> {} bytes", line.len(), answer.len());
        } else {
            print!("tcp: {line:?} -> {answer}");
        }
    }
    s.shutdown(Shutdown::Write)?;
    let mut rest = String::new();
    reader.read_to_string(&mut rest)?;
    println!("tcp: {} bytes after the end", rest.len());
    Ok(())
}

fn run() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    println!("bound to loopback: {}", listener.local_addr()?.ip().is_loopback());
    let server = std::thread::spawn(move || serve(listener, 3));
    talk(
        TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))?,
        &["hello world", "one two three"],
    )?;
    talk(TcpStream::connect(("localhost", port))?, &["by name"])?;
    let big = "x".repeat(100_000);
    talk(TcpStream::connect(("127.0.0.1", port))?, &[&big, "a b"])?;
    println!("server answered {:?}", server.join().expect("server thread")?);

    // A port nobody listens on any more.
    let closed = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    match TcpStream::connect(closed) {
        Ok(_) => println!("refused: connected?"),
        Err(e) => println!("refused: {:?}: {e}", e.kind()),
    }

    // Non-blocking accept with nobody connecting, then with a client waiting.
    let idle = TcpListener::bind("127.0.0.1:0")?;
    idle.set_nonblocking(true)?;
    match idle.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => println!("nonblocking: would block"),
        other => println!("nonblocking: {other:?}"),
    }
    let client = TcpStream::connect(idle.local_addr()?)?;
    let accepted = loop {
        match idle.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => return Err(e),
        }
    };
    println!("nonblocking: accepted a waiting client");

    // A read with nothing to read times out.
    accepted.set_nonblocking(false)?;
    accepted.set_read_timeout(Some(Duration::from_millis(30)))?;
    match (&accepted).read(&mut [0u8; 8]) {
        Ok(n) => println!("timeout: read {n} bytes?"),
        Err(e) => println!(
            "timeout: {}",
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
        ),
    }
    (&client).write_all(b"late")?;
    let mut buf = [0u8; 4];
    (&accepted).read_exact(&mut buf)?;
    println!("then: {:?}", std::str::from_utf8(&buf).unwrap_or("?"));
    println!(
        "peers agree: {}",
        client.local_addr()? == accepted.peer_addr()?
    );
    Ok(())
}

pub fn main() {
    if let Err(e) = run() {
        println!("error: {e}");
    }
}
