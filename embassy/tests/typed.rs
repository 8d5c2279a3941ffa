//! The typed gRPC binding (`/model_context_protocol.Mcp/<Rpc>`) on the
//! device's connection: with feature `typed` the driver serves the eight
//! unary RPCs beside the tunnel (the tools run on a handler task, progress
//! is dropped, an error is trailers only, the deadline cancels the tool);
//! without it, a typed path is answered UNIMPLEMENTED as any unknown path.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use embassy_futures::block_on;
use embassy_futures::select::{Either3, select3};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_time::{Duration, with_timeout};
use embedded_io_async::{Read, Write};
use mcpwire_core::h2::{self, Connection, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_embassy::{Config, Server, SlabStore};
use mcpwire_proto::gcp::Rpc;

mod support;

use support::{Count, INFO, Sleep, now};

type Wire = Pipe<CriticalSectionRawMutex, 8192>;
/// One end of the connection: reads one pipe, writes the other.
type End<'p> = support::End<'p, 8192>;
type Client = Connection<4, 4096, 16384, 16>;
type Mcp = Server<'static, (Count, Sleep), 1, 256, 1024>;

/// What one unary call got back: every header field of its header
/// blocks, and its response messages without their gRPC prefixes.
#[derive(Debug, Default)]
struct Answer {
    blocks: usize,
    fields: Vec<(String, String)>,
    messages: Vec<Vec<u8>>,
}

impl Answer {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A gRPC client of the typed service, one call at a time.
struct Typed<'p> {
    conn: Client,
    io: End<'p>,
}

impl Typed<'_> {
    async fn transmit(&mut self) {
        let mut out = [0u8; 4096];
        while self.conn.wants_transmit() {
            let n = self.conn.poll_transmit(&mut out);
            if n == 0 {
                break;
            }
            let _ = self.io.write_all(&out[..n]).await;
        }
    }

    /// Calls `rpc` with `message` (protobuf) and reads its whole answer.
    async fn call(&mut self, rpc: Rpc, message: &[u8], extra: &[(&str, &str)]) -> Answer {
        let stream = self.conn.open_stream().expect("a stream");
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", rpc.path().as_bytes()),
            Field::new(b":authority", b"device"),
            Field::new(b"content-type", b"application/grpc+proto"),
            Field::new(b"te", b"trailers"),
        ];
        for (n, v) in extra {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        self.conn
            .send_headers(stream, fields.iter().copied(), false)
            .expect("headers");
        let mut framed = vec![0u8];
        framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(message);
        let sent = self.conn.send_data(stream, &framed, true).expect("data");
        assert_eq!(sent, framed.len());
        self.answer(stream).await
    }

    async fn answer(&mut self, stream: StreamRef) -> Answer {
        let mut answer = Answer::default();
        let mut data = Vec::new();
        let mut ended = false;
        let mut buf = [0u8; 4096];
        while !ended {
            self.transmit().await;
            let n = self.io.read(&mut buf).await.expect("read");
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let r = self.conn.recv(rest, now());
                if let Some(d) = r.data {
                    if d.stream == stream {
                        data.extend_from_slice(d.bytes);
                    }
                    self.conn.release_data(d.stream, d.bytes.len());
                }
                rest = &rest[r.consumed..];
                while let Some(e) = self.conn.poll_event() {
                    match e {
                        Event::Headers { stream: s, .. } if s == stream => {
                            answer.blocks += 1;
                            for f in self.conn.headers(s).expect("a header block").iter() {
                                answer.fields.push((
                                    String::from_utf8_lossy(f.name).into_owned(),
                                    String::from_utf8_lossy(f.value).into_owned(),
                                ));
                            }
                        }
                        Event::Closed { stream: s } | Event::Reset { stream: s, .. }
                            if s == stream =>
                        {
                            ended = true;
                        }
                        _ => {}
                    }
                }
                if r.consumed == 0 {
                    self.transmit().await;
                }
            }
        }
        let mut rest = &data[..];
        while rest.len() >= 5 {
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            answer.messages.push(rest[5..5 + len].to_vec());
            rest = &rest[5 + len..];
        }
        assert!(rest.is_empty(), "a partial message: {answer:?}");
        answer
    }
}

/// Runs `client` against a device server on an in-memory connection, with
/// one handler task; fails after 10 s.
fn run<F>(client: impl FnOnce(Typed<'static>) -> F)
where
    F: core::future::Future<Output = ()>,
{
    let up: &'static Wire = Box::leak(Box::new(Wire::new()));
    let down: &'static Wire = Box::leak(Box::new(Wire::new()));
    let server: &'static Mcp = Box::leak(Box::new(
        Mcp::new(INFO, (Count, Sleep), Config::default()).expect("a valid schema"),
    ));
    let typed = Typed {
        conn: Client::new(Role::Client, h2::Config::default(), now()),
        io: End { rx: down, tx: up },
    };
    let serve = async {
        let mut io = End { rx: up, tx: down };
        let mut staging = [0u8; 256];
        server
            .serve::<SlabStore<4096, 2>, 2, 4096, 2048, _>(&mut io, &mut staging)
            .await
    };
    let ended = block_on(select3(
        server.run_handler(),
        serve,
        with_timeout(Duration::from_secs(10), client(typed)),
    ));
    match ended {
        Either3::First(never) => never,
        Either3::Second(e) => panic!("the connection ended first: {e:?}"),
        Either3::Third(done) => done.expect("the client finished in time"),
    }
}

#[cfg(feature = "typed")]
mod on {
    use super::*;
    use mcpwire_core::grpc::base64;
    use mcpwire_core::mcp::typed;
    use serde_json::{Value, json};

    fn encode(rpc: Rpc, params: &Value) -> Vec<u8> {
        let mut out = vec![0u8; 4096];
        let text = serde_json::to_vec(params).unwrap();
        let n = typed::request_to_proto(rpc, &text, &mut out).unwrap();
        out.truncate(n);
        out
    }

    fn decode(rpc: Rpc, message: &[u8]) -> Value {
        let mut out = vec![0u8; 16384];
        let n = typed::result_to_json(rpc, message, &mut out).unwrap();
        serde_json::from_slice(&out[..n]).unwrap()
    }

    /// A tool call runs on the handler task; its progress notifications
    /// are dropped and the answer is one `CallToolResponse`, then OK.
    #[test]
    fn call_tool_runs_the_tool_and_answers_one_typed_message() {
        run(|mut t| async move {
            let params = json!({ "name": "count", "arguments": { "n": 3 } });
            let answer = t
                .call(Rpc::CallTool, &encode(Rpc::CallTool, &params), &[])
                .await;
            assert_eq!(answer.get("grpc-status"), Some("0"), "{answer:?}");
            assert_eq!(answer.blocks, 2, "head and trailers: {answer:?}");
            assert_eq!(answer.messages.len(), 1, "progress dropped: {answer:?}");
            let result = decode(Rpc::CallTool, &answer.messages[0]);
            assert_eq!(
                result["content"],
                json!([{ "type": "text", "text": "counted 3" }])
            );
        });
    }

    /// `ListTools` is answered by the core from the device's tools, with
    /// the same connection serving a tool call next.
    #[test]
    fn list_tools_names_the_device_tools() {
        run(|mut t| async move {
            let answer = t.call(Rpc::ListTools, &[], &[]).await;
            assert_eq!(answer.get("grpc-status"), Some("0"), "{answer:?}");
            let result = decode(Rpc::ListTools, &answer.messages[0]);
            let names: Vec<_> = result["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(names, ["count", "sleep"]);
            let params = json!({ "name": "count", "arguments": { "n": 0 } });
            let answer = t
                .call(Rpc::CallTool, &encode(Rpc::CallTool, &params), &[])
                .await;
            assert_eq!(answer.get("grpc-status"), Some("0"), "{answer:?}");
        });
    }

    /// An unknown tool: trailers only, INVALID_ARGUMENT and -32602.
    #[test]
    fn an_unknown_tool_is_a_trailers_only_error() {
        run(|mut t| async move {
            let params = json!({ "name": "nope", "arguments": {} });
            let answer = t
                .call(Rpc::CallTool, &encode(Rpc::CallTool, &params), &[])
                .await;
            assert_eq!(answer.blocks, 1, "trailers only: {answer:?}");
            assert!(answer.messages.is_empty());
            assert_eq!(answer.get("grpc-status"), Some("3"));
            assert_eq!(answer.get("mcp-error-code"), Some("-32602"));
            // The JSON-RPC error response (id null), even in the device's
            // small call buffer.
            let bin = answer.get("mcp-error-bin").expect("mcp-error-bin");
            let mut out = vec![0u8; bin.len()];
            let n = base64::decode(bin.as_bytes(), &mut out).unwrap();
            let response: Value = serde_json::from_slice(&out[..n]).unwrap();
            assert_eq!(
                response,
                json!({
                    "jsonrpc": "2.0",
                    "id": null,
                    "error": { "code": -32602, "message": "Unknown tool" },
                })
            );
        });
    }

    /// A routing header that contradicts the message: -32020 before the
    /// tool runs.
    #[test]
    fn a_routing_header_that_differs_is_refused() {
        run(|mut t| async move {
            let params = json!({ "name": "count", "arguments": { "n": 1 } });
            let answer = t
                .call(
                    Rpc::CallTool,
                    &encode(Rpc::CallTool, &params),
                    &[("mcp_tool", "sleep")],
                )
                .await;
            assert_eq!(answer.get("grpc-status"), Some("3"), "{answer:?}");
            assert_eq!(answer.get("mcp-error-code"), Some("-32020"));
        });
    }

    /// `grpc-timeout` passes while the tool sleeps: DEADLINE_EXCEEDED, and
    /// the handler slot is free again for the next call.
    #[test]
    fn the_deadline_cancels_the_tool() {
        run(|mut t| async move {
            let params = json!({ "name": "sleep", "arguments": { "ms": 60000 } });
            let answer = t
                .call(
                    Rpc::CallTool,
                    &encode(Rpc::CallTool, &params),
                    &[("grpc-timeout", "100m")],
                )
                .await;
            assert_eq!(answer.get("grpc-status"), Some("4"), "{answer:?}");
            assert!(answer.messages.is_empty());
            let params = json!({ "name": "sleep", "arguments": { "ms": 1 } });
            let answer = t
                .call(Rpc::CallTool, &encode(Rpc::CallTool, &params), &[])
                .await;
            assert_eq!(answer.get("grpc-status"), Some("0"), "{answer:?}");
            let result = decode(Rpc::CallTool, &answer.messages[0]);
            assert_eq!(result["content"][0]["text"], "slept");
        });
    }
}

/// Without the feature the device keeps no typed code: a typed path is
/// UNIMPLEMENTED, as any path it does not serve. (In a workspace build the
/// core's feature may be on for another crate: the device then serves it.)
#[cfg(not(feature = "typed"))]
#[test]
fn without_the_feature_a_typed_rpc_is_unimplemented() {
    use mcpwire_core::mcp::server::TYPED_RPCS;
    run(|mut t| async move {
        let answer = t.call(Rpc::ListTools, &[], &[]).await;
        let status = if TYPED_RPCS { "0" } else { "12" };
        assert_eq!(answer.get("grpc-status"), Some(status), "{answer:?}");
        assert_eq!(answer.messages.len(), usize::from(TYPED_RPCS), "{answer:?}");
    });
}
