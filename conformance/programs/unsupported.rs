//! What a GPU cannot do fails with Linux's error, without a trap: spawning a thread in a
//! launch whose every thread runs the kernel (none is held back to take it: `EAGAIN`, as
//! at Linux's thread limit; `cargo gpu run` holds threads back), running a command,
//! and opening a socket the host granted no address for (`EACCES`, as a firewall's
//! refusal).

use std::net::{TcpListener, UdpSocket};
use std::process::Command;

fn show<T>(what: &str, r: std::io::Result<T>) {
    match r {
        Ok(_) => println!("{what}: ok"),
        Err(e) => println!("{what}: {:?} {e}", e.kind()),
    }
}

pub fn main() {
    show("thread spawn", std::thread::Builder::new().spawn(|| 1).map(|h| h.join()));
    show("command", Command::new("true").status());
    show("tcp listen", TcpListener::bind("127.0.0.1:0"));
    show("udp bind", UdpSocket::bind("127.0.0.1:0"));
    println!("still running");
}
