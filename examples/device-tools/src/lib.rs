//! The tools of the mcpwire device examples, written once against the
//! portable tool API of `mcpwire-core` ([`mcpwire_core::mcp::tool`]), so the
//! same code runs on a board (`mcpwire-embassy`), in the host run of that
//! firmware (embassy's std executor on a TAP device), and under the tokio
//! driver (`mcpwire-tokio`'s `App::portable_tools`).
//!
//! - `read_sensor`: the board's temperature, as text and structured content;
//! - `toggle_output`: sets or toggles the board's output (a GPIO pin on a
//!   board, a flag on the host) and returns its new state;
//! - `slow_task`: `steps` steps, `delay_ms` apart, a progress notification
//!   after each; stops when the call is cancelled or its deadline passes.
//!
//! The board is reached through [`Board`]; [`SimBoard`] is the host's.
//!
//! ```
//! use mcpwire_core::mcp::tool::Tools;
//! use mcpwire_device_tools::{DeviceTools, SimBoard, tools};
//!
//! static BOARD: SimBoard = SimBoard::new(21_500);
//! let set: DeviceTools<'static, SimBoard> = tools(&BOARD);
//! assert_eq!(DeviceTools::<SimBoard>::TOOLS.len(), 3);
//! # let _ = set;
//! ```
#![no_std]

use core::fmt::{self, Write as _};
use core::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use core::time::Duration;

use mcpwire_core::mcp::error::{INVALID_PARAMS, RpcError};
use mcpwire_core::mcp::registry::ToolInfo;
use mcpwire_core::mcp::tool::{Arguments, Tool, ToolContext, ToolOutput};

/// `serverInfo.name` of the device examples.
pub const SERVER_NAME: &str = "mcpwire-device";
/// `serverInfo.version` of the device examples.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// `instructions` of the device examples.
pub const INSTRUCTIONS: &str = "A device with a temperature sensor and one output.";

/// Most steps `slow_task` takes.
pub const MAX_STEPS: u64 = 100;
/// Longest delay between the steps of `slow_task`.
pub const MAX_DELAY_MS: u64 = 10_000;

/// What the tools need from the hardware.
pub trait Board {
    /// The temperature, in thousandths of a degree Celsius.
    fn temperature_millicelsius(&self) -> i32;
    /// Drives the output.
    fn set_output(&self, on: bool);
    /// The output's state.
    fn output(&self) -> bool;
}

/// A board without hardware: an injected temperature and a flag for the
/// output.
#[derive(Debug)]
pub struct SimBoard {
    temperature: AtomicI32,
    output: AtomicBool,
}

impl SimBoard {
    /// A board that reads `millicelsius`, with its output off.
    pub const fn new(millicelsius: i32) -> Self {
        Self {
            temperature: AtomicI32::new(millicelsius),
            output: AtomicBool::new(false),
        }
    }

    /// Injects the next temperature reading.
    pub fn set_temperature(&self, millicelsius: i32) {
        self.temperature.store(millicelsius, Ordering::Relaxed);
    }
}

impl Board for SimBoard {
    fn temperature_millicelsius(&self) -> i32 {
        self.temperature.load(Ordering::Relaxed)
    }

    fn set_output(&self, on: bool) {
        self.output.store(on, Ordering::Relaxed);
    }

    fn output(&self) -> bool {
        self.output.load(Ordering::Relaxed)
    }
}

/// The three tools, in `tools/list` order.
pub type DeviceTools<'b, B> = (ReadSensor<'b, B>, ToggleOutput<'b, B>, SlowTask);

/// The device tools on `board`.
pub fn tools<B: Board>(board: &B) -> DeviceTools<'_, B> {
    (ReadSensor(board), ToggleOutput(board), SlowTask)
}

/// `read_sensor`: the temperature.
#[derive(Debug)]
pub struct ReadSensor<'b, B>(pub &'b B);

impl<B: Board> Tool for ReadSensor<'_, B> {
    const INFO: ToolInfo<'static> = ToolInfo {
        name: "read_sensor",
        title: Some("Read the temperature sensor"),
        description: "Reads the board's temperature sensor (degrees Celsius).",
        input_schema: r#"{"type":"object","properties":{}}"#,
    };

    async fn call<C: ToolContext>(
        &self,
        _args: Arguments<'_>,
        _cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> Result<(), RpcError> {
        let mc = self.0.temperature_millicelsius();
        out.text_fmt(format_args!("temperature {} °C", Milli(mc)))
            .structured(|w| {
                w.raw(b"{\"sensor\":\"temperature\",\"millicelsius\":")
                    .int(i64::from(mc))
                    .raw(b"}");
            });
        Ok(())
    }
}

/// `toggle_output`: sets the output (`on`) or toggles it.
#[derive(Debug)]
pub struct ToggleOutput<'b, B>(pub &'b B);

impl<B: Board> Tool for ToggleOutput<'_, B> {
    const INFO: ToolInfo<'static> = ToolInfo {
        name: "toggle_output",
        title: Some("Switch the output"),
        description: "Sets the board's output to `on`, or toggles it when `on` is absent; returns its new state.",
        input_schema: r#"{"type":"object","properties":{"on":{"type":"boolean"}}}"#,
    };

    async fn call<C: ToolContext>(
        &self,
        args: Arguments<'_>,
        _cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> Result<(), RpcError> {
        let on = match args.get(b"on") {
            None | Some(b"null") => !self.0.output(),
            Some(_) => args
                .bool(b"on")
                .ok_or(RpcError::new(INVALID_PARAMS, "on must be a boolean"))?,
        };
        self.0.set_output(on);
        out.text(if on { "output on" } else { "output off" })
            .structured(|w| {
                w.raw(if on {
                    b"{\"on\":true}"
                } else {
                    b"{\"on\":false}"
                });
            });
        Ok(())
    }
}

/// The arguments of `slow_task` (absent or `null`: the default).
#[derive(Debug, serde::Deserialize)]
struct SlowTaskArgs {
    steps: Option<u64>,
    delay_ms: Option<u64>,
}

/// `slow_task`: steps with progress, a delay between them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlowTask;

impl Tool for SlowTask {
    const INFO: ToolInfo<'static> = ToolInfo {
        name: "slow_task",
        title: Some("A slow task"),
        description: "Runs `steps` steps (default 5), `delay_ms` apart (default 200), with a progress notification after each; stops when cancelled.",
        input_schema: r#"{"type":"object","properties":{"steps":{"type":"integer","minimum":1,"maximum":100},"delay_ms":{"type":"integer","minimum":0,"maximum":10000}}}"#,
    };

    async fn call<C: ToolContext>(
        &self,
        args: Arguments<'_>,
        cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> Result<(), RpcError> {
        // Typed arguments, read straight from the request with
        // serde-json-core (no allocator): a wrong type is -32602.
        let args: SlowTaskArgs = args.parse(&mut [])?;
        let steps = args.steps.unwrap_or(5);
        if !(1..=MAX_STEPS).contains(&steps) {
            return Err(RpcError::new(INVALID_PARAMS, "steps must be 1 to 100"));
        }
        let delay = args.delay_ms.unwrap_or(200);
        if delay > MAX_DELAY_MS {
            return Err(RpcError::new(INVALID_PARAMS, "delay_ms must be 0 to 10000"));
        }
        for step in 1..=steps {
            cx.sleep(Duration::from_millis(delay)).await;
            if cx.is_cancelled() {
                return Ok(());
            }
            let mut text = heapless::String::<32>::new();
            let _ = write!(text, "step {step} of {steps}");
            cx.progress(step, Some(steps), Some(text.as_str())).await;
        }
        out.text_fmt(format_args!("done after {steps} steps"));
        Ok(())
    }
}

/// Thousandths, printed as a decimal.
struct Milli(i32);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let v = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}", v / 1000, v % 1000)
    }
}

/// The device application on embassy (feature `embassy`): the sizes, the
/// server type and the connection loop that the firmware and its host run
/// share, so both run the same application logic. The embassy tasks
/// themselves (`#[embassy_executor::task]` cannot be generic) are one line
/// each in the binary:
///
/// ```ignore
/// #[embassy_executor::task(pool_size = app::CONNECTIONS)]
/// async fn mcp_connection(stack: Stack<'static>, server: &'static app::DeviceServer<MyBoard>) -> ! {
///     app::connection(stack, server).await
/// }
/// #[embassy_executor::task(pool_size = app::HANDLERS)]
/// async fn mcp_handler(server: &'static app::DeviceServer<MyBoard>) -> ! {
///     server.run_handler().await
/// }
/// ```
#[cfg(feature = "embassy")]
pub mod app {
    use embassy_net::Stack;
    use mcpwire_core::mcp::auth::StaticTokens;
    use mcpwire_core::mcp::registry::{RegistryError, ServerInfo};
    use mcpwire_embassy::{Config, Server, SlabStore};

    use super::{Board, DeviceTools, INSTRUCTIONS, SERVER_NAME, SERVER_VERSION, tools};

    /// Connections served at once (connection tasks, TCP sockets).
    pub const CONNECTIONS: usize = 3;
    /// Tool calls run at once (handler tasks).
    pub const HANDLERS: usize = 3;
    /// Largest `arguments` object of a call.
    pub const ARGS: usize = 512;
    /// Largest tool result.
    pub const RESULT: usize = 2048;
    /// TCP receive and transmit buffers of each connection (the last
    /// `mcpwire_embassy::TCP_STAGING` octets of the transmit buffer stage
    /// the octets between the socket and the engine).
    pub const SOCKET_RX: usize = 4096;
    /// See [`SOCKET_RX`].
    pub const SOCKET_TX: usize = 4096;
    /// Concurrent calls on one connection.
    pub const STREAMS: usize = 4;
    /// HPACK dynamic table of each connection.
    pub const TABLE: usize = 4096;
    /// HTTP/2 buffers of each connection (the largest request head).
    pub const BUF: usize = 4096;
    /// Call buffers of each connection: `STREAMS` of 4 KiB (the largest
    /// request and response message).
    pub type Store = SlabStore<4096, STREAMS>;
    /// The gRPC port.
    pub const PORT: u16 = 50051;

    /// The device's MCP server over `B`.
    pub type DeviceServer<B> = Server<'static, DeviceTools<'static, B>, HANDLERS, ARGS, RESULT>;

    /// The server of the device tools on `board`, open to every client.
    pub fn server<B: Board>(board: &'static B) -> Result<DeviceServer<B>, RegistryError<'static>> {
        server_with_tokens(board, None)
    }

    /// The server of the device tools on `board`; with `tokens`, every call
    /// must carry one of them (`authorization: Bearer …`).
    pub fn server_with_tokens<B: Board>(
        board: &'static B,
        tokens: Option<StaticTokens<'static>>,
    ) -> Result<DeviceServer<B>, RegistryError<'static>> {
        let info = ServerInfo {
            name: SERVER_NAME,
            version: SERVER_VERSION,
            instructions: Some(INSTRUCTIONS),
        };
        let config = Config {
            port: PORT,
            tokens,
            ..Config::default()
        };
        Server::new(info, tools(board), config)
    }

    /// One connection task's body: its socket buffers, then the server's
    /// connection loop.
    pub async fn connection<B: Board>(
        stack: Stack<'static>,
        server: &'static DeviceServer<B>,
    ) -> ! {
        let mut rx = [0u8; SOCKET_RX];
        let mut tx = [0u8; SOCKET_TX];
        server
            .run_connection::<Store, STREAMS, TABLE, BUF>(stack, &mut rx, &mut tx)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire_core::mcp::tool::Tools;

    #[test]
    fn milli_and_heapless_text() {
        let mut t = heapless::String::<32>::new();
        let _ = write!(t, "{} {} {}", Milli(21_500), Milli(-1_005), Milli(7));
        assert_eq!(t.as_str(), "21.500 -1.005 0.007");
        let mut t = heapless::String::<4>::new();
        assert!(write!(t, "abcdef").is_err());
        assert!(t.len() <= 4);
        assert_eq!(DeviceTools::<SimBoard>::find(b"\"slow_task\""), Some(2));
    }
}
