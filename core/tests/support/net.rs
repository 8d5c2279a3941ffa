//! A client engine ([`ClientEngine`]) and the servers its links reach, in
//! one thread on a virtual clock: every link the engine asks for gets a
//! fresh server engine (made by the test, or refused) and two pipes of
//! `mcpwire-sim` cut as [`split`](super::mcp::split) says; the engine's
//! events are recorded per call as they come (a notification's text is
//! read before the next `recv`, as the run loop says).

use std::collections::HashMap;

use mcpwire_core::drive::Endpoint;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::client::{
    CallId, CallOptions, ClientEngine, ClientEvent, Diagnostics, LinkId, Negotiated, StartError,
};
use mcpwire_core::mcp::meta::ParamsIndex;
use mcpwire_core::mcp::server::{RequestKind, SendError, ServerEngine, ServerEvent};
use mcpwire_core::time::Instant;
use mcpwire_sim::Pipe;

use super::mcp::split;

/// Room in each direction of a link's pipes.
const PIPE: usize = 32768;

/// What the application saw of a call.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub notifications: Vec<String>,
    pub response: Option<String>,
    /// Code, message (raw JSON string), diagnostics.
    pub failed: Option<(i32, String, Diagnostics)>,
    /// The failure's `WWW-Authenticate`.
    pub www_authenticate: Option<String>,
    /// The failure's whole JSON-RPC error response.
    pub error_response: Option<String>,
    /// What the engine reported of the exchange with its outcome.
    pub diagnostics: Option<Diagnostics>,
    /// At each `InputRequired`: what the server asks (`input_requests`)
    /// and the whole result (`result`).
    pub inputs: Vec<(String, String)>,
    pub ended: bool,
}

/// What a server engine of a link needs beyond its octets.
pub trait Served: Endpoint {
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    fn recv_eof(&mut self);
    /// Answers what its application must (the test's tools).
    fn serve(&mut self);
    /// The server goes away (GOAWAY, the end of its input...).
    fn go_away(&mut self);
    /// Answers every held call with an empty result.
    fn answer_held(&mut self) {}
    /// The server is over: once its output is read, the client's link
    /// ends (end of file).
    fn finished(&self) -> bool {
        false
    }
    /// Calls of the server that were cancelled (the client reset or
    /// closed them).
    fn cancelled(&self) -> usize {
        0
    }
    /// Requests the server's application saw, as `method` or
    /// `method name` (the tool called).
    fn requests(&self) -> Vec<String> {
        Vec::new()
    }
    /// The `tools/call` requests of the multi round-trip tools (`ask`,
    /// `nag`) the server saw: `tool id=<id> state=<requestState>
    /// responses=<inputResponses> caps=<clientCapabilities>` (`-` for a
    /// member left out).
    fn rounds(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The result of the multi round-trip tools of the test server, for a
/// request with `state` (`params.requestState`, raw) and `responses`
/// (`params.inputResponses`, raw): `ask` asks for a name, then whether to
/// greet it (the name travels in its `requestState`), then greets; `nag`
/// asks for the roots for ever, with a `requestState` every other round
/// (when the request had none).
pub fn rounds_result(tool: &str, state: Option<&[u8]>, responses: Option<&[u8]>) -> String {
    let state: Option<String> = state.map(|s| serde_json::from_slice(s).unwrap());
    let responses: serde_json::Value = responses
        .map(|r| serde_json::from_slice(r).unwrap())
        .unwrap_or_default();
    let asks = |requests: serde_json::Value, state: Option<&str>| {
        let mut r = serde_json::json!({"resultType": "input_required", "inputRequests": requests});
        if let Some(state) = state {
            r["requestState"] = state.into();
        }
        r.to_string()
    };
    match (tool, state.as_deref()) {
        ("ask", None) => asks(
            serde_json::json!({"name": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object",
                    "properties": {"name": {"type": "string"}}}}}}),
            Some("s1"),
        ),
        ("ask", Some("s1")) => {
            let name = responses["name"]["content"]["name"].as_str().unwrap_or("?");
            asks(
                serde_json::json!({"confirm": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": format!("Greet {name}?"),
                    "requestedSchema": {"type": "object"}}}}),
                Some(&format!("s2:{name}")),
            )
        }
        ("ask", Some(state)) => {
            let name = state.strip_prefix("s2:").unwrap_or("?");
            let text = match responses["confirm"]["action"].as_str() {
                Some("accept") => format!("hello {name}"),
                _ => "no greeting".to_owned(),
            };
            serde_json::json!({"resultType": "complete",
                "content": [{"type": "text", "text": text}]})
            .to_string()
        }
        (_, state) => asks(
            serde_json::json!({"again": {"method": "roots/list"}}),
            state.is_none().then_some("nag"),
        ),
    }
}

/// A server engine with a small application: `echo` answers its `text`
/// (after a `notifications/progress` when the request has a progress
/// token), `lookup` answers `found`, every other tool call is kept
/// (unanswered) in `held`; with `token`, only requests carrying that
/// bearer token are authorized.
pub struct Server<E> {
    pub engine: E,
    pub held: Vec<mcpwire_core::mcp::server::CallId>,
    pub token: Option<&'static str>,
    /// Calls the engine cancelled.
    pub cancelled: Vec<mcpwire_core::mcp::server::CallId>,
    /// `method` or `method name` of every request handed to the application.
    pub requests: Vec<String>,
    /// The requests of the multi round-trip tools ([`Served::rounds`]).
    pub rounds: Vec<String>,
    /// Results owed once the progress before them is out.
    owed: Vec<(mcpwire_core::mcp::server::CallId, String)>,
}

impl<E> Server<E> {
    pub fn new(engine: E) -> Self {
        Self {
            engine,
            held: Vec::new(),
            token: None,
            cancelled: Vec::new(),
            requests: Vec::new(),
            rounds: Vec::new(),
            owed: Vec::new(),
        }
    }

    /// Authorizes only requests carrying `Authorization: Bearer <token>`
    /// (the engine's configuration must ask for authorization).
    pub fn with_token(mut self, token: &'static str) -> Self {
        self.token = Some(token);
        self
    }
}

/// The server-side calls a link's engine needs, whatever its binding.
pub trait ServerLink: ServerEngine + Endpoint {
    fn link_poll_timeout(&self) -> Option<Instant>;
    fn link_handle_timeout(&mut self, now: Instant);
    fn link_recv_eof(&mut self);
    fn link_go_away(&mut self);
    fn link_finished(&self) -> bool;
}

impl<E: ServerLink> Endpoint for Server<E> {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let n = self.engine.recv(input, now);
        self.serve();
        n
    }
    fn wants_transmit(&self) -> bool {
        self.engine.wants_transmit()
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.engine.poll_transmit(out);
        self.serve();
        n
    }
    fn is_waiting(&self) -> bool {
        self.engine.is_waiting()
    }
}

impl<E: ServerLink> Served for Server<E> {
    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.link_poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.engine.link_handle_timeout(now);
        self.serve();
    }
    fn recv_eof(&mut self) {
        self.engine.link_recv_eof();
        self.serve();
    }
    fn serve(&mut self) {
        self.owed.retain(|(call, result)| {
            self.engine.respond(*call, result.as_bytes()) == Err(SendError::Busy)
        });
        while let Some(e) = self.engine.poll_event() {
            let call = match e {
                ServerEvent::Request { call } => call,
                ServerEvent::Authorize { call } => {
                    let ok = self.token.is_some() && self.engine.bearer_token(call) == self.token;
                    let decision = if ok {
                        Decision::Allow { principal: "p" }
                    } else {
                        Decision::Unauthenticated
                    };
                    self.engine.authorize(call, decision);
                    continue;
                }
                ServerEvent::Cancelled { call, .. } => {
                    self.cancelled.push(call);
                    continue;
                }
                ServerEvent::Writable { .. } => {
                    self.owed.retain(|(call, result)| {
                        self.engine.respond(*call, result.as_bytes()) == Err(SendError::Busy)
                    });
                    continue;
                }
                ServerEvent::ConnectionClosed { .. } => continue,
            };
            let Some(request) = self.engine.request(call) else {
                continue;
            };
            let mut buf = [0u8; 4096];
            let (text, name) = match request.kind {
                RequestKind::CallTool {
                    name: "echo",
                    arguments,
                    ..
                } => (arguments.str(b"text", &mut buf).map(str::to_owned), "echo"),
                RequestKind::CallTool { name: "lookup", .. } => {
                    (Some("found".to_owned()), "lookup")
                }
                RequestKind::CallTool { name, .. } => (None, name),
                _ => (None, ""),
            };
            let seen = if name.is_empty() {
                request.method().to_owned()
            } else {
                format!("{} {name}", request.method())
            };
            self.requests.push(seen);
            if matches!(name, "ask" | "nag") {
                let at = |span| ParamsIndex::get(request.params, span);
                let (state, responses) = (
                    at(&request.index.request_state),
                    at(&request.index.input_responses),
                );
                let s = |raw: Option<&[u8]>| {
                    raw.map_or("-".to_owned(), |r| String::from_utf8_lossy(r).into_owned())
                };
                self.rounds.push(format!(
                    "{name} id={} state={} responses={} caps={}",
                    s(Some(request.id)),
                    s(state),
                    s(responses),
                    s(Some(request.meta.client_capabilities)),
                ));
                let result = rounds_result(name, state, responses);
                let _ = self.engine.respond(call, result.as_bytes());
                continue;
            }
            let token = request.progress_token().map(<[u8]>::to_vec);
            let Some(text) = text else {
                self.held.push(call);
                continue;
            };
            let result = format!(
                r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
                serde_json::to_string(&text).unwrap()
            );
            if let Some(token) = token {
                let params = format!(
                    r#"{{"progressToken":{},"progress":1,"total":2}}"#,
                    String::from_utf8_lossy(&token)
                );
                let _ = self.engine.progress(call, params.as_bytes());
                self.owed.push((call, result));
                self.owed.retain(|(call, result)| {
                    self.engine.respond(*call, result.as_bytes()) == Err(SendError::Busy)
                });
                continue;
            }
            let _ = self.engine.respond(call, result.as_bytes());
        }
    }
    fn cancelled(&self) -> usize {
        self.cancelled.len()
    }
    fn requests(&self) -> Vec<String> {
        self.requests.clone()
    }
    fn rounds(&self) -> Vec<String> {
        self.rounds.clone()
    }
    fn go_away(&mut self) {
        self.engine.link_go_away();
        self.serve();
    }
    fn answer_held(&mut self) {
        for call in std::mem::take(&mut self.held) {
            let _ = self.engine.respond(call, br#"{"content":[]}"#);
        }
        self.serve();
    }
    fn finished(&self) -> bool {
        self.engine.link_finished()
    }
}

/// One link: its server and pipes.
struct Link {
    id: LinkId,
    server: Box<dyn Served>,
    /// Client to server, server to client.
    up: Pipe<PIPE>,
    down: Pipe<PIPE>,
    /// The engine let go of it.
    closed: bool,
    /// The server ended and the client was told (end of file).
    eof_told: bool,
    /// The server closed its side: what the client writes is lost, and
    /// the client learns of the end once it wrote something.
    server_gone: bool,
}

/// A client engine and its links' servers.
pub struct Net<E> {
    pub client: E,
    links: Vec<Link>,
    /// Makes the server of a new link; `None` refuses the link (the
    /// driver's connect failed with "refused").
    make: Box<dyn FnMut(LinkId) -> Option<Box<dyn Served>>>,
    pub now: Instant,
    pub seen: HashMap<CallId, Seen>,
    /// Every link event, in order: `("connect", id)`, `("disconnect", id)`,
    /// `("ready", 0)`, `("closed", 0)`.
    pub link_events: Vec<(&'static str, u32)>,
    pub warnings: Vec<(String, &'static str)>,
    /// The engine's notes for the operator ([`ClientEvent::Note`]).
    pub notes: Vec<String>,
    /// What `down_reason` said at each [`ClientEvent::Down`].
    pub downs: Vec<String>,
    /// What the driver's transport negotiated for every link (ALPN).
    pub negotiated: Negotiated,
}

impl<E: ClientEngine> Net<E> {
    pub fn new(client: E, make: impl FnMut(LinkId) -> Option<Box<dyn Served>> + 'static) -> Self {
        Self {
            client,
            links: Vec::new(),
            make: Box::new(make),
            now: Instant::ZERO,
            seen: HashMap::new(),
            link_events: Vec::new(),
            warnings: Vec::new(),
            notes: Vec::new(),
            downs: Vec::new(),
            negotiated: Negotiated::Nothing,
        }
    }

    /// Starts a call and runs until nothing moves.
    pub fn call(&mut self, message: &str) -> Result<CallId, StartError> {
        self.call_with(message, CallOptions::default())
    }

    pub fn call_with(&mut self, message: &str, options: CallOptions) -> Result<CallId, StartError> {
        // A refused start may still have asked for a link.
        let call = self.client.start(message.as_bytes(), options, self.now);
        self.run();
        call
    }

    /// What `call` saw.
    pub fn seen(&self, call: CallId) -> Seen {
        self.seen.get(&call).cloned().unwrap_or_default()
    }

    /// The server of the link numbered `id`.
    pub fn server(&mut self, id: u32) -> &mut dyn Served {
        let link = self
            .links
            .iter_mut()
            .find(|l| l.id.get() == id)
            .expect("a link of that number");
        &mut *link.server
    }

    /// The server of link `id` closes the connection between exchanges
    /// (its keep-alive ended): the client learns it only once it wrote its
    /// next request there, which is lost.
    pub fn close_by_server(&mut self, id: u32) {
        let link = self
            .links
            .iter_mut()
            .find(|l| l.id.get() == id)
            .expect("a link of that number");
        link.server.recv_eof();
        link.server_gone = true;
    }

    /// Links the engine holds open.
    pub fn open_links(&self) -> Vec<u32> {
        self.links
            .iter()
            .filter(|l| !l.closed)
            .map(|l| l.id.get())
            .collect()
    }

    /// Takes the engine's events: links opened and closed, calls' events
    /// recorded with their texts.
    pub fn drain(&mut self) {
        while let Some(e) = self.client.poll_event() {
            let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            match e {
                ClientEvent::Notification { call } => {
                    let text = s(self.client.message(call).unwrap_or_default());
                    self.seen.entry(call).or_default().notifications.push(text);
                }
                ClientEvent::Response { call } => {
                    let text = s(self.client.message(call).unwrap_or_default());
                    let diagnostics = self.client.diagnostics(call);
                    let seen = self.seen.entry(call).or_default();
                    seen.response = Some(text);
                    seen.diagnostics = diagnostics;
                }
                ClientEvent::Failed { call } => {
                    let f = self.client.failure(call).expect("a failure");
                    let failed = (f.code, s(f.message), f.diagnostics);
                    let error_response = s(f.response);
                    let auth = f.www_authenticate.map(s);
                    let diagnostics = self.client.diagnostics(call);
                    let seen = self.seen.entry(call).or_default();
                    seen.failed = Some(failed);
                    seen.error_response = Some(error_response);
                    seen.www_authenticate = auth;
                    seen.diagnostics = diagnostics;
                }
                ClientEvent::InputRequired { call } => {
                    let requests = s(self.client.input_requests(call).unwrap_or_default());
                    let result = s(self.client.result(call).unwrap_or_default());
                    self.seen
                        .entry(call)
                        .or_default()
                        .inputs
                        .push((requests, result));
                }
                ClientEvent::Ended { call } => self.seen.entry(call).or_default().ended = true,
                ClientEvent::Warning { call, reason } => {
                    let tool = s(self.client.warning_tool(call).unwrap_or_default());
                    self.warnings.push((tool, reason));
                }
                ClientEvent::Connect { link } => {
                    self.link_events.push(("connect", link.get()));
                    match (self.make)(link) {
                        Some(server) => {
                            self.links.push(Link {
                                id: link,
                                server,
                                up: Pipe::new(split()),
                                down: Pipe::new(split()),
                                closed: false,
                                eof_told: false,
                                server_gone: false,
                            });
                            self.client.link_up(link, self.negotiated, self.now);
                        }
                        None => self.client.link_failed(link, b"refused", self.now),
                    }
                }
                ClientEvent::Disconnect { link } => {
                    self.link_events.push(("disconnect", link.get()));
                    if let Some(l) = self.links.iter_mut().find(|l| l.id == link) {
                        l.closed = true;
                        l.server.recv_eof();
                    }
                }
                ClientEvent::Ready => self.link_events.push(("ready", 0)),
                ClientEvent::Down => {
                    let why = s(self.client.down_reason().unwrap_or_default());
                    self.downs.push(why);
                }
                ClientEvent::Note => {
                    let note = s(self.client.note_text());
                    self.notes.push(note);
                }
                ClientEvent::Skipped { .. } => self.link_events.push(("skipped", 0)),
                ClientEvent::ConnectionClosed { .. } => self.link_events.push(("closed", 0)),
            }
        }
    }

    /// Moves octets over every open link, both ways, until nothing moves.
    pub fn run(&mut self) {
        for _ in 0..100_000 {
            self.drain();
            let mut moved = 0;
            for i in 0..self.links.len() {
                moved += self.step_link(i);
            }
            self.drain();
            if moved == 0 {
                return;
            }
        }
        panic!("the network never went quiet");
    }

    /// One round on link `i`; the octets moved.
    fn step_link(&mut self, i: usize) -> usize {
        let now = self.now;
        let link = &mut self.links[i];
        if link.closed {
            return 0;
        }
        let id = link.id;
        let mut moved = 0;
        if link.server_gone {
            // What the client writes now is lost; then it reads the end.
            let mut wrote = 0;
            while self.client.wants_transmit(id) {
                let mut sink = [0u8; 4096];
                let n = self.client.poll_transmit(id, &mut sink);
                if n == 0 {
                    break;
                }
                wrote += n;
            }
            if wrote > 0 {
                link.closed = true;
                self.client.recv_eof(id, now);
                return wrote;
            }
            return 0;
        }
        // Client to server.
        while self.client.wants_transmit(id) {
            let client = &mut self.client;
            let n = link
                .up
                .write_piece(|out| client.poll_transmit(id, out))
                .len();
            if n == 0 {
                break;
            }
            moved += n;
        }
        let d = link.up.deliver(&mut *link.server, now, &mut link.down);
        moved += d.octets;
        moved += link.down.transmit(&mut *link.server);
        // Server to client, a piece at a time, the events taken after each.
        loop {
            let link = &mut self.links[i];
            let piece = link.down.piece();
            if piece.is_empty() {
                break;
            }
            let n = self.client.recv(id, piece, now);
            self.links[i].down.consume(n);
            moved += n;
            self.drain();
            if n == 0 {
                break;
            }
        }
        // A server that ended: its end reaches the client once its octets
        // are read.
        let link = &mut self.links[i];
        if !link.eof_told && link.down.is_empty() && link.server.finished() {
            link.eof_told = true;
            self.client.recv_eof(id, now);
            self.drain();
            moved += 1;
        }
        moved
    }

    /// Lets `by` pass on every side.
    pub fn advance(&mut self, by: core::time::Duration) {
        self.now = self.now + by;
        self.client.handle_timeout(self.now);
        for l in self.links.iter_mut().filter(|l| !l.closed) {
            l.server.handle_timeout(self.now);
        }
        self.run();
    }
}

impl<S, const STREAMS: usize, const TABLE: usize, const BUF: usize> ServerLink
    for mcpwire_core::mcp::server::Server<'static, S, STREAMS, TABLE, BUF>
where
    S: mcpwire_core::mcp::CallStore,
{
    fn link_poll_timeout(&self) -> Option<Instant> {
        self.poll_timeout()
    }
    fn link_handle_timeout(&mut self, now: Instant) {
        self.handle_timeout(now);
    }
    fn link_recv_eof(&mut self) {
        self.recv_eof();
    }
    fn link_go_away(&mut self) {
        self.go_away();
    }
    fn link_finished(&self) -> bool {
        self.is_closed()
    }
}

impl<S: mcpwire_core::mcp::CallStore> ServerLink
    for mcpwire_core::mcp::server::HttpServer<'static, S>
{
    fn link_poll_timeout(&self) -> Option<Instant> {
        self.poll_timeout()
    }
    fn link_handle_timeout(&mut self, now: Instant) {
        self.handle_timeout(now);
    }
    fn link_recv_eof(&mut self) {
        self.recv_eof();
    }
    fn link_go_away(&mut self) {
        self.go_away();
    }
    fn link_finished(&self) -> bool {
        self.is_finished()
    }
}

impl<S: mcpwire_core::mcp::CallStore, const CALLS: usize> ServerLink
    for mcpwire_core::mcp::server::StdioServer<'static, S, CALLS>
{
    fn link_poll_timeout(&self) -> Option<Instant> {
        self.poll_timeout()
    }
    fn link_handle_timeout(&mut self, now: Instant) {
        self.handle_timeout(now);
    }
    fn link_recv_eof(&mut self) {
        self.recv_eof();
    }
    /// The server's end of output: as a child that exits.
    fn link_go_away(&mut self) {
        self.close();
    }
    fn link_finished(&self) -> bool {
        self.is_finished()
    }
}
