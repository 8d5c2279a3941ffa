//! The client engine's keepalive PINGs against a bare HTTP/2 server
//! connection that is answered, or left silent, by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::h2::{Config, Connection, Role};
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::{Client, ClientConfig, ClientEvent, Keepalive};
use mcpwire_core::time::Instant;

type Cl = Client<SlabStore<4096, 8>, 4, 4096, 16384>;
type Sv = Connection<4, 4096, 16384, 64>;

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

/// Everything the client writes now.
fn out(c: &mut Cl) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = c.poll_transmit(&mut buf);
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&buf[..n]);
    }
}

/// The (type, flags, payload) of each whole frame in `bytes`, after the
/// client preface when it is there.
fn frames(bytes: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut b = bytes.strip_prefix(&preface[..]).unwrap_or(bytes);
    let mut v = Vec::new();
    while b.len() >= 9 {
        let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
        v.push((b[3], b[4], b[9..9 + len].to_vec()));
        b = &b[9 + len..];
    }
    v
}

fn pings(bytes: &[u8]) -> Vec<[u8; 8]> {
    frames(bytes)
        .into_iter()
        .filter(|(t, f, _)| *t == 6 && f & 1 == 0)
        .map(|(_, _, p)| p.try_into().unwrap())
        .collect()
}

/// Feeds `bytes` to the server and gives what it answers.
fn server_answers(s: &mut Sv, bytes: &[u8], now: Instant) -> Vec<u8> {
    let mut at = 0;
    while at < bytes.len() {
        at += s.recv(&bytes[at..], now).consumed;
        while s.poll_event().is_some() {}
    }
    let mut all = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = s.poll_transmit(&mut buf);
        while s.poll_event().is_some() {}
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&buf[..n]);
    }
}

fn client_reads(c: &mut Cl, bytes: &[u8], now: Instant, seen: &mut Vec<(Code, String)>) {
    let mut at = 0;
    while at < bytes.len() {
        at += c.recv(&bytes[at..], now);
        take(c, seen);
    }
}

/// The failures the application saw: (status, message).
fn take(c: &mut Cl, seen: &mut Vec<(Code, String)>) {
    while let Some(e) = c.poll_event() {
        if let ClientEvent::Failed { call } = e {
            let f = c.failure(call).unwrap();
            let status = f.diagnostics.grpc_status.unwrap_or(Code::Unknown);
            seen.push((status, String::from_utf8_lossy(f.message).into_owned()));
        }
    }
}

/// A client with `keepalive` connected to a server (handshake done) with
/// one call open at 0 ms that the server never answers.
fn connected(keepalive: Option<Keepalive>) -> (Cl, Sv, Vec<(Code, String)>) {
    handshake(keepalive, true)
}

/// The same without a call.
fn idle(keepalive: Option<Keepalive>) -> (Cl, Sv, Vec<(Code, String)>) {
    handshake(keepalive, false)
}

fn handshake(keepalive: Option<Keepalive>, call: bool) -> (Cl, Sv, Vec<(Code, String)>) {
    let config = ClientConfig {
        keepalive,
        ..ClientConfig::default()
    };
    let mut c = Cl::new(config, SlabStore::new(), ms(0));
    let mut s = Sv::new(Role::Server, Config::default(), ms(0));
    let mut seen = Vec::new();
    if call {
        c.call(CALL, None, ms(0)).unwrap();
    }
    let hello = out(&mut c);
    let answer = server_answers(&mut s, &hello, ms(0));
    client_reads(&mut c, &answer, ms(0), &mut seen);
    let acks = out(&mut c);
    server_answers(&mut s, &acks, ms(0));
    (c, s, seen)
}

fn keepalive() -> Option<Keepalive> {
    Some(Keepalive::new(
        Duration::from_millis(200),
        Duration::from_millis(200),
    ))
}

#[test]
fn an_unanswered_ping_fails_the_open_call_with_unavailable() {
    let (mut c, _silent, mut seen) = connected(keepalive());
    assert_eq!(c.poll_timeout(), Some(ms(200)));
    c.handle_timeout(ms(200));
    take(&mut c, &mut seen);
    let ping = out(&mut c);
    assert_eq!(pings(&ping).len(), 1, "{:?}", frames(&ping));
    assert_eq!(c.poll_timeout(), Some(ms(400)));
    // Not yet.
    c.handle_timeout(ms(399));
    take(&mut c, &mut seen);
    assert!(seen.is_empty());
    c.handle_timeout(ms(400));
    take(&mut c, &mut seen);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, Code::Unavailable);
    assert!(seen[0].1.contains("stopped answering pings"), "{seen:?}");
    // A GOAWAY goes out, then the connection is over.
    let last = out(&mut c);
    assert!(frames(&last).iter().any(|(t, _, _)| *t == 7));
    assert!(c.is_closed());
    assert!(!c.accepts_calls());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn answered_pings_keep_the_call_alive_over_many_intervals() {
    let (mut c, mut s, mut seen) = connected(keepalive());
    let mut sent = Vec::new();
    let mut t = 0;
    for _ in 0..10 {
        let due = c.poll_timeout().unwrap();
        t = due.as_micros() / 1000;
        c.handle_timeout(due);
        take(&mut c, &mut seen);
        let ping = out(&mut c);
        let p = pings(&ping);
        assert_eq!(p.len(), 1);
        sent.extend(p);
        let ack = server_answers(&mut s, &ping, due);
        client_reads(&mut c, &ack, due + Duration::from_millis(10), &mut seen);
    }
    assert!(seen.is_empty(), "{seen:?}");
    assert!(!c.is_closed());
    assert!(t >= 10 * 200, "ten intervals passed: {t} ms");
    // Each PING has its own payload.
    sent.dedup();
    assert_eq!(sent.len(), 10);
}

#[test]
fn any_input_answers_a_ping_and_a_stray_ack_too() {
    let (mut c, _s, mut seen) = connected(keepalive());
    c.handle_timeout(ms(200));
    assert_eq!(pings(&out(&mut c)).len(), 1);
    // An ACK of a PING never sent: not ours, but the peer is alive, and
    // the next PING is due an interval after it.
    let mut stray = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
    stray.extend_from_slice(b"notyours");
    client_reads(&mut c, &stray, ms(250), &mut seen);
    assert_eq!(c.poll_timeout(), Some(ms(450)));
    c.handle_timeout(ms(450));
    assert_eq!(pings(&out(&mut c)).len(), 1);
    c.handle_timeout(ms(650));
    take(&mut c, &mut seen);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, Code::Unavailable);
}

#[test]
fn keepalive_off_writes_no_ping() {
    let (mut c, _silent, mut seen) = connected(None);
    // Only the call's own deadline (60 s by default) is pending.
    assert_eq!(c.poll_timeout(), Some(ms(60_000)));
    for t in [200, 1_000, 30_000] {
        c.handle_timeout(ms(t));
        take(&mut c, &mut seen);
        assert!(pings(&out(&mut c)).is_empty());
    }
    assert!(seen.is_empty());
}

#[test]
fn no_ping_while_idle_unless_asked() {
    let (mut c, _s, mut seen) = idle(keepalive());
    assert_eq!(c.poll_timeout(), None);
    c.handle_timeout(ms(10_000));
    assert!(pings(&out(&mut c)).is_empty());
    // A call opening starts the quiet spell.
    c.call(CALL, None, ms(10_000)).unwrap();
    let _ = out(&mut c);
    assert_eq!(c.poll_timeout(), Some(ms(10_200)));
    take(&mut c, &mut seen);
    assert!(seen.is_empty());

    let (mut d, _s, _) = idle(Some(Keepalive {
        while_idle: true,
        ..keepalive().unwrap()
    }));
    assert_eq!(d.poll_timeout(), Some(ms(200)));
    d.handle_timeout(ms(200));
    assert_eq!(pings(&out(&mut d)).len(), 1);
}
