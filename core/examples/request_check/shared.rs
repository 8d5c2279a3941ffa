//! The request of the request-check measurements: a `tools/call` of
//! `echo` as `mcpwire-load` sends it, with its mirrored headers, and the
//! engine's check of it.

use mcpwire_core::mcp::envelope::{RequestSpans, Spans};
use mcpwire_core::mcp::mirror::{HeaderSource, Mirrors};
use mcpwire_core::mcp::registry::{Registry, RegistryError, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::dispatch::{self, Route};

/// The gRPC request headers the load tool sends with it.
pub const HEADERS: &[(&[u8], &[u8])] = &[
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
];

/// Request headers as a list of fields.
#[derive(Debug)]
pub struct Headers(pub &'static [(&'static [u8], &'static [u8])]);

impl HeaderSource for Headers {
    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| matches(n)).map(|(_, v)| *v)
    }

    /// One walk, as the engine's header list reads them.
    fn mirrors(&self) -> Mirrors<'_> {
        Mirrors::scan(self.0.iter().copied())
    }
}

pub fn tools() -> [ToolInfo<'static>; 2] {
    [
        ToolInfo {
            name: "echo",
            title: None,
            description: "Returns its text.",
            input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        },
        ToolInfo {
            name: "progress",
            title: None,
            description: "Sends progress.",
            input_schema: r#"{"type":"object","properties":{"steps":{"type":"integer"}}}"#,
        },
    ]
}

/// Checked, as a server checks its registry before serving.
pub fn registry<'r>(tools: &'r [ToolInfo<'r>]) -> Result<Registry<'r>, RegistryError<'r>> {
    let info = ServerInfo {
        name: "bench",
        version: "0",
        instructions: None,
    };
    let mut registry = Registry::new(info, tools);
    registry.check()?;
    Ok(registry)
}

/// The load tool's `echo` request with a text of `text_bytes` (its
/// members in serde_json's order, as it sends them).
pub fn echo_request(text_bytes: usize) -> Vec<u8> {
    let text: String = (0..text_bytes)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    format!(
        r#"{{"id":123456,"jsonrpc":"2.0","method":"tools/call","params":{{"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"arguments":{{"text":"{text}"}},"name":"echo"}}}}"#
    )
    .into_bytes()
}

/// What `Engine::dispatch` does with a request message before a handler
/// runs: validate and locate (one walk), check (§5.6, headers), route.
pub fn check(registry: &Registry<'_>, body: &[u8], headers: &Headers) -> bool {
    let Ok(Spans::Request(spans)) = RequestSpans::parse(body, dispatch::MAX_DEPTH) else {
        return false;
    };
    let Some(method) = spans.method.clone() else {
        return false;
    };
    let params = spans.params.clone().map(|r| &body[r]);
    let (text, raw) = (
        &body[method.clone()],
        &body[method.start - 1..method.end + 1],
    );
    dispatch::check_indexed(registry, text, raw, params, &spans.index, Some(headers)).is_ok()
        && matches!(
            dispatch::route_indexed(registry, text, params, &spans.index),
            Route::Handle(_)
        )
}
