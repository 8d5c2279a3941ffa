//! The typed gRPC binding (`/model_context_protocol.Mcp/<Rpc>`) served by
//! the tunnel server engine on the device's slab store, against our HTTP/2
//! client in memory, under every split of the byte streams (feature
//! `typed`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use mcpwire_core::grpc::{base64, percent, write_prefix};
use mcpwire_core::h2::{Config, Connection, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{RequestKind, ServerConfig, ServerEvent};
use mcpwire_core::mcp::typed;
use mcpwire_core::mcp::{CallStore, SlabStore};
use mcpwire_core::time::Instant;
use mcpwire_proto::gcp::Rpc;

mod support;

use mcpwire_sim::{Pipe, exchange};
use support::mcp::{App, Server, Side, each_split, registry, split};

type Client = Connection<8, 4096, 16384, 16>;

const TOOLS: [ToolInfo<'static>; 1] = [support::mcp::ECHO];

/// What the client saw on one call: its header blocks and its DATA.
#[derive(Debug, Default)]
struct Seen {
    blocks: Vec<Vec<(String, String)>>,
    body: Vec<u8>,
}

impl Seen {
    fn get(&self, name: &str) -> Option<&str> {
        self.blocks
            .iter()
            .flatten()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The response messages, without their gRPC prefixes.
    fn messages(&self) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut rest = &self.body[..];
        while rest.len() >= 5 {
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            out.push(&rest[5..5 + len]);
            rest = &rest[5 + len..];
        }
        assert!(rest.is_empty(), "a partial message");
        out
    }
}

struct H2Client {
    conn: Client,
    seen: HashMap<StreamRef, Seen>,
}

impl H2Client {
    fn take_events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            if let Event::Headers { stream, .. } = e {
                let list = self
                    .conn
                    .headers(stream)
                    .unwrap()
                    .iter()
                    .map(|f| {
                        (
                            String::from_utf8_lossy(f.name).into(),
                            String::from_utf8_lossy(f.value).into(),
                        )
                    })
                    .collect();
                self.seen.entry(stream).or_default().blocks.push(list);
            }
        }
    }
}

impl mcpwire_core::drive::Endpoint for H2Client {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let r = self.conn.recv(input, now);
        if let Some(d) = r.data {
            let s = self.seen.entry(d.stream).or_default();
            s.body.extend_from_slice(d.bytes);
            self.conn.release_data(d.stream, d.bytes.len());
        }
        self.take_events();
        r.consumed
    }
    fn wants_transmit(&self) -> bool {
        self.conn.wants_transmit()
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.conn.poll_transmit(out);
        self.take_events();
        n
    }
}

/// The application: `echo` answers its text at once, after a progress
/// notification (which the typed binding drops). A forwarded request is
/// noted (its method and whether the caller wants the whole list) and
/// answered with an empty result of its kind.
#[derive(Debug, Default)]
struct Echo {
    forwarded: Vec<(String, bool)>,
}

impl<S: CallStore> App<Server<S>> for Echo {
    fn take_events(&mut self, server: &mut Server<S>) {
        while let Some(e) = server.poll_event() {
            let ServerEvent::Request { call } = e else {
                continue;
            };
            let request = server.request(call).unwrap();
            if let RequestKind::Forward { method, whole_list } = request.kind {
                let result: &[u8] = match method {
                    "tools/list" => br#"{"tools":[]}"#,
                    "resources/list" => br#"{"resources":[]}"#,
                    "resources/templates/list" => br#"{"resourceTemplates":[]}"#,
                    "prompts/list" => br#"{"prompts":[]}"#,
                    _ => br#"{"content":[]}"#,
                };
                self.forwarded.push((method.to_owned(), whole_list));
                server.respond(call, result).unwrap();
                continue;
            }
            assert!(matches!(request.kind, RequestKind::CallTool { .. }));
            let args = json::get(request.params, b"arguments").unwrap();
            let text = json::get(args, b"text").unwrap().to_vec();
            if text == br#""long error""# {
                let message = "\u{e9}".repeat(3000);
                server.respond_error(call, -32000, &message, None).unwrap();
                continue;
            }
            server
                .notify(
                    call,
                    "notifications/progress",
                    br#"{"progressToken":1,"progress":1}"#,
                )
                .unwrap();
            // `"array"` asks for structured content that is not an object,
            // which the binding cannot carry.
            let structured: &[u8] = if text == br#""array""# {
                br#","structuredContent":[1]"#
            } else {
                b""
            };
            let head = br#"{"content":[{"type":"text","text":"#;
            let result = [&head[..], &text, b"}]", structured, b"}"].concat();
            server.respond(call, &result).unwrap();
        }
    }
}

struct Pair {
    client: H2Client,
    server: Side<Server<SlabStore<8192, 8>>, Echo>,
    up: Pipe<32768>,
    down: Pipe<32768>,
    pending: Vec<(StreamRef, Vec<u8>)>,
}

impl Pair {
    fn new() -> Self {
        Pair::with_tools(&TOOLS)
    }

    /// A pair whose server offers `tools` (and nothing else).
    fn with_tools(tools: &'static [ToolInfo<'static>]) -> Self {
        Pair::with_registry(registry(tools))
    }

    /// A pair whose server forwards every request to its application.
    fn forwarding() -> Self {
        Pair::with_registry(Registry {
            forward: true,
            ..registry(&TOOLS)
        })
    }

    fn with_registry(registry: Registry<'static>) -> Self {
        Pair {
            client: H2Client {
                conn: Client::new(Role::Client, Config::default(), Instant::ZERO),
                seen: HashMap::new(),
            },
            server: Side {
                endpoint: Server::new(
                    registry,
                    ServerConfig::default(),
                    SlabStore::new(),
                    Instant::ZERO,
                ),
                app: Echo::default(),
            },
            up: Pipe::new(split()),
            down: Pipe::new(split()),
            pending: Vec::new(),
        }
    }

    /// A unary call of `rpc` whose request DATA is `message` framed.
    fn call(&mut self, rpc: Rpc, message: &[u8], extra: &[(&str, &str)]) -> StreamRef {
        let s = self.client.conn.open_stream().unwrap();
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", rpc.path().as_bytes()),
            Field::new(b":authority", b"localhost"),
            Field::new(b"content-type", b"application/grpc+proto"),
            Field::new(b"te", b"trailers"),
        ];
        for (n, v) in extra {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        self.client
            .conn
            .send_headers(s, fields.iter().copied(), false)
            .unwrap();
        let mut framed = write_prefix(message.len() as u32).to_vec();
        framed.extend_from_slice(message);
        self.pending.push((s, framed));
        s
    }

    fn run(&mut self) {
        for _ in 0..100_000 {
            let mut sent = false;
            for (s, rest) in &mut self.pending {
                let n = self.client.conn.send_data(*s, rest, true).unwrap();
                rest.drain(..n);
                sent |= n > 0;
            }
            self.pending.retain(|(_, rest)| !rest.is_empty());
            let moved = exchange(
                &mut self.client,
                &mut self.up,
                &mut self.server,
                &mut self.down,
                Instant::ZERO,
            )
            .unwrap_or_else(|side| panic!("{side:?} is stuck ({:?})", split()));
            if !sent && moved == 0 {
                return;
            }
        }
    }
}

fn encode(rpc: Rpc, params: &str) -> Vec<u8> {
    let mut out = vec![0u8; 4096];
    let n = typed::request_to_proto(rpc, params.as_bytes(), &mut out).unwrap();
    out.truncate(n);
    out
}

fn result_json(rpc: Rpc, message: &[u8]) -> String {
    let mut out = vec![0u8; 16384];
    let n = typed::result_to_json(rpc, message, &mut out).unwrap();
    String::from_utf8(out[..n].to_vec()).unwrap()
}

#[test]
fn call_tool_and_list_tools_answer_one_typed_message_each() {
    each_split(|| {
        let mut p = Pair::new();
        let call = p.call(
            Rpc::CallTool,
            &encode(
                Rpc::CallTool,
                r#"{"name":"echo","arguments":{"text":"hi"}}"#,
            ),
            &[],
        );
        let list = p.call(Rpc::ListTools, &[], &[]);
        p.run();
        let seen = &p.client.seen[&call];
        assert_eq!(seen.blocks.len(), 2, "head and trailers: {seen:?}");
        assert_eq!(seen.get("grpc-status"), Some("0"));
        let messages = seen.messages();
        assert_eq!(messages.len(), 1, "the progress notification is dropped");
        // The digest's golden CallToolResponse, with "hi" as the text.
        assert_eq!(
            messages[0],
            [
                0x0a, 0x02, 0x48, 0x01, 0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, b'h', b'i'
            ]
        );
        let seen = &p.client.seen[&list];
        assert_eq!(seen.get("grpc-status"), Some("0"));
        let result = result_json(Rpc::ListTools, seen.messages()[0]);
        let tools = json::get(result.as_bytes(), b"tools").unwrap();
        let first = json::elements(tools).next().unwrap();
        assert!(json::str_eq(json::get(first, b"name").unwrap(), b"echo"));
    });
}

#[test]
fn an_unknown_tool_is_a_trailers_only_error_with_the_json_rpc_error() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.call(
            Rpc::CallTool,
            &encode(Rpc::CallTool, r#"{"name":"nope","arguments":{}}"#),
            &[],
        );
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.blocks.len(), 1, "trailers only: {seen:?}");
        assert!(seen.body.is_empty());
        assert_eq!(seen.get(":status"), Some("200"));
        assert_eq!(seen.get("grpc-status"), Some("3"));
        assert_eq!(seen.get("mcp-error-code"), Some("-32602"));
        let bin = seen.get("mcp-error-bin").unwrap();
        let mut out = vec![0u8; bin.len()];
        let n = base64::decode(bin.as_bytes(), &mut out).unwrap();
        let response = &out[..n];
        assert_eq!(json::get(response, b"id"), Some(&b"null"[..]));
        let error = json::get(response, b"error").unwrap();
        assert_eq!(json::get(error, b"code"), Some(&b"-32602"[..]));
    });
}

#[test]
fn a_truncated_message_is_a_parse_error() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.call(Rpc::ListTools, &[0x0a, 0x05], &[]);
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.get("grpc-status"), Some("3"));
        assert_eq!(seen.get("mcp-error-code"), Some("-32700"));
        let message = seen.get("grpc-message").unwrap();
        assert!(
            message.starts_with("The message is not a valid ListToolsRequest"),
            "{message}"
        );
    });
}

#[test]
fn a_result_the_messages_cannot_carry_is_internal() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.call(
            Rpc::CallTool,
            &encode(
                Rpc::CallTool,
                r#"{"name":"echo","arguments":{"text":"array"}}"#,
            ),
            &[],
        );
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.blocks.len(), 1, "trailers only: {seen:?}");
        assert_eq!(seen.get("grpc-status"), Some("13"));
        assert_eq!(seen.get("mcp-error-code"), Some("-32603"));
        let message = seen.get("grpc-message").unwrap();
        assert!(
            message.starts_with("The typed gRPC binding cannot express"),
            "{message}"
        );
    });
}

/// A handler's error with a 6000-octet message: INTERNAL (an application
/// code), `grpc-message` cut to at most 1024 octets at a character
/// boundary, no `mcp-error-bin` (its base64 would pass 4096 octets).
#[test]
fn a_long_error_message_is_cut_and_leaves_out_mcp_error_bin() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.call(
            Rpc::CallTool,
            &encode(
                Rpc::CallTool,
                r#"{"name":"echo","arguments":{"text":"long error"}}"#,
            ),
            &[],
        );
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.blocks.len(), 1, "trailers only: {seen:?}");
        assert_eq!(seen.get("grpc-status"), Some("13"));
        assert_eq!(seen.get("mcp-error-code"), Some("-32000"));
        assert_eq!(seen.get("mcp-error-bin"), None);
        let encoded = seen.get("grpc-message").unwrap();
        let mut out = vec![0u8; encoded.len()];
        let n = percent::decode(encoded.as_bytes(), &mut out).unwrap();
        let text = std::str::from_utf8(&out[..n]).unwrap();
        assert!(!text.is_empty() && text.len() <= 1024, "{}", text.len());
        assert!(text.chars().all(|c| c == '\u{e9}'));
    });
}

/// List merging (grpc-binding "list responses merged from up to 1024
/// pages"; typed binding digest §7 step 7) has nothing to merge here: the
/// engine answers the four list methods itself from the static registry,
/// every entry in one result without `nextCursor`, and never hands a list
/// method to the application (`route` gives handlers only tools/call,
/// resources/read, prompts/get and completion/complete; `Echo` panics on
/// any other request). So a ListTools of many tools is one response with
/// all of them, and a list whose registry is empty is -32601, not a
/// handler's page.
#[test]
fn a_list_is_answered_whole_by_the_engine_never_paged_by_a_handler() {
    const COUNT: usize = 60;
    let tools: &'static [ToolInfo<'static>] = Box::leak(
        (0..COUNT)
            .map(|i| ToolInfo {
                name: Box::leak(format!("tool_{i:02}").into_boxed_str()),
                title: None,
                description: "One of many.",
                input_schema: r#"{"type":"object"}"#,
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    each_split(|| {
        let mut p = Pair::with_tools(tools);
        let list = p.call(Rpc::ListTools, &[], &[]);
        let prompts = p.call(Rpc::ListPrompts, &[], &[]);
        p.run();
        let seen = &p.client.seen[&list];
        assert_eq!(seen.get("grpc-status"), Some("0"), "{seen:?}");
        let messages = seen.messages();
        assert_eq!(messages.len(), 1, "one response message");
        let result = result_json(Rpc::ListTools, messages[0]);
        let names: Vec<String> = json::elements(json::get(result.as_bytes(), b"tools").unwrap())
            .map(|t| {
                let name = json::get(t, b"name").unwrap();
                String::from_utf8(name[1..name.len() - 1].to_vec()).unwrap()
            })
            .collect();
        let want: Vec<String> = (0..COUNT).map(|i| format!("tool_{i:02}")).collect();
        assert_eq!(names, want, "every tool, in order, in one page");
        let seen = &p.client.seen[&prompts];
        assert_eq!(seen.blocks.len(), 1, "trailers only: {seen:?}");
        assert_eq!(seen.get("grpc-status"), Some("12"));
        assert_eq!(seen.get("mcp-error-code"), Some("-32601"));
    });
}

/// A forwarding application hears that a typed list RPC's caller cannot
/// page (its messages have no cursor): the list is to be answered whole.
/// Other typed RPCs do not ask it.
#[test]
fn a_forwarded_typed_list_asks_for_the_whole_list() {
    each_split(|| {
        let mut p = Pair::forwarding();
        let calls = [
            (Rpc::ListTools, encode(Rpc::ListTools, "{}")),
            (Rpc::ListResources, encode(Rpc::ListResources, "{}")),
            (
                Rpc::ListResourceTemplates,
                encode(Rpc::ListResourceTemplates, "{}"),
            ),
            (Rpc::ListPrompts, encode(Rpc::ListPrompts, "{}")),
            (
                Rpc::CallTool,
                encode(Rpc::CallTool, r#"{"name":"echo","arguments":{}}"#),
            ),
        ];
        let streams: Vec<StreamRef> = calls
            .iter()
            .map(|(rpc, message)| p.call(*rpc, message, &[]))
            .collect();
        p.run();
        for s in &streams {
            let seen = &p.client.seen[s];
            assert_eq!(seen.get("grpc-status"), Some("0"), "{seen:?}");
        }
        let mut forwarded = p.server.app.forwarded.clone();
        forwarded.sort();
        let want = [
            ("prompts/list", true),
            ("resources/list", true),
            ("resources/templates/list", true),
            ("tools/call", false),
            ("tools/list", true),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|(m, w)| (m.to_string(), *w)).collect();
        assert_eq!(forwarded, want);
    });
}

/// A map entry repeating a key (`arguments` here, `Struct` entries) is
/// -32602 before any handler, and routing metadata given twice -32020:
/// the typed call is refused as its JSON or tunnel form would be (issue
/// #32, A3).
#[test]
fn repeated_map_keys_and_routing_metadata_are_refused() {
    each_split(|| {
        let mut p = Pair::new();
        // The encoder writes no repeated key: two keys made one.
        let two = encode(
            Rpc::CallTool,
            r#"{"name":"echo","arguments":{"text":"hi","texT":"secret"}}"#,
        );
        let at = two.windows(4).position(|w| w == b"texT").unwrap();
        let mut twice = two.clone();
        twice[at + 3] = b't';
        let once = encode(
            Rpc::CallTool,
            r#"{"name":"echo","arguments":{"text":"hi"}}"#,
        );
        let calls = [
            (p.call(Rpc::CallTool, &twice, &[]), "-32602"),
            (
                p.call(
                    Rpc::CallTool,
                    &once,
                    &[("mcp_tool", "echo"), ("mcp_tool", "echo")],
                ),
                "-32020",
            ),
            (
                p.call(
                    Rpc::CallTool,
                    &once,
                    &[
                        ("mcp-protocol-version", "2026-07-28"),
                        ("mcp-protocol-version", "2026-07-28"),
                    ],
                ),
                "-32020",
            ),
        ];
        p.run();
        for (s, code) in calls {
            let seen = &p.client.seen[&s];
            assert_eq!(seen.get("grpc-status"), Some("3"), "{seen:?}");
            assert_eq!(seen.get("mcp-error-code"), Some(code), "{seen:?}");
        }
    });
}
