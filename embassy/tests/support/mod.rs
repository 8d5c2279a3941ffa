//! What the driver's tests share: the tools the handlers run, the request
//! a client sends, the in-memory connection and the clock.

#![allow(dead_code)]

use core::convert::Infallible;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embedded_io_async::{ErrorType, Read, Write};
use mcpwire_core::mcp::error::RpcError;
use mcpwire_core::mcp::meta::PROTOCOL_VERSION as VERSION;
use mcpwire_core::mcp::registry::{ServerInfo, ToolInfo};
use mcpwire_core::mcp::tool::{Arguments, Tool, ToolContext, ToolOutput};
use mcpwire_core::time::Instant;
use serde_json::{Value, json};

pub const INFO: ServerInfo<'static> = ServerInfo {
    name: "device",
    version: "1",
    instructions: None,
};

/// `count`: `n` progress steps, then the text `counted n`.
pub struct Count;

impl Tool for Count {
    const INFO: ToolInfo<'static> = ToolInfo {
        name: "count",
        title: None,
        description: "Counts to n.",
        input_schema: r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#,
    };

    async fn call<C: ToolContext>(
        &self,
        args: Arguments<'_>,
        cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> Result<(), RpcError> {
        let n = args.u64(b"n").unwrap_or(0);
        for i in 1..=n {
            cx.progress(i, Some(n), None).await;
        }
        out.text_fmt(format_args!("counted {n}"));
        Ok(())
    }
}

/// `sleep`: answers after `ms` milliseconds (a minute by default), unless
/// cancelled.
pub struct Sleep;

impl Tool for Sleep {
    const INFO: ToolInfo<'static> = ToolInfo {
        name: "sleep",
        title: None,
        description: "Sleeps.",
        input_schema: r#"{"type":"object","properties":{"ms":{"type":"integer"}}}"#,
    };

    async fn call<C: ToolContext>(
        &self,
        args: Arguments<'_>,
        cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> Result<(), RpcError> {
        let ms = args.u64(b"ms").unwrap_or(60_000);
        cx.sleep(core::time::Duration::from_millis(ms)).await;
        out.text("slept");
        Ok(())
    }
}

/// A request with the `_meta` every request carries.
pub fn request(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// One end of an in-memory connection: reads one pipe, writes the other.
pub struct End<'p, const N: usize> {
    pub rx: &'p Pipe<CriticalSectionRawMutex, N>,
    pub tx: &'p Pipe<CriticalSectionRawMutex, N>,
}

impl<const N: usize> ErrorType for End<'_, N> {
    type Error = Infallible;
}

impl<const N: usize> Read for End<'_, N> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        Ok(self.rx.read(buf).await)
    }
}

impl<const N: usize> Write for End<'_, N> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        Ok(self.tx.write(buf).await)
    }

    async fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

/// The embassy clock as the core's instant.
pub fn now() -> Instant {
    Instant::from_micros(embassy_time::Instant::now().as_micros())
}
