//! Sockets for the GPU: the host's own, in the GPU's fd table, reaching only what the
//! embedder granted. A grant names an address and ports to connect (or send) to, or
//! to listen (or bind) on; everything else answers `EACCES`, as a firewall's refusal
//! does. A socket listens only on an address and port a listen grant covers, whether
//! it was bound by `bind` or would be by `listen`. Names resolve only when granted, from
//! what the host resolved when the grant was made, so no program makes the host send a
//! DNS query.
//!
//! Every host socket is non-blocking. The GPU's own `O_NONBLOCK`, `SO_RCVTIMEO`,
//! `SO_SNDTIMEO` and `SO_LINGER` are kept beside it and emulated: a call that would
//! block on Linux waits in the reactor (`services::wait`) until the socket is ready or
//! its timeout passes, so any number of GPU threads can wait on their peers, each other
//! included, without a host thread each. A linger time is recorded, never applied: a
//! close must not hold a host thread for the time it names.

use std::fs::File;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use hostcall_abi::errno::{
    EACCES, EAFNOSUPPORT, EAGAIN, EINVAL, ENOENT, ENOTCONN, EPROTONOSUPPORT,
};
use hostcall_abi::net::consts::*;
use hostcall_abi::net::{BACKLOG_MAX, POLLFD_SIZE, RESOLVED_MAX, SOCKADDR_MAX, decode, encode};
use hostcall_abi::std_services::Net;
use hostcall_abi::typed::Errno;
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno as OsErrno;
use rustix::net::sockopt;
use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, Shutdown, SocketAddrAny, SocketFlags, SocketType, ipproto,
};

use super::fd_table::{Direction, Handle, Waitable};
use super::fs::{Files, write_ready};
use super::wait::{self, Interest, Watch};

/// Addresses the GPU may reach: one IP and a range of its ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NetGrant {
    ip: IpAddr,
    ports: RangeInclusive<u16>,
}

impl NetGrant {
    fn covers(&self, a: &SocketAddr) -> bool {
        self.ip == a.ip() && self.ports.contains(&a.port())
    }
}

/// What the embedder granted the GPU's sockets.
#[derive(Clone, Debug, Default)]
pub(crate) struct NetPolicy {
    connect: Vec<NetGrant>,
    listen: Vec<NetGrant>,
    /// Granted names and the addresses the host resolved them to.
    names: Vec<(String, Vec<IpAddr>)>,
}

/// Parses a port, a range `A-B`, or `*` for every port.
fn parse_ports(s: &str) -> Result<RangeInclusive<u16>, String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| format!("`{p}` is not a port (0 to 65535)"))
    };
    if s == "*" {
        return Ok(0..=u16::MAX);
    }
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (port(a)?, port(b)?);
            if a > b {
                return Err(format!("the port range {s} is empty"));
            }
            Ok(a..=b)
        }
        None => port(s).map(|p| p..=p),
    }
}

impl NetPolicy {
    /// Grants `spec`, `HOST:PORTS`, to connect to (or, with `listen`, to listen on).
    /// HOST is an IPv4 address, an IPv6 one in brackets, or a name, which the host
    /// resolves now; PORTS is a port, a range `A-B`, or `*`.
    pub(crate) fn grant(&mut self, spec: &str, listen: bool) -> Result<(), String> {
        let (host, ports) = spec
            .rsplit_once(':')
            .ok_or_else(|| format!("`{spec}` is not HOST:PORTS"))?;
        let ports = parse_ports(ports)?;
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        let ips: Vec<IpAddr> = match literal.unwrap_or(host).parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) if literal.is_some() || host.is_empty() => {
                return Err(format!("`{host}` is not an address"));
            }
            Err(_) => {
                let mut ips: Vec<IpAddr> = (host, 0)
                    .to_socket_addrs()
                    .map_err(|e| format!("resolving `{host}`: {e}"))?
                    .map(|a| a.ip())
                    .collect();
                ips.dedup();
                ips.truncate(RESOLVED_MAX);
                self.names.push((host.to_ascii_lowercase(), ips.clone()));
                ips
            }
        };
        let list = if listen {
            &mut self.listen
        } else {
            &mut self.connect
        };
        list.extend(ips.into_iter().map(|ip| NetGrant {
            ip,
            ports: ports.clone(),
        }));
        Ok(())
    }

    /// Whether anything was granted: with nothing, no socket opens.
    fn any(&self) -> bool {
        !self.connect.is_empty() || !self.listen.is_empty()
    }

    fn may_connect(&self, a: &SocketAddr) -> bool {
        self.connect.iter().any(|g| g.covers(a))
    }

    /// A port of its own needs a listen grant; port 0 (the system picks one, as a
    /// client's datagram socket does) any grant of the address.
    fn may_bind(&self, a: &SocketAddr) -> bool {
        if a.port() == 0 {
            return self
                .connect
                .iter()
                .chain(&self.listen)
                .any(|g| g.ip == a.ip());
        }
        self.listen.iter().any(|g| g.covers(a))
    }

    /// Whether a socket bound to `a` may listen there: a listen grant covering its
    /// address and port (port 0, unbound: one covering every port of the address).
    fn may_listen(&self, a: &SocketAddr) -> bool {
        if a.port() == 0 {
            return self
                .listen
                .iter()
                .any(|g| g.ip == a.ip() && g.ports == (0..=u16::MAX));
        }
        self.listen.iter().any(|g| g.covers(a))
    }

    /// The addresses of `name`: an address itself, or a granted name.
    fn resolve(&self, name: &str) -> Option<Vec<IpAddr>> {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Some(vec![ip]);
        }
        let name = name.to_ascii_lowercase();
        self.names
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, ips)| ips.clone())
    }
}

/// The GPU's sockets: the fd table they live in, and the grants.
pub(crate) struct Sockets {
    pub files: Arc<Files>,
    pub policy: Arc<NetPolicy>,
}

fn os(e: rustix::io::Errno) -> Errno {
    Errno(e.raw_os_error())
}

/// Writes `addr` (none: all zero, family `AF_UNSPEC`) into the first `SOCKADDR_MAX`
/// bytes of `out`.
fn put_addr(out: &mut [u8], addr: Option<SocketAddrAny>) -> Result<(), Errno> {
    let out: &mut [u8; SOCKADDR_MAX] = out
        .get_mut(..SOCKADDR_MAX)
        .and_then(|o| o.try_into().ok())
        .ok_or(Errno(EINVAL))?;
    match addr.map(SocketAddr::try_from) {
        Some(Ok(a)) => {
            encode(&a, out);
        }
        Some(Err(_)) => return Err(Errno(EAFNOSUPPORT)),
        None => *out = [0; SOCKADDR_MAX],
    }
    Ok(())
}

/// The address in `bytes`, if `allowed` grants it (`EACCES` otherwise).
fn granted(bytes: &[u8], allowed: impl Fn(&SocketAddr) -> bool) -> Result<SocketAddr, Errno> {
    let a = decode(bytes).map_err(Errno)?;
    if !allowed(&a) {
        return Err(Errno(EACCES));
    }
    Ok(a)
}

/// An `int` option's value.
fn int_of(value: &[u8]) -> Result<i32, Errno> {
    let b = value.get(..4).ok_or(Errno(EINVAL))?;
    Ok(i32::from_ne_bytes(b.try_into().map_err(|_| Errno(EINVAL))?))
}

/// The direction of the timeout option `name`: `SO_RCVTIMEO` or `SO_SNDTIMEO`.
fn direction(name: i32) -> Direction {
    if name == SO_RCVTIMEO {
        Direction::Receive
    } else {
        Direction::Send
    }
}

/// A `struct timeval` as a socket timeout (zero: none).
fn timeout_of(value: &[u8]) -> Result<Option<Duration>, Errno> {
    let b = value.get(..16).ok_or(Errno(EINVAL))?;
    let word = |r: std::ops::Range<usize>| i64::from_ne_bytes(b[r].try_into().unwrap_or_default());
    let (s, us) = (word(0..8), word(8..16));
    if s < 0 || !(0..1_000_000).contains(&us) {
        return Err(Errno(EINVAL));
    }
    let d = Duration::from_secs(s as u64) + Duration::from_micros(us as u64);
    Ok((!d.is_zero()).then_some(d))
}

/// Copies `bytes` into `out`; returns their length.
fn put(out: &mut [u8], bytes: &[u8]) -> Result<usize, Errno> {
    out.get_mut(..bytes.len())
        .ok_or(Errno(EINVAL))?
        .copy_from_slice(bytes);
    Ok(bytes.len())
}

impl Sockets {
    /// The open socket `fd` (`ENOTSOCK` for a file).
    fn sock(&self, fd: i32) -> Result<(Arc<File>, Arc<Waitable>), Errno> {
        self.files.table().socket(fd).map_err(Errno)
    }

    /// Enters a new host socket (non-blocking) in the fd table, non-blocking for the GPU
    /// if it asked.
    fn enter(&self, fd: std::os::fd::OwnedFd, nonblocking: bool) -> Result<i32, Errno> {
        self.files
            .table()
            .insert_socket(File::from(fd), nonblocking)
            .map_err(Errno)
    }

    /// Sets an `int` option of the served list (`ENOPROTOOPT` for any other).
    fn set_int(f: &File, level: i32, name: i32, v: i32) -> rustix::io::Result<()> {
        match (level, name) {
            (SOL_SOCKET, SO_REUSEADDR) => sockopt::set_socket_reuseaddr(f, v != 0),
            (SOL_SOCKET, SO_BROADCAST) => sockopt::set_socket_broadcast(f, v != 0),
            (SOL_SOCKET, SO_KEEPALIVE) => sockopt::set_socket_keepalive(f, v != 0),
            (SOL_SOCKET, SO_SNDBUF) => sockopt::set_socket_send_buffer_size(f, v.max(0) as usize),
            (SOL_SOCKET, SO_RCVBUF) => sockopt::set_socket_recv_buffer_size(f, v.max(0) as usize),
            (IPPROTO_TCP, TCP_NODELAY) => sockopt::set_tcp_nodelay(f, v != 0),
            (IPPROTO_IP, IP_TTL) => sockopt::set_ip_ttl(f, v.max(0) as u32),
            (IPPROTO_IPV6, IPV6_V6ONLY) => sockopt::set_ipv6_v6only(f, v != 0),
            _ => Err(rustix::io::Errno::NOPROTOOPT),
        }
    }

    /// An `int` option of the served list, and `SO_TYPE` and `SO_ERROR`.
    fn get_int(f: &File, level: i32, name: i32) -> rustix::io::Result<i32> {
        Ok(match (level, name) {
            (SOL_SOCKET, SO_REUSEADDR) => sockopt::socket_reuseaddr(f)?.into(),
            (SOL_SOCKET, SO_BROADCAST) => sockopt::socket_broadcast(f)?.into(),
            (SOL_SOCKET, SO_KEEPALIVE) => sockopt::socket_keepalive(f)?.into(),
            (SOL_SOCKET, SO_SNDBUF) => sockopt::socket_send_buffer_size(f)? as i32,
            (SOL_SOCKET, SO_RCVBUF) => sockopt::socket_recv_buffer_size(f)? as i32,
            (SOL_SOCKET, SO_TYPE) => sockopt::socket_type(f)?.as_raw() as i32,
            (SOL_SOCKET, SO_ERROR) => match sockopt::socket_error(f)? {
                Ok(()) => 0,
                Err(e) => e.raw_os_error(),
            },
            (IPPROTO_TCP, TCP_NODELAY) => sockopt::tcp_nodelay(f)?.into(),
            (IPPROTO_IP, IP_TTL) => sockopt::ip_ttl(f)? as i32,
            (IPPROTO_IPV6, IPV6_V6ONLY) => sockopt::ipv6_v6only(f)?.into(),
            _ => return Err(rustix::io::Errno::NOPROTOOPT),
        })
    }
}

/// What a socket call that found its socket not ready answers: `EAGAIN` at once when
/// the GPU made it non-blocking, asked not to wait (`MSG_DONTWAIT`) or its timeout
/// passed; otherwise it waits in the reactor for `interest`, at most the GPU's timeout in
/// direction `d`, with `progress` for its next attempt.
fn not_ready(
    (file, w): (&Arc<File>, &Waitable),
    dontwait: bool,
    interest: Interest,
    d: Direction,
    progress: u64,
) -> Errno {
    if dontwait || w.nonblocking() {
        return Errno(EAGAIN);
    }
    let watch = Watch {
        file: file.clone(),
        token: w.token,
        interest,
    };
    wait::until_ready(vec![watch], w.timeout(d), progress)
}

/// The attempt of a `connect` that waits for its connection, in the call's progress.
const CONNECTING: u64 = 1;

impl Net for Sockets {
    fn socket(&self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno> {
        if !self.policy.any() {
            return Err(Errno(EACCES));
        }
        let family = match domain {
            AF_INET => AddressFamily::INET,
            AF_INET6 => AddressFamily::INET6,
            _ => return Err(Errno(EAFNOSUPPORT)),
        };
        let (kind, proto) = match ty & !(SOCK_NONBLOCK | SOCK_CLOEXEC) {
            SOCK_STREAM => (SocketType::STREAM, IPPROTO_TCP),
            SOCK_DGRAM => (SocketType::DGRAM, IPPROTO_UDP),
            _ => return Err(Errno(EINVAL)),
        };
        let protocol = match protocol {
            0 => None,
            p if p == proto && p == IPPROTO_TCP => Some(ipproto::TCP),
            p if p == proto => Some(ipproto::UDP),
            _ => return Err(Errno(EPROTONOSUPPORT)),
        };
        self.files.table().socket_room().map_err(Errno)?;
        let flags = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
        let s = rustix::net::socket_with(family, kind, flags, protocol).map_err(os)?;
        self.enter(s, ty & SOCK_NONBLOCK != 0)
    }

    fn connect(&self, fd: i32, addr: &[u8]) -> Result<(), Errno> {
        let (s, w) = self.sock(fd)?;
        let attempt = wait::current();
        if attempt.progress == CONNECTING {
            // Woken (or timed out) waiting for the connection: how it went.
            return match sockopt::socket_error(&*s).map_err(os)? {
                Err(e) => Err(os(e)),
                Ok(()) if rustix::net::getpeername(&*s).is_ok_and(|p| p.is_some()) => Ok(()),
                Ok(()) if attempt.expired => Err(Errno(OsErrno::INPROGRESS.raw_os_error())),
                Ok(()) => Err(not_ready(
                    (&s, &w),
                    false,
                    Interest::WRITE,
                    Direction::Send,
                    CONNECTING,
                )),
            };
        }
        let a = granted(addr, |a| self.policy.may_connect(a))?;
        match rustix::net::connect(&*s, &a) {
            Err(OsErrno::INPROGRESS) if !w.nonblocking() => Err(not_ready(
                (&s, &w),
                false,
                Interest::WRITE,
                Direction::Send,
                CONNECTING,
            )),
            r => r.map_err(os),
        }
    }

    fn bind(&self, fd: i32, addr: &[u8]) -> Result<(), Errno> {
        let (s, _) = self.sock(fd)?;
        let a = granted(addr, |a| self.policy.may_bind(a))?;
        rustix::net::bind(&*s, &a).map_err(os)
    }

    fn listen(&self, fd: i32, backlog: i32) -> Result<(), Errno> {
        let (s, _) = self.sock(fd)?;
        // Where it would listen: where it is bound, or, unbound, every address of its
        // family and a port of Linux's choosing.
        let bound = rustix::net::getsockname(&*s)
            .map_err(os)
            .and_then(|a| SocketAddr::try_from(a).map_err(|_| Errno(EAFNOSUPPORT)))?;
        if !self.policy.may_listen(&bound) {
            return Err(Errno(EACCES));
        }
        rustix::net::listen(&*s, backlog.clamp(0, BACKLOG_MAX)).map_err(os)
    }

    fn accept(&self, fd: i32, flags: i32, peer: &mut [u8]) -> Result<i32, Errno> {
        let (s, w) = self.sock(fd)?;
        self.files.table().socket_room().map_err(Errno)?;
        let f = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
        match rustix::net::acceptfrom_with(&*s, f) {
            Ok((conn, addr)) => {
                put_addr(peer, addr)?;
                self.enter(conn, flags & SOCK_NONBLOCK != 0)
            }
            Err(OsErrno::AGAIN) => Err(not_ready(
                (&s, &w),
                false,
                Interest::READ,
                Direction::Receive,
                0,
            )),
            Err(e) => Err(os(e)),
        }
    }

    fn sendto(&self, fd: i32, data: &[u8], flags: i32, to: &[u8]) -> Result<usize, Errno> {
        let (s, w) = self.sock(fd)?;
        let dontwait = flags & MSG_DONTWAIT != 0;
        if to.is_empty() && !dontwait {
            // A connected socket's send, as a blocking one: all of it.
            let h = Handle {
                file: s,
                socket: true,
                wait: Some(w.clone()),
            };
            return write_ready(&h, &w, data).map_err(Errno);
        }
        let sent = if to.is_empty() {
            rustix::net::send(&*s, data, SendFlags::NOSIGNAL)
        } else {
            let a = granted(to, |a| self.policy.may_connect(a))?;
            rustix::net::sendto(&*s, data, SendFlags::NOSIGNAL, &a)
        };
        match sent {
            Err(OsErrno::AGAIN) => Err(not_ready(
                (&s, &w),
                dontwait,
                Interest::WRITE,
                Direction::Send,
                0,
            )),
            r => r.map_err(os),
        }
    }

    fn recvfrom(&self, fd: i32, flags: i32, out: &mut [u8]) -> Result<usize, Errno> {
        let (s, w) = self.sock(fd)?;
        if out.len() < SOCKADDR_MAX {
            return Err(Errno(EINVAL));
        }
        // `MSG_WAITALL` waits for something as a plain receive does, and then answers
        // what came (a short count; the bytes of an attempt that waited again would not
        // survive it).
        let mut f = RecvFlags::DONTWAIT;
        if flags & MSG_PEEK != 0 {
            f |= RecvFlags::PEEK;
        }
        let (addr, data) = out.split_at_mut(SOCKADDR_MAX);
        match rustix::net::recvfrom(&*s, data, f) {
            Ok((n, _, from)) => {
                put_addr(addr, from)?;
                Ok(n)
            }
            Err(OsErrno::AGAIN) => Err(not_ready(
                (&s, &w),
                flags & MSG_DONTWAIT != 0,
                Interest::READ,
                Direction::Receive,
                0,
            )),
            Err(e) => Err(os(e)),
        }
    }

    fn shutdown(&self, fd: i32, how: i32) -> Result<(), Errno> {
        let how = match how {
            SHUT_RD => Shutdown::Read,
            SHUT_WR => Shutdown::Write,
            SHUT_RDWR => Shutdown::Both,
            _ => return Err(Errno(EINVAL)),
        };
        rustix::net::shutdown(&*self.sock(fd)?.0, how).map_err(os)
    }

    fn setsockopt(&self, fd: i32, level: i32, name: i32, value: &[u8]) -> Result<(), Errno> {
        let (s, w) = self.sock(fd)?;
        match (level, name) {
            (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO) => {
                w.set_timeout(direction(name), timeout_of(value)?);
                Ok(())
            }
            (SOL_SOCKET, SO_LINGER) => {
                let (on, secs) = (int_of(value)?, int_of(value.get(4..).unwrap_or(&[]))?);
                let linger = (on != 0).then(|| Duration::from_secs(secs.max(0) as u64));
                // A linger of 0 resets the connection at close, which never waits: that
                // one is Linux's. Any other is only recorded.
                let host = linger.filter(|d| d.is_zero());
                sockopt::set_socket_linger(&*s, host).map_err(os)?;
                *w.linger.lock().unwrap_or_else(|p| p.into_inner()) = linger;
                Ok(())
            }
            _ => Sockets::set_int(&s, level, name, int_of(value)?).map_err(os),
        }
    }

    fn getsockopt(&self, fd: i32, level: i32, name: i32, out: &mut [u8]) -> Result<usize, Errno> {
        let (s, w) = self.sock(fd)?;
        match (level, name) {
            (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO) => {
                let d = w.timeout(direction(name)).unwrap_or_default();
                let mut tv = [0u8; 16];
                tv[..8].copy_from_slice(&(d.as_secs() as i64).to_ne_bytes());
                tv[8..].copy_from_slice(&i64::from(d.subsec_micros()).to_ne_bytes());
                put(out, &tv)
            }
            (SOL_SOCKET, SO_LINGER) => {
                let l = *w.linger.lock().unwrap_or_else(|p| p.into_inner());
                let mut v = [0u8; 8];
                v[..4].copy_from_slice(&i32::from(l.is_some()).to_ne_bytes());
                let secs = l.map_or(0, |d| d.as_secs().min(i32::MAX as u64) as i32);
                v[4..].copy_from_slice(&secs.to_ne_bytes());
                put(out, &v)
            }
            _ => put(
                out,
                &Sockets::get_int(&s, level, name).map_err(os)?.to_ne_bytes(),
            ),
        }
    }

    fn name(&self, fd: i32, peer: u32, out: &mut [u8]) -> Result<(), Errno> {
        let (s, _) = self.sock(fd)?;
        let addr = if peer != 0 {
            rustix::net::getpeername(&*s)
                .map_err(os)?
                .ok_or(Errno(ENOTCONN))?
        } else {
            rustix::net::getsockname(&*s).map_err(os)?
        };
        put_addr(out, Some(addr))
    }

    fn set_nonblocking(&self, fd: i32, on: u32) -> Result<(), Errno> {
        let (_, w) = self.sock(fd)?;
        w.nonblocking
            .store(on != 0, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn nonblocking(&self, fd: i32) -> Result<u32, Errno> {
        Ok(self.sock(fd)?.1.nonblocking().into())
    }

    fn poll(&self, fds: &[u8], timeout_ms: i32, revents: &mut [u8]) -> Result<usize, Errno> {
        let n = fds.len() / POLLFD_SIZE;
        if revents.len() < 2 * n {
            return Err(Errno(EINVAL));
        }
        let asked: Vec<(i32, i16)> = fds
            .as_chunks::<POLLFD_SIZE>()
            .0
            .iter()
            .map(|p| {
                let fd = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
                (fd, i16::from_ne_bytes([p[4], p[5]]))
            })
            .collect();
        let mut got = vec![0i16; n];
        // Sockets and pipes are polled on the host; a file or stdio is ready for
        // whatever it was asked, as Linux answers for a regular file.
        let mut waitable: Vec<(usize, Arc<File>, Arc<Waitable>)> = Vec::new();
        {
            let table = self.files.table();
            for (i, &(fd, events)) in asked.iter().enumerate() {
                if fd < 0 {
                    continue;
                }
                match table.handle(fd) {
                    Ok(Handle {
                        file,
                        wait: Some(w),
                        ..
                    }) => waitable.push((i, file, w)),
                    Ok(_) => got[i] = events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM),
                    Err(_) if (0..=2).contains(&fd) => {
                        got[i] = events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
                    }
                    Err(_) => got[i] = POLLNVAL,
                }
            }
        }
        let mut polled: Vec<PollFd<'_>> = waitable
            .iter()
            .map(|(i, f, _)| PollFd::new(&**f, PollFlags::from_bits_retain(asked[*i].1 as u16)))
            .collect();
        let ts = rustix::event::Timespec::default();
        match rustix::event::poll(&mut polled, Some(&ts)) {
            Ok(_) | Err(OsErrno::INTR) => {}
            Err(e) => return Err(os(e)),
        }
        for (p, (i, _, _)) in polled.iter().zip(&waitable) {
            got[*i] = p.revents().bits() as i16;
        }
        let ready = got.iter().filter(|&&r| r != 0).count();
        if ready == 0 && timeout_ms != 0 && wait::can_wait() {
            // Nothing yet: wait for any of them, at most the timeout (none when negative).
            let watches = waitable
                .iter()
                .map(|(i, f, w)| {
                    let events = asked[*i].1;
                    let write = events & (POLLOUT | POLLWRNORM) != 0;
                    Watch {
                        file: f.clone(),
                        token: w.token,
                        interest: Interest {
                            read: !write || events & !(POLLOUT | POLLWRNORM) != 0,
                            write,
                        },
                    }
                })
                .collect();
            let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
            return Err(wait::until_ready(watches, timeout, 0));
        }
        for (i, r) in got.iter().enumerate() {
            revents[2 * i..2 * i + 2].copy_from_slice(&r.to_ne_bytes());
        }
        Ok(ready)
    }

    fn resolve(&self, name: &[u8], out: &mut [u8]) -> Result<usize, Errno> {
        let name = std::str::from_utf8(name).map_err(|_| Errno(ENOENT))?;
        let ips = self.policy.resolve(name).ok_or(Errno(ENOENT))?;
        let mut at = 0;
        for ip in ips.iter().take(RESOLVED_MAX) {
            let rec: &mut [u8; SOCKADDR_MAX] = out
                .get_mut(at..at + SOCKADDR_MAX)
                .and_then(|o| o.try_into().ok())
                .ok_or(Errno(EINVAL))?;
            encode(&SocketAddr::new(*ip, 0), rec);
            at += SOCKADDR_MAX;
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_and_cover_what_they_name() {
        let mut p = NetPolicy::default();
        p.grant("127.0.0.1:8000-8010", false).unwrap();
        p.grant("[::1]:*", true).unwrap();
        assert!(p.may_connect(&"127.0.0.1:8005".parse().unwrap()));
        assert!(!p.may_connect(&"127.0.0.1:8011".parse().unwrap()));
        assert!(!p.may_connect(&"127.0.0.2:8005".parse().unwrap()));
        assert!(p.may_bind(&"[::1]:9".parse().unwrap()));
        assert!(
            !p.may_bind(&"127.0.0.1:8005".parse().unwrap()),
            "a connect grant lets no one listen"
        );
        assert!(
            p.may_bind(&"127.0.0.1:0".parse().unwrap()),
            "port 0 on a granted address"
        );
        assert!(!p.may_bind(&"0.0.0.0:0".parse().unwrap()));
        for bad in [
            "127.0.0.1",
            "127.0.0.1:70000",
            "127.0.0.1:9-3",
            "[::1:80",
            ":80",
        ] {
            assert!(p.grant(bad, false).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn only_granted_names_resolve() {
        let mut p = NetPolicy::default();
        p.grant("localhost:80", false).unwrap();
        assert!(p.resolve("LOCALHOST").is_some_and(|ips| !ips.is_empty()));
        assert_eq!(p.resolve("example.com"), None);
        assert_eq!(
            p.resolve("10.0.0.1"),
            Some(vec!["10.0.0.1".parse().unwrap()])
        );
    }
}
