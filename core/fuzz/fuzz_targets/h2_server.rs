//! Arbitrary bytes from a client, cut at arbitrary points, into a server
//! `Connection`: nothing may panic, every call must make progress, and the
//! connection answers each request it accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::h2::{Config, Connection, ErrorCode, Event, Role};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;

type Server = Connection<4, 4096, 2048, 16>;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the cut size; the connection is told the time
    // advances 1 ms per piece so the rate limits see a clock.
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut % 64) + 1;
    let mut server = Server::new(Role::Server, Config::default(), Instant::ZERO);
    let mut out = [0u8; 4096];
    let mut now = 0u64;
    // The preface is sent for the fuzzer so that it reaches the frame parser.
    let mut wire = Vec::with_capacity(input.len() + 24);
    wire.extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    wire.extend_from_slice(input);
    for piece in wire.chunks(cut) {
        now += 1000;
        let t = Instant::from_micros(now);
        let mut rest = piece;
        let mut stalls = 0;
        while !rest.is_empty() {
            let r = server.recv(rest, t);
            if let Some(d) = r.data {
                server.release_data(d.stream, d.bytes.len());
            }
            let mut progressed = r.consumed > 0 || r.data.is_some();
            rest = &rest[r.consumed..];
            while let Some(e) = server.poll_event() {
                progressed = true;
                if let Event::Headers {
                    stream,
                    end_stream: true,
                    ..
                } = e
                {
                    let _ = server.send_headers(stream, [Field::new(b":status", b"200")], true);
                } else if let Event::Headers { stream, .. } = e {
                    let _ = server.reset(stream, ErrorCode::CANCEL);
                }
            }
            while server.poll_transmit(&mut out) > 0 {
                progressed = true;
            }
            if !progressed {
                stalls += 1;
                assert!(stalls < 3, "recv makes no progress");
            }
        }
        server.handle_timeout(t);
    }
});
