//! Sockets: the Linux numbers and layouts std's network code passes to libc, as the
//! `Net` services (`hostcall_client::std_services::Net`) carry them.
//!
//! An address travels as Linux's own `sockaddr_in` or `sockaddr_in6` bytes (family,
//! port and address in network order), so libc copies what std gave it and the host
//! decodes it once, here. Addresses the host sends back take [`SOCKADDR_MAX`] bytes; the
//! family says how many of them count ([`sockaddr_len`]).

use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::errno::{EAFNOSUPPORT, EINVAL};

#[allow(missing_docs)] // the names are Linux's
pub mod consts {
    pub const AF_UNIX: i32 = 1;
    pub const AF_INET: i32 = 2;
    pub const AF_INET6: i32 = 10;

    pub const SOCK_STREAM: i32 = 1;
    pub const SOCK_DGRAM: i32 = 2;
    /// Flags `socket` and `accept4` take beside the type.
    pub const SOCK_NONBLOCK: i32 = 0o4000;
    pub const SOCK_CLOEXEC: i32 = 0o2000000;

    pub const IPPROTO_IP: i32 = 0;
    pub const IPPROTO_TCP: i32 = 6;
    pub const IPPROTO_UDP: i32 = 17;
    pub const IPPROTO_IPV6: i32 = 41;
    pub const SOL_SOCKET: i32 = 1;

    pub const SO_REUSEADDR: i32 = 2;
    pub const SO_TYPE: i32 = 3;
    pub const SO_ERROR: i32 = 4;
    pub const SO_BROADCAST: i32 = 6;
    pub const SO_SNDBUF: i32 = 7;
    pub const SO_RCVBUF: i32 = 8;
    pub const SO_KEEPALIVE: i32 = 9;
    pub const SO_LINGER: i32 = 13;
    pub const SO_RCVTIMEO: i32 = 20;
    pub const SO_SNDTIMEO: i32 = 21;
    pub const TCP_NODELAY: i32 = 1;
    pub const IP_TTL: i32 = 2;
    pub const IPV6_V6ONLY: i32 = 26;

    pub const MSG_PEEK: i32 = 2;
    pub const MSG_DONTWAIT: i32 = 0x40;
    pub const MSG_WAITALL: i32 = 0x100;
    pub const MSG_NOSIGNAL: i32 = 0x4000;

    pub const SHUT_RD: i32 = 0;
    pub const SHUT_WR: i32 = 1;
    pub const SHUT_RDWR: i32 = 2;

    /// `ioctl` request setting a socket's non-blocking mode.
    pub const FIONBIO: u64 = 0x5421;
    /// `fcntl`'s file-status flag for the same.
    pub use crate::fcntl::O_NONBLOCK;

    pub const POLLIN: i16 = 0x1;
    pub const POLLOUT: i16 = 0x4;
    pub const POLLNVAL: i16 = 0x20;
    pub const POLLRDNORM: i16 = 0x40;
    pub const POLLWRNORM: i16 = 0x100;

    /// `getaddrinfo`'s failures.
    pub const EAI_NONAME: i32 = -2;
    pub const EAI_FAMILY: i32 = -6;
    pub const EAI_MEMORY: i32 = -10;
}

/// Bytes of the largest address (`sockaddr_in6`): the room every address answer takes.
pub const SOCKADDR_MAX: usize = 28;

/// Bytes of one `struct pollfd` (fd, events, revents).
pub const POLLFD_SIZE: usize = 8;

/// The most addresses one name resolves to in an answer.
pub const RESOLVED_MAX: usize = 16;

/// The sockets a program may hold open at once unless the embedder says otherwise
/// (each is also an open file, under the open-file limit).
pub const DEFAULT_MAX_SOCKETS: usize = 256;

/// The backlog a listening socket gets at most, whatever the program asks.
pub const BACKLOG_MAX: i32 = 128;

/// Bytes of address a `sockaddr` of this family has (16 for IPv4, 28 for IPv6).
pub fn sockaddr_len(family: i32) -> Option<usize> {
    match family {
        consts::AF_INET => Some(16),
        consts::AF_INET6 => Some(SOCKADDR_MAX),
        _ => None,
    }
}

/// The family field of `sockaddr` bytes.
pub fn family_of(bytes: &[u8]) -> Option<i32> {
    Some(u16::from_ne_bytes(bytes.get(..2)?.try_into().ok()?) as i32)
}

/// Decodes Linux `sockaddr_in`/`sockaddr_in6` bytes: `EAFNOSUPPORT` for another family,
/// `EINVAL` when the bytes are too few for theirs.
pub fn decode(bytes: &[u8]) -> Result<SocketAddr, i32> {
    let family = family_of(bytes).ok_or(EINVAL)?;
    let need = sockaddr_len(family).ok_or(EAFNOSUPPORT)?;
    let b = bytes.get(..need).ok_or(EINVAL)?;
    let port = u16::from_be_bytes([b[2], b[3]]);
    Ok(if family == consts::AF_INET {
        let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        SocketAddr::V4(SocketAddrV4::new(ip, port))
    } else {
        let flow = u32::from_be_bytes(b[4..8].try_into().unwrap_or_default());
        let ip: [u8; 16] = b[8..24].try_into().unwrap_or_default();
        let scope = u32::from_ne_bytes(b[24..28].try_into().unwrap_or_default());
        SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope))
    })
}

/// Encodes `addr` as Linux's `sockaddr` bytes at the start of `out`; returns their
/// length. The rest of [`SOCKADDR_MAX`] is zero.
pub fn encode(addr: &SocketAddr, out: &mut [u8; SOCKADDR_MAX]) -> usize {
    *out = [0; SOCKADDR_MAX];
    out[2..4].copy_from_slice(&addr.port().to_be_bytes());
    match addr {
        SocketAddr::V4(a) => {
            out[..2].copy_from_slice(&(consts::AF_INET as u16).to_ne_bytes());
            out[4..8].copy_from_slice(&a.ip().octets());
            16
        }
        SocketAddr::V6(a) => {
            out[..2].copy_from_slice(&(consts::AF_INET6 as u16).to_ne_bytes());
            out[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            out[8..24].copy_from_slice(&a.ip().octets());
            out[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            SOCKADDR_MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_in_linux_layout() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mut b = [0; SOCKADDR_MAX];
        assert_eq!(encode(&v4, &mut b), 16);
        assert_eq!(&b[..8], &[2, 0, 0x1f, 0x90, 127, 0, 0, 1]);
        assert_eq!(decode(&b[..16]), Ok(v4));
        let v6: SocketAddr = "[::1]:443".parse().unwrap();
        assert_eq!(encode(&v6, &mut b), 28);
        assert_eq!(decode(&b), Ok(v6));
    }

    #[test]
    fn short_or_foreign_addresses_are_refused() {
        let v6: SocketAddr = "[::1]:443".parse().unwrap();
        let mut b = [0; SOCKADDR_MAX];
        encode(&v6, &mut b);
        assert_eq!(decode(&b[..16]), Err(EINVAL));
        assert_eq!(decode(&[1, 0, b'/', b't']), Err(EAFNOSUPPORT));
        assert_eq!(decode(&[2]), Err(EINVAL));
    }
}
