//! Fixtures shared by the MCP engine tests (`mcp_engine.rs`, `client.rs`,
//! `mcp_stdio.rs`): the server engine's type, the test registry and the
//! request `_meta`; [`Side`], an endpoint with its application for the
//! pipes of `mcpwire-sim`; and [`each_split`].

use std::cell::Cell;
use std::ops::{Deref, DerefMut};

use mcpwire_core::drive::Endpoint;
use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::Server as Engine;
use mcpwire_core::mcp::{CallStore, SlabStore};
use mcpwire_core::time::Instant;
use mcpwire_sim::Split;

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

/// The test server's registry, with these tools and nothing else; not
/// checked (some tests serve an invalid tool on purpose): see [`checked`].
pub fn registry(tools: &'static [ToolInfo<'static>]) -> Registry<'static> {
    let info = ServerInfo {
        name: "test",
        version: "1.0",
        instructions: None,
    };
    Registry::new(info, tools)
}

/// `registry`, checked as a server checks its registry before serving.
pub fn checked(mut registry: Registry<'static>) -> Registry<'static> {
    registry.check().expect("the test tools are valid");
    registry
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

thread_local! {
    static SPLIT: Cell<Split> = const { Cell::new(Split::Whole) };
}

/// Runs a test once under each of [`Split::ALL`] (whole, random pieces,
/// mixed sizes, byte at a time); inside, [`split`] says which. A failure
/// names its split on stderr.
pub fn each_split(test: impl Fn()) {
    for s in Split::ALL {
        eprintln!("split: {s:?}");
        SPLIT.set(s);
        test();
    }
    SPLIT.set(Split::Whole);
}

/// The split of the current [`each_split`] run (whole outside one).
pub fn split() -> Split {
    SPLIT.get()
}

/// What the application on one end does with its endpoint's events.
pub trait App<E> {
    /// Drains `endpoint`'s events.
    fn take_events(&mut self, endpoint: &mut E);
}

/// An endpoint with its application: a [`drive::Endpoint`] that hands the
/// endpoint's events to the application after every `recv` and
/// `poll_transmit`, as the run loop says. It derefs to the endpoint, for
/// the tests' own calls.
///
/// [`drive::Endpoint`]: Endpoint
#[derive(Debug)]
pub struct Side<E, A> {
    pub endpoint: E,
    pub app: A,
}

impl<E, A: App<E>> Side<E, A> {
    pub fn take_events(&mut self) {
        self.app.take_events(&mut self.endpoint);
    }
}

impl<E: Endpoint, A: App<E>> Endpoint for Side<E, A> {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let n = self.endpoint.recv(input, now);
        self.take_events();
        n
    }
    fn wants_transmit(&self) -> bool {
        self.endpoint.wants_transmit()
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.endpoint.poll_transmit(out);
        self.take_events();
        n
    }
    fn is_waiting(&self) -> bool {
        self.endpoint.is_waiting()
    }
}

impl<E, A> Deref for Side<E, A> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.endpoint
    }
}

impl<E, A> DerefMut for Side<E, A> {
    fn deref_mut(&mut self) -> &mut E {
        &mut self.endpoint
    }
}
