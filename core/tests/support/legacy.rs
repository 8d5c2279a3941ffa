//! A scripted server of the older Streamable HTTP shapes (MCP 2026-07-28
//! §13), for the client's era fallback: there is no core server engine of
//! them. One [`LegacyLink`] per link of the [`Net`](super::net::Net), all
//! sharing one [`Legacy`] state (the session, the 2024 event stream, what
//! was asked), speaking HTTP/1.1 over the harness's pipes:
//!
//! - [`Shape::Session`] (2025-11-25): a request before `initialize` is
//!   answered 400 with -32000 and no id (as the TypeScript SDK's server
//!   does); `initialize` gives `Mcp-Session-Id`; every later request must
//!   carry it (400 otherwise; 404 for a session the server ended,
//!   [`Legacy::end_session`]); `DELETE` ends the session.
//! - [`Shape::HttpSse`] (2024-11-05): `POST` to the endpoint is 405; `GET`
//!   opens the event stream whose first event is `endpoint`, naming
//!   `/messages?sessionId=abc`; messages `POST`ed there are answered 202,
//!   their responses go on the stream.
//!
//! A `tools/call` of `hold` is never answered; a
//! `notifications/cancelled` is logged with the id it cancels.

use std::cell::RefCell;
use std::rc::Rc;

use mcpwire_core::drive::Endpoint;
use mcpwire_core::time::Instant;
use serde_json::{Value, json};

use super::net::Served;

/// Which older shape the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Session,
    HttpSse,
    /// No MCP server: every request is answered 404.
    Nothing,
    /// A modern server of another version: every request is answered
    /// 400 with -32022 naming only `2027-01-01`.
    OtherVersion,
}

/// What every link of the server shares.
#[derive(Debug)]
pub struct Legacy {
    pub shape: Shape,
    /// Each request as `METHOD target jsonrpc-method session=.. version=..`,
    /// with `modern-meta` when its body carried a modern `_meta` key, and
    /// `cancels=ID` for a `notifications/cancelled`.
    pub requests: Vec<String>,
    /// Events owed on the 2024 stream.
    stream_out: Vec<u8>,
    /// Sessions opened so far: the current one is `s-{sessions}`.
    sessions: u32,
}

impl Legacy {
    pub fn new(shape: Shape) -> Rc<RefCell<Self>> {
        Rc::new(RefCell::new(Self {
            shape,
            requests: Vec::new(),
            stream_out: Vec::new(),
            sessions: 0,
        }))
    }

    /// The server forgets the current session (it expired): a request
    /// that carries its id is answered 404 (§13.2).
    pub fn end_session(&mut self) {
        self.sessions += 1;
    }
}

const SESSION: &str = "s-1";
const MESSAGES: &str = "/messages?sessionId=abc";

/// One link's end of the scripted server.
pub struct LegacyLink {
    shared: Rc<RefCell<Legacy>>,
    input: Vec<u8>,
    output: Vec<u8>,
    /// This link carries the 2024 event stream.
    stream: bool,
}

impl LegacyLink {
    pub fn new(shared: Rc<RefCell<Legacy>>) -> Self {
        Self {
            shared,
            input: Vec::new(),
            output: Vec::new(),
            stream: false,
        }
    }

    fn respond(&mut self, status: &str, fields: &[(&str, &str)], body: &str) {
        let mut head = format!("HTTP/1.1 {status}\r\n");
        for (n, v) in fields {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        self.output.extend_from_slice(head.as_bytes());
        self.output.extend_from_slice(body.as_bytes());
    }

    fn json(&mut self, status: &str, fields: &[(&str, &str)], body: &Value) {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(fields);
        self.respond(status, &all, &body.to_string());
    }

    /// Takes every whole request of the input.
    fn serve_input(&mut self) {
        loop {
            let Some(end) = self.input.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            let head = String::from_utf8_lossy(&self.input[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let line: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
            let fields: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
            let len: usize = field("content-length").map_or(0, |v| v.parse().unwrap());
            if self.input.len() < end + 4 + len {
                return;
            }
            let body = self.input[end + 4..end + 4 + len].to_vec();
            self.input.drain(..end + 4 + len);
            let (method, target) = (line[0].to_owned(), line[1].to_owned());
            self.request(&method, &target, &field, &body);
        }
    }

    fn request(
        &mut self,
        method: &str,
        target: &str,
        field: &dyn Fn(&str) -> Option<String>,
        body: &[u8],
    ) {
        let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let rpc = message["method"].as_str().unwrap_or("").to_owned();
        let session = field("mcp-session-id");
        let mut seen = format!(
            "{method} {target} {rpc} session={} version={}",
            session.as_deref().unwrap_or("-"),
            field("mcp-protocol-version").as_deref().unwrap_or("-"),
        );
        if String::from_utf8_lossy(body).contains("io.modelcontextprotocol/") {
            seen.push_str(" modern-meta");
        }
        if rpc == "notifications/cancelled" {
            seen.push_str(&format!(" cancels={}", message["params"]["requestId"]));
        }
        if message["params"]["name"] == "hold" {
            // Never answered (on the 2024 shape: accepted, no event).
            self.shared.borrow_mut().requests.push(seen);
            if self.shared.borrow().shape == Shape::HttpSse {
                self.respond("202 Accepted", &[], "Accepted");
            }
            return;
        }
        let shape = {
            let mut shared = self.shared.borrow_mut();
            shared.requests.push(seen);
            shared.shape
        };
        match shape {
            Shape::Session => self.session_request(method, &rpc, session, &message),
            Shape::HttpSse => self.http_sse_request(method, target, &rpc, &message),
            Shape::Nothing => self.respond("404 Not Found", &[], "no such page"),
            Shape::OtherVersion => {
                let error = json!({"jsonrpc":"2.0","id":message["id"],"error":{"code":-32022,
                    "message":"Unsupported protocol version",
                    "data":{"supported":["2027-01-01"],"requested":"2026-07-28"}}});
                self.json("400 Bad Request", &[], &error);
            }
        }
    }

    fn session_request(
        &mut self,
        method: &str,
        rpc: &str,
        session: Option<String>,
        message: &Value,
    ) {
        let current = {
            let n = self.shared.borrow().sessions;
            match n {
                0 => SESSION.to_owned(),
                n => format!("s-{}", n + 1),
            }
        };
        if rpc == "initialize" {
            let result = json!({"jsonrpc":"2.0","id":message["id"],"result":{
                "protocolVersion":"2025-11-25","capabilities":{"tools":{}},
                "serverInfo":{"name":"legacy","version":"1"}}});
            return self.json("200 OK", &[("Mcp-Session-Id", &current)], &result);
        }
        if let Some(old) = session.as_deref()
            && old != current
            && old.starts_with("s-")
        {
            return self.respond("404 Not Found", &[], "");
        }
        if session.as_deref() != Some(current.as_str()) {
            let error = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32000,
                "message":"Bad Request: Server not initialized"}});
            return self.json("400 Bad Request", &[], &error);
        }
        match (method, rpc) {
            ("DELETE", _) => self.respond("200 OK", &[], ""),
            (_, r) if r.starts_with("notifications/") => self.respond("202 Accepted", &[], ""),
            _ => {
                let answer = answer(message);
                self.json("200 OK", &[], &answer);
            }
        }
    }

    fn http_sse_request(&mut self, method: &str, target: &str, rpc: &str, message: &Value) {
        match (method, target) {
            ("GET", _) => {
                self.stream = true;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
                self.output.extend_from_slice(head.as_bytes());
                self.output
                    .extend_from_slice(format!("event: endpoint\ndata: {MESSAGES}\n\n").as_bytes());
            }
            ("POST", MESSAGES) => {
                self.respond("202 Accepted", &[], "Accepted");
                if message.get("id").is_none() || rpc.starts_with("notifications/") {
                    return;
                }
                let answer = if rpc == "initialize" {
                    json!({"jsonrpc":"2.0","id":message["id"],"result":{
                        "protocolVersion":"2024-11-05","capabilities":{"tools":{}},
                        "serverInfo":{"name":"legacy-sse","version":"1"}}})
                } else {
                    answer(message)
                };
                let event = format!("event: message\ndata: {answer}\n\n");
                self.shared
                    .borrow_mut()
                    .stream_out
                    .extend_from_slice(event.as_bytes());
            }
            _ => self.respond("405 Method Not Allowed", &[("Allow", "GET")], ""),
        }
    }
}

/// The answer to an ordinary request: `echo` returns its text.
fn answer(message: &Value) -> Value {
    match message["params"]["name"].as_str() {
        Some("echo") => {
            let text = message["params"]["arguments"]["text"].clone();
            json!({"jsonrpc":"2.0","id":message["id"],"result":{
                "content":[{"type":"text","text":text}]}})
        }
        _ => json!({"jsonrpc":"2.0","id":message["id"],"error":{"code":-32601,
            "message":"Method not found"}}),
    }
}

impl Endpoint for LegacyLink {
    fn recv(&mut self, input: &[u8], _now: Instant) -> usize {
        self.input.extend_from_slice(input);
        self.serve_input();
        input.len()
    }
    fn wants_transmit(&self) -> bool {
        !self.output.is_empty() || (self.stream && !self.shared.borrow().stream_out.is_empty())
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        if self.stream {
            let owed = std::mem::take(&mut self.shared.borrow_mut().stream_out);
            self.output.extend_from_slice(&owed);
        }
        let n = self.output.len().min(out.len());
        out[..n].copy_from_slice(&self.output[..n]);
        self.output.drain(..n);
        n
    }
}

impl Served for LegacyLink {
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn recv_eof(&mut self) {}
    fn serve(&mut self) {}
    fn go_away(&mut self) {}
    fn requests(&self) -> Vec<String> {
        self.shared.borrow().requests.clone()
    }
}
