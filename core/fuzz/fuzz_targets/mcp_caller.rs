//! `mcp_caller`: the client engine against a server whose answers come
//! from the fuzzer: response heads (any `:status`, `content-type`,
//! `grpc-status` in a trailers-only answer), DATA with any bytes (gRPC
//! framing that may lie), trailers with any `grpc-status`, `grpc-message`,
//! `mcp-error-code` and `mcp-error-bin`, and resets, cut at arbitrary
//! points. Nothing may panic, the client keeps consuming input, the text
//! of every event can be read, and every call it started ends.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::h2::{Config, Connection, ErrorCode, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::{CallId, ClientConfig, ClientEvent};
use mcpwire_core::time::Instant;

type Client = mcpwire_core::mcp::client::Client<SlabStore<4096, 8>, 4, 4096, 16384>;
type Server = Connection<8, 4096, 16384, 16>;

const REQUESTS: [&[u8]; 3] = [
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup","arguments":{"region":"eu","n":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}}"#,
    br#"{"jsonrpc":"2.0","id":"x","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
];

#[derive(Arbitrary, Debug)]
enum Step {
    /// Headers on the oldest unanswered request: (name index, value) pairs,
    /// `end` for trailers-only.
    Head {
        fields: Vec<(u8, Vec<u8>)>,
        end: bool,
    },
    /// Raw DATA on it.
    Data {
        bytes: Vec<u8>,
        end: bool,
    },
    /// One gRPC message holding these bytes, its length declared honestly.
    Message(Vec<u8>),
    /// Trailers on it.
    Trailers(Vec<(u8, Vec<u8>)>),
    Reset(u32),
    /// Let time pass (milliseconds).
    Wait(u16),
    /// Start another call.
    Call(u8),
    /// Cancel the newest call.
    Cancel,
}

const NAMES: [&[u8]; 9] = [
    b":status",
    b"content-type",
    b"grpc-status",
    b"grpc-message",
    b"mcp-error-code",
    b"mcp-error-bin",
    b"www-authenticate",
    b"grpc-encoding",
    b"x-other",
];

#[derive(Arbitrary, Debug)]
struct Input {
    cut: u8,
    calls: u8,
    steps: Vec<Step>,
}

struct World {
    client: Box<Client>,
    server: Box<Server>,
    up: Vec<u8>,
    down: Vec<u8>,
    cut: usize,
    now: u64,
    /// The server's streams, oldest first.
    streams: Vec<StreamRef>,
    started: Vec<CallId>,
    ended: Vec<CallId>,
}

fuzz_target!(|input: Input| {
    let mut w = World {
        client: Box::new(Client::new(
            ClientConfig::default(),
            SlabStore::new(),
            Instant::ZERO,
        )),
        server: Box::new(Server::new(Role::Server, Config::default(), Instant::ZERO)),
        up: Vec::new(),
        down: Vec::new(),
        cut: usize::from(input.cut % 64) + 1,
        now: 0,
        streams: Vec::new(),
        started: Vec::new(),
        ended: Vec::new(),
    };
    for k in 0..input.calls % 4 + 1 {
        w.start(k);
    }
    w.pump();
    for step in input.steps.iter().take(64) {
        let target = w.streams.first().copied();
        match step {
            Step::Head { fields, end } => {
                if let Some(s) = target {
                    let list = fields_of(fields);
                    let _ = w.server.send_headers(s, list.iter().copied(), *end);
                }
            }
            Step::Data { bytes, end } => {
                if let Some(s) = target {
                    let _ = w.server.send_data(s, bytes, *end);
                }
            }
            Step::Message(m) => {
                if let Some(s) = target {
                    let mut framed = vec![0u8];
                    framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
                    framed.extend_from_slice(m);
                    let _ = w.server.send_data(s, &framed, false);
                }
            }
            Step::Trailers(fields) => {
                if let Some(s) = target {
                    let list = fields_of(fields);
                    let _ = w.server.send_headers(s, list.iter().copied(), true);
                    w.streams.remove(0);
                }
            }
            Step::Reset(code) => {
                if let Some(s) = target {
                    let _ = w.server.reset(s, ErrorCode(*code));
                    w.streams.remove(0);
                }
            }
            Step::Wait(ms) => {
                w.now += u64::from(*ms) * 1000;
                w.client.handle_timeout(Instant::from_micros(w.now));
                w.server.handle_timeout(Instant::from_micros(w.now));
            }
            Step::Call(k) => w.start(*k),
            Step::Cancel => {
                // No event follows a cancel: the call is over.
                if let Some(c) = w.started.pop() {
                    w.client.cancel(c);
                }
            }
        }
        w.pump();
    }
    // Past every deadline (listen calls have none: the server ends them).
    w.now += 3_600_000_000;
    w.client.handle_timeout(Instant::from_micros(w.now));
    w.server.handle_timeout(Instant::from_micros(w.now));
    while let Some(s) = w.streams.pop() {
        let _ = w.server.reset(s, ErrorCode::CANCEL);
    }
    w.pump();
    // Every stream was reset or answered and every deadline passed: each
    // call has ended (with an `Ended` event), or the connection is over.
    for c in &w.started {
        assert!(
            w.ended.contains(c) || w.client.is_closed(),
            "call {c:?} did not end"
        );
        assert!(!w.client.is_active(*c), "an ended call is still active");
    }
});

fn fields_of(fields: &[(u8, Vec<u8>)]) -> Vec<Field<'_>> {
    fields
        .iter()
        .take(12)
        .map(|(n, v)| Field::new(NAMES[usize::from(*n) % NAMES.len()], v))
        .collect()
}

impl World {
    fn start(&mut self, k: u8) {
        let body = REQUESTS[usize::from(k) % REQUESTS.len()];
        let timeout = (k % 2 == 0).then(|| core::time::Duration::from_secs(5));
        if let Ok(c) = self
            .client
            .call(body, timeout, Instant::from_micros(self.now))
        {
            self.started.push(c);
        }
    }

    fn pump(&mut self) {
        let t = Instant::from_micros(self.now);
        let mut buf = [0u8; 8192];
        for _ in 0..10_000 {
            let mut moved = false;
            let client = &mut self.client;
            moved |= drain_into(&mut self.up, &mut buf, |b| client.poll_transmit(b));
            if !self.up.is_empty() {
                let r = self.server.recv(&self.up, t);
                if let Some(d) = r.data {
                    self.server.release_data(d.stream, d.bytes.len());
                }
                let used = r.consumed;
                self.up.drain(..used);
                moved |= used > 0;
                while let Some(e) = self.server.poll_event() {
                    if let Event::Headers { stream, .. } = e
                        && !self.streams.contains(&stream)
                    {
                        self.streams.push(stream);
                    }
                }
            }
            let server = &mut self.server;
            moved |= drain_into(&mut self.down, &mut buf, |b| server.poll_transmit(b));
            if !self.down.is_empty() {
                let piece = &self.down[..self.down.len().min(self.cut)];
                let used = self.client.recv(piece, t);
                self.down.drain(..used);
                moved |= used > 0;
            }
            while let Some(e) = self.client.poll_event() {
                moved = true;
                match e {
                    ClientEvent::Notification { call } | ClientEvent::Response { call } => {
                        assert!(self.client.message(call).is_some(), "{e:?} without text");
                    }
                    ClientEvent::Failed { call } => {
                        let failure = self.client.failure(call);
                        assert!(failure.is_some(), "{e:?} without a failure");
                        assert_eq!(
                            self.client.message(call),
                            failure.map(|f| f.response),
                            "the failure's response is the call's message"
                        );
                    }
                    ClientEvent::Ended { call } => self.ended.push(call),
                    ClientEvent::Warning { call, .. } => {
                        assert!(self.client.warning_tool(call).is_some());
                    }
                    // The link, readiness and input events come from the
                    // engines that drive links; this connection has one.
                    _ => {}
                }
            }
            if !moved {
                assert!(
                    self.down.is_empty() || self.client.is_closed(),
                    "the client stopped reading ({} octets left)",
                    self.down.len()
                );
                return;
            }
        }
        panic!("no quiet state after 10000 turns");
    }
}

/// Appends everything `poll` writes (a `poll_transmit`) to `queue`; whether
/// anything came.
fn drain_into(
    queue: &mut Vec<u8>,
    buf: &mut [u8],
    mut poll: impl FnMut(&mut [u8]) -> usize,
) -> bool {
    let mut any = false;
    loop {
        let n = poll(buf);
        if n == 0 {
            return any;
        }
        queue.extend_from_slice(&buf[..n]);
        any = true;
    }
}
