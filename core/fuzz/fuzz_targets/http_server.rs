//! `http_server`: arbitrary octets (raw, or the body of a well-formed
//! POST the fuzzer dresses with headers of its choice) into one HTTP/1.1
//! connection of the Streamable HTTP server, cut at arbitrary points, with
//! time passing, the client going away, list changes published and a
//! handler that answers, notifies, fails or authorizes as the fuzzer says.
//! Nothing may panic, the server must keep consuming input or have output
//! or an answer pending, and it holds no buffer once finished.
#![no_main]

use arbitrary::Arbitrary;
use core::time::Duration;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::{
    Failure, HttpConfig, HttpEndpoint, HttpServer, ListChange, ServerEngine, ServerEvent,
};
use mcpwire_core::time::Instant;

type Server = HttpServer<'static, SlabStore<4096, 1>>;

const TOOLS: [ToolInfo<'static>; 1] = [ToolInfo {
    name: "echo",
    title: None,
    description: "Returns its text.",
    input_schema: r#"{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"}}}"#,
}];

const REGISTRY: Registry<'static> = Registry {
    listen: true,
    ..Registry::new(
        ServerInfo {
            name: "fuzz",
            version: "1",
            instructions: None,
        },
        &TOOLS,
    )
};

#[derive(Arbitrary, Debug)]
enum Op {
    /// Raw octets, fed in pieces of at most `piece + 1`.
    Raw {
        bytes: Vec<u8>,
        piece: u8,
    },
    /// A POST to /mcp with these extra header lines and this body, chunked
    /// or with a length.
    Post {
        headers: Vec<(Name, Vec<u8>)>,
        body: Vec<u8>,
        chunked: bool,
    },
    Advance {
        millis: u16,
    },
    Eof,
    Publish,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Name {
    Version,
    Method,
    McpName,
    Text,
    Accept,
    Origin,
    Connection,
    Authorization,
    Expect,
}

impl Name {
    fn text(self) -> &'static str {
        match self {
            Self::Version => "MCP-Protocol-Version",
            Self::Method => "Mcp-Method",
            Self::McpName => "Mcp-Name",
            Self::Text => "Mcp-Param-Text",
            Self::Accept => "Accept",
            Self::Origin => "Origin",
            Self::Connection => "Connection",
            Self::Authorization => "Authorization",
            Self::Expect => "Expect",
        }
    }
}

/// What the handler does with a request.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Answer {
    Respond,
    ProgressThenRespond,
    Error,
    Fail,
    Hold,
}

#[derive(Arbitrary, Debug)]
struct Input {
    authorize: bool,
    deny: bool,
    answer: Answer,
    ops: Vec<Op>,
}

fn drain(server: &mut Server, input: &Input, out: &mut [u8]) {
    while let Some(e) = server.poll_event() {
        match e {
            ServerEvent::Authorize { call } => {
                let _ = server.bearer_token(call);
                let d = if input.deny {
                    Decision::Unauthenticated
                } else {
                    Decision::Allow { principal: "p" }
                };
                server.authorize(call, d);
            }
            ServerEvent::Request { call } => {
                let _ = server.request(call).map(|r| r.kind);
                let _ = match input.answer {
                    Answer::Respond => server.respond(call, br#"{"content":[]}"#),
                    Answer::ProgressThenRespond => server
                        .progress(call, br#"{"progressToken":1,"progress":1}"#)
                        .and_then(|()| server.respond(call, b"{}")),
                    Answer::Error => server.respond_error(call, -32602, "bad", Some(b"{}")),
                    Answer::Fail => server.fail(call, Failure::HandlerFailed),
                    Answer::Hold => Ok(()),
                };
            }
            _ => {}
        }
    }
    while server.wants_transmit() {
        if server.poll_transmit(out) == 0 {
            break;
        }
    }
}

fn feed(
    server: &mut Server,
    input: &Input,
    bytes: &[u8],
    piece: usize,
    now: Instant,
    out: &mut [u8],
) {
    for chunk in bytes.chunks(piece.max(1)) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let n = server.recv(rest, now);
            drain(server, input, out);
            if n == 0 {
                // Waiting for an answer the handler may never give: the
                // rest stays unread, as a driver would leave it.
                if !server.wants_transmit() {
                    return;
                }
                continue;
            }
            rest = &rest[n..];
        }
    }
}

fuzz_target!(|input: Input| {
    let config = HttpConfig {
        authorize: input.authorize,
        max_head_bytes: 1024,
        max_body_bytes: 2048,
        endpoint: HttpEndpoint {
            resource_metadata: Some("https://h/.well-known/oauth-protected-resource"),
            ..HttpEndpoint::default()
        },
        ..HttpConfig::default()
    };
    let mut server = Server::new(REGISTRY, config, SlabStore::new(), Instant::ZERO);
    let mut now = Instant::ZERO;
    let mut out = [0u8; 512];
    for op in &input.ops {
        match op {
            Op::Raw { bytes, piece } => {
                feed(
                    &mut server,
                    &input,
                    bytes,
                    usize::from(*piece) + 1,
                    now,
                    &mut out,
                );
            }
            Op::Post {
                headers,
                body,
                chunked,
            } => {
                let mut request =
                    b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        .to_vec();
                for (name, value) in headers {
                    request.extend_from_slice(name.text().as_bytes());
                    request.extend_from_slice(b": ");
                    request.extend(value.iter().filter(|&&b| b != b'\r' && b != b'\n'));
                    request.extend_from_slice(b"\r\n");
                }
                if *chunked {
                    request.extend_from_slice(
                        format!("Transfer-Encoding: chunked\r\n\r\n{:x}\r\n", body.len())
                            .as_bytes(),
                    );
                    request.extend_from_slice(body);
                    request.extend_from_slice(b"\r\n0\r\n\r\n");
                } else {
                    request.extend_from_slice(
                        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                    );
                    request.extend_from_slice(body);
                }
                feed(&mut server, &input, &request, 97, now, &mut out);
            }
            Op::Advance { millis } => {
                now = now + Duration::from_millis(u64::from(*millis) * 16);
                server.handle_timeout(now);
                drain(&mut server, &input, &mut out);
            }
            Op::Eof => {
                server.recv_eof();
                drain(&mut server, &input, &mut out);
            }
            Op::Publish => {
                server.publish(ListChange::ToolsListChanged);
                drain(&mut server, &input, &mut out);
            }
        }
    }
    server.close();
    drain(&mut server, &input, &mut out);
    assert!(server.is_finished());
    assert_eq!(
        server.store().in_use(),
        0,
        "a buffer outlived the connection"
    );
});
