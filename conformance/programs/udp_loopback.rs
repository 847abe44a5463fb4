//! UDP over loopback: an echo thread answers each datagram to its sender, a connected
//! client and an unconnected one talk to it, a datagram larger than the buffer is cut,
//! and a receive with nothing sent times out. Nothing printed shows a port.

use std::net::UdpSocket;
use std::time::Duration;

fn run() -> std::io::Result<()> {
    let echo = UdpSocket::bind("127.0.0.1:0")?;
    let echo_addr = echo.local_addr()?;
    let echoer = std::thread::spawn(move || -> std::io::Result<Vec<usize>> {
        let mut sizes = Vec::new();
        let mut buf = vec![0u8; 2048];
        for _ in 0..5 {
            let (n, from) = echo.recv_from(&mut buf)?;
            echo.send_to(&buf[..n].to_ascii_uppercase(), from)?;
            sizes.push(n);
        }
        Ok(sizes)
    });

    let connected = UdpSocket::bind("127.0.0.1:0")?;
    connected.connect(echo_addr)?;
    println!("peer is the echo: {}", connected.peer_addr()? == echo_addr);
    for msg in ["hello", "datagram", &"z".repeat(1400)] {
        connected.send(msg.as_bytes())?;
        let mut buf = [0u8; 2048];
        let n = connected.recv(&mut buf)?;
        let text = String::from_utf8_lossy(&buf[..n.min(12)]);
        println!("connected: {text} ({n} bytes)");
    }

    let loose = UdpSocket::bind("127.0.0.1:0")?;
    loose.send_to(b"from an unconnected socket", echo_addr)?;
    let mut buf = [0u8; 64];
    let (n, from) = loose.recv_from(&mut buf)?;
    println!(
        "unconnected: {} from the echo: {}",
        String::from_utf8_lossy(&buf[..n]),
        from == echo_addr
    );
    loose.send_to(&[b'q'; 100], echo_addr)?;
    let mut small = [0u8; 10];
    let (n, _) = loose.recv_from(&mut small)?;
    println!("cut: {n} bytes kept of 100: {:?}", String::from_utf8_lossy(&small));
    println!("echoed sizes {:?}", echoer.join().expect("echo thread")?);

    let quiet = UdpSocket::bind("127.0.0.1:0")?;
    quiet.set_read_timeout(Some(Duration::from_millis(30)))?;
    match quiet.recv(&mut [0u8; 8]) {
        Ok(n) => println!("timeout: got {n} bytes?"),
        Err(e) => println!("timeout: {:?}", e.kind()),
    }
    quiet.set_nonblocking(true)?;
    match quiet.recv(&mut [0u8; 8]) {
        Ok(n) => println!("nonblocking: got {n} bytes?"),
        Err(e) => println!("nonblocking: {:?}", e.kind()),
    }
    Ok(())
}

pub fn main() {
    if let Err(e) = run() {
        println!("error: {e}");
    }
}
