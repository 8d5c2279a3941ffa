//! Fixtures shared by the MCP engine tests (`mcp_engine.rs`, `client.rs`):
//! the server engine's type, the test registry and the request `_meta`.

use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::Server as Engine;
use mcpwire_core::mcp::{CallStore, SlabStore};

/// The server engine under test, on a slab store by default.
pub type Server<S = SlabStore<8192, 8>> = Engine<'static, S, 8, 4096, 16384>;

/// `echo`: returns its text; no annotated arguments.
pub const ECHO: ToolInfo<'static> = ToolInfo {
    name: "echo",
    title: None,
    description: "Returns its text.",
    input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
};

/// `lookup`, with the given input schema (its annotated arguments).
pub const fn lookup(input_schema: &'static str) -> ToolInfo<'static> {
    ToolInfo {
        name: "lookup",
        title: None,
        description: "Annotated.",
        input_schema,
    }
}

/// The test server's registry, with these tools and nothing else.
pub fn registry(tools: &'static [ToolInfo<'static>]) -> Registry<'static> {
    Registry {
        info: ServerInfo {
            name: "test",
            version: "1.0",
            instructions: None,
        },
        tools,
        resources: &[],
        templates: &[],
        prompts: &[],
        listen: false,
        completions: false,
    }
}

/// The `_meta` member every request carries (without braces around it).
pub const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A growing store over `Vec`s that counts the buffers calls hold, as a
/// driver with an allocator would write it.
#[derive(Debug, Default)]
pub struct VecStore {
    pub max: usize,
    pub live: usize,
    pub peak_bytes: usize,
}

impl CallStore for VecStore {
    type Buf = Vec<u8>;
    fn max_len(&self) -> usize {
        self.max
    }
    fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        (len <= self.max).then(|| {
            self.live += 1;
            vec![0; len]
        })
    }
    fn grow(&mut self, buf: &mut Vec<u8>, len: usize) -> bool {
        if len > self.max {
            return false;
        }
        if buf.len() < len {
            buf.resize(len, 0);
        }
        self.peak_bytes = self.peak_bytes.max(buf.len());
        true
    }
    fn bytes<'a>(&'a self, buf: &'a Vec<u8>) -> &'a [u8] {
        buf
    }
    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Vec<u8>) -> &'a mut [u8] {
        buf
    }
    fn put(&mut self, _: Vec<u8>) {
        self.live -= 1;
    }
}
