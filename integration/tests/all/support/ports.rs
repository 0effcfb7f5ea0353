//! Loopback ports for the tests' own servers, and closed ports, that
//! nothing else can take between the choosing and the using.
//!
//! Asking the kernel for a free port and letting it go (`bind` to port 0,
//! then drop) leaves the port free for anyone: a parallel test's private
//! server took the "closed" port of another test (issue 37). Here a
//! server's port is [`reserve`]d: below the kernel's ephemeral range, so
//! no `bind` to port 0 and no outgoing connection is ever given it, and
//! claimed by a socket bound to the same port on 127.0.0.2 (never
//! listening), held as long as the [`Reserved`] lives: the kernel lets one
//! socket at a time have that address, so no other test, in this process or
//! another, claims the port meanwhile, and a test process that dies
//! releases it. A [`Closed`] port is a socket bound and never listening: connecting
//! is refused, and no one else can bind it.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

/// A loopback port this test may start a server on, its own until dropped.
#[derive(Debug)]
pub(crate) struct Reserved {
    pub(crate) port: u16,
    _claim: tokio::net::TcpSocket,
}

/// A free loopback port for a server of the test's own, reserved until
/// the returned value is dropped.
pub(crate) fn reserve() -> Reserved {
    let (low, high) = reservable_range();
    let span = u32::from(high - low);
    let start = idem::store::Token::random().to_u128() as u32 % span;
    for offset in 0..span {
        let port = low + ((start + offset) % span) as u16;
        let Some(claim) = claim(port) else { continue };
        // Free of programs outside the suite too, at least now.
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Reserved {
                port,
                _claim: claim,
            };
        }
    }
    panic!("no loopback port in {low}..{high} could be reserved");
}

/// A loopback port nothing listens on, kept so while the value lives.
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) port: u16,
    _socket: tokio::net::TcpSocket,
}

/// A closed loopback port: bound, so no one else can take it, and never
/// listening, so a connection to it is refused.
pub(crate) fn closed() -> Closed {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .expect("bind a loopback port");
    let port = socket.local_addr().expect("the bound address").port();
    Closed {
        port,
        _socket: socket,
    }
}

/// Ports below the kernel's ephemeral range (the 8,000 under it, or under
/// 32768 where the range cannot be read).
fn reservable_range() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let high = ephemeral_low.max(10_000);
    (high - 8_000, high)
}

/// A socket bound to 127.0.0.2:`port`, if no one else holds that address.
fn claim(port: u16) -> Option<tokio::net::TcpSocket> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket
        .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port)))
        .ok()?;
    Some(socket)
}
