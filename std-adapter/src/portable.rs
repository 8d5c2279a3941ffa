//! Portable tools under tokio: the no-alloc tools of
//! [`mcpwire_core::mcp::tool`], written once for a firmware, served by an
//! [`App`] like any other tool ([`App::portable_tools`]).
//!
//! A portable tool's future need not be `Send` (it is generic over its
//! context, and a firmware's tools hold no such promise), so each call runs
//! on a blocking-pool thread that drives it with [`Handle::block_on`]:
//! tokio's timers and the call's progress channel work there as on a
//! worker. The handler's task waits for that thread; when the call is
//! cancelled (client reset, deadline, connection end) the tool's future is
//! dropped at its next await, as the embassy driver drops it.
//!
//! The tool writes its result into a buffer of [`RESULT_CAPACITY`] octets
//! (the tokio engine's per-call buffer); a larger result is -32603.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use mcpwire_tokio::{App, Server};
//! use mcpwire_tokio::portable::{Arguments, Tool, ToolContext, ToolInfo, ToolOutput};
//! use mcpwire_core::mcp::error::RpcError;
//!
//! struct Hello;
//! impl Tool for Hello {
//!     const INFO: ToolInfo<'static> = ToolInfo {
//!         name: "hello",
//!         title: None,
//!         description: "Says hello.",
//!         input_schema: r#"{"type":"object"}"#,
//!     };
//!     async fn call<C: ToolContext>(&self, _: Arguments<'_>, _: &C, out: &mut ToolOutput<'_>)
//!         -> Result<(), RpcError> {
//!         out.text("hello");
//!         Ok(())
//!     }
//! }
//!
//! let app = App::new("demo", "1.0").portable_tools((Hello,));
//! Server::bind("127.0.0.1:50051").await?.serve(app).await
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::mcp::server::Failure;
use serde_json::Value;
use tokio::runtime::Handle;

pub use mcpwire_core::mcp::registry::ToolInfo;
pub use mcpwire_core::mcp::tool::{Arguments, OutputError, Tool, ToolContext, ToolOutput, Tools};

use crate::app::{App, Content, ToolCall, ToolError, ToolResult};

/// Octets a portable tool's result may take (the engine's call buffer).
pub const RESULT_CAPACITY: usize = 64 << 10;

/// Adds every tool of `tools` to `app` (see [`App::portable_tools`]).
pub(crate) fn register<T>(mut app: App, tools: T) -> App
where
    T: Tools + Send + Sync + 'static,
{
    let tools = Arc::new(tools);
    for (index, info) in T::TOOLS.iter().enumerate() {
        let tools = Arc::clone(&tools);
        app = app.tool(
            info.name,
            info.description,
            info.input_schema,
            move |call: ToolCall| run(Arc::clone(&tools), index, call),
        );
    }
    app
}

/// One call of tool `index`, on a blocking-pool thread.
async fn run<T>(tools: Arc<T>, index: usize, call: ToolCall) -> Result<ToolResult, ToolError>
where
    T: Tools + Send + Sync + 'static,
{
    let args = match call.arguments() {
        Value::Null => b"{}".to_vec(),
        v => serde_json::to_vec(v).map_err(|e| ToolError::internal(e.to_string()))?,
    };
    let runtime = Handle::current();
    let work = tokio::task::spawn_blocking(move || {
        let inner = runtime.clone();
        inner.block_on(async move {
            let cx = Context { call };
            let mut buf = vec![0u8; RESULT_CAPACITY];
            let mut out = ToolOutput::new(&mut buf);
            let ended = {
                let work = tools.call(index, Arguments::new(&args), &cx, &mut out);
                tokio::select! {
                    r = work => Some(r),
                    () = cx.call.cancelled() => None,
                }
            };
            match ended {
                // Cancelled: the engine ended the call; nothing is sent.
                None => Err(ToolError::internal("cancelled")),
                Some(Err(e)) => Err(ToolError::new(e.code, e.message)),
                Some(Ok(())) => to_result(out),
            }
        })
    });
    match work.await {
        Ok(answer) => answer,
        // The handler's panic is the driver's to report, as for any handler.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down: the call is gone.
        Err(_) => Err(Failure::HandlerFailed.into()),
    }
}

/// The tool's JSON result as a [`ToolResult`].
fn to_result(out: ToolOutput<'_>) -> Result<ToolResult, ToolError> {
    let text = match out.finish() {
        Ok(text) => text,
        Err(OutputError::Overflow(_)) => return Err(Failure::ResultTooLarge.into()),
        Err(OutputError::Order) => {
            return Err(ToolError::internal(
                "the tool wrote content after structuredContent",
            ));
        }
    };
    let mut value: Value =
        serde_json::from_slice(text).map_err(|e| ToolError::internal(e.to_string()))?;
    let content = match value.get_mut("content").map(Value::take) {
        Some(Value::Array(blocks)) => blocks.into_iter().map(Content::Json).collect(),
        _ => Vec::new(),
    };
    Ok(ToolResult::Complete {
        content,
        structured: value.get_mut("structuredContent").map(Value::take),
        is_error: value.get("isError") == Some(&Value::Bool(true)),
    })
}

/// The tokio side of a portable tool's call.
struct Context {
    call: ToolCall,
}

impl ToolContext for Context {
    async fn progress(&self, progress: u64, total: Option<u64>, message: Option<&str>) {
        self.call
            .progress(progress as f64, total.map(|t| t as f64), message)
            .await;
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    fn is_cancelled(&self) -> bool {
        self.call.is_cancelled()
    }
}
