//! GPU sockets as the socket tests set them up: addresses, a TCP socket, a listener.

use std::net::SocketAddr;

use hostcall_abi::net::consts::*;
use hostcall_abi::net::{SOCKADDR_MAX, decode, encode};
use hostcall_abi::std_services::Net;
use hostcall_client::Channel;

use super::svc;

/// `a` (`"127.0.0.1:80"`) as Linux `sockaddr` bytes.
pub fn sockaddr(a: &str) -> Vec<u8> {
    let mut b = [0; SOCKADDR_MAX];
    let n = encode(&a.parse().unwrap(), &mut b);
    b[..n].to_vec()
}

/// A GPU TCP socket, close-on-exec.
pub fn tcp(ch: &Channel) -> i32 {
    svc::<dyn Net>(ch)
        .socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)
        .unwrap()
}

/// The socket's own address.
pub fn local(ch: &Channel, fd: i32) -> SocketAddr {
    let mut out = [0; SOCKADDR_MAX];
    svc::<dyn Net>(ch).name(fd, 0, &mut out).unwrap();
    decode(&out).unwrap()
}

/// A listening GPU socket on a port the system picks.
pub fn listener(ch: &Channel, ty: i32) -> i32 {
    let net = svc::<dyn Net>(ch);
    let fd = net.socket(AF_INET, ty, 0).unwrap();
    net.bind(fd, &sockaddr("127.0.0.1:0")).unwrap();
    if ty == SOCK_STREAM {
        net.listen(fd, 16).unwrap();
    }
    fd
}
