//! A first end-to-end exchange between our client and server connections.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::h2::{Config, Connection, Event, HeadersKind, Role};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;

type Conn = Connection<8, 4096, 16384, 64>;

fn pump(from: &mut Conn, to: &mut Conn, log: &mut Vec<String>, now: Instant) {
    let mut buf = [0u8; 4096];
    loop {
        let n = from.poll_transmit(&mut buf);
        if n == 0 {
            break;
        }
        let mut input = &buf[..n];
        while !input.is_empty() {
            let r = to.recv(input, now);
            if let Some(d) = r.data {
                log.push(format!("data {} {}", d.bytes.len(), d.end_stream));
                to.release_data(d.stream, d.bytes.len());
            }
            input = &input[r.consumed..];
            while let Some(e) = to.poll_event() {
                log.push(match e {
                    Event::Headers {
                        stream,
                        kind,
                        end_stream,
                    } => {
                        let n = to.headers(stream).map_or(0, |f| f.iter().count());
                        format!("headers {kind:?} {n} {end_stream}")
                    }
                    other => format!("{other:?}"),
                });
            }
        }
    }
}

#[test]
fn request_and_response() {
    let now = Instant::ZERO;
    let mut client = Conn::new(Role::Client, Config::default(), now);
    let mut server = Conn::new(Role::Server, Config::default(), now);
    let s = client.open_stream().unwrap();
    client
        .send_headers(
            s,
            [
                Field::new(b":method", b"POST"),
                Field::new(b":scheme", b"http"),
                Field::new(b":path", b"/x"),
                Field::new(b":authority", b"localhost"),
            ],
            false,
        )
        .unwrap();
    let body = vec![7u8; 3_000_000];
    let mut sent = 0;
    let mut log = Vec::new();
    for _ in 0..10_000 {
        if sent < body.len() {
            sent += client.send_data(s, &body[sent..], true).unwrap();
        }
        pump(&mut client, &mut server, &mut log, now);
        pump(&mut server, &mut client, &mut log, now);
        while client.poll_event().is_some() {}
        if sent == body.len() && !client.wants_transmit() {
            break;
        }
    }
    println!("{:#?}", &log[..log.len().min(20)]);
    assert!(log.iter().any(|l| l.starts_with("headers Request 4 false")));
    let total: usize = log
        .iter()
        .filter_map(|l| {
            l.strip_prefix("data ")
                .and_then(|r| r.split(' ').next())
                .map(|n| n.parse::<usize>().unwrap())
        })
        .sum();
    assert_eq!(total, body.len());
    assert!(
        log.iter()
            .any(|l| l == "data 0 true" || l.ends_with(" true"))
    );
    let _ = HeadersKind::Request;
}
