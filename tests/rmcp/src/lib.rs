//! The benchmark peer built on rmcp 3.11, the official Rust MCP SDK,
//! written the way an rmcp user would write it: `#[tool_router]` tools, a
//! `ServerHandler`, and rmcp's own transports.
//!
//! It serves the two tools of `mcpwire serve`'s demo that the load
//! benchmark calls, with the same arguments and results: `echo` (`{text}`,
//! returns it as text) and `progress` (`{steps, delay_ms}`, defaults 3 and
//! 100: `steps` `notifications/progress`, `delay_ms` apart, when the request
//! carries `_meta.progressToken`, then the text `done after N steps`).
//!
//! Two bindings: Streamable HTTP ([`http_router`]: rmcp's
//! `StreamableHttpService` on axum at `/mcp`, stateless, JSON responses
//! where the call has nothing to stream) and stdio ([`serve_stdio`]). rmcp
//! 3.11 speaks MCP 2026-07-28 (per-request `_meta`, no `initialize`) and the
//! 2025 revisions with `initialize` on both.

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    Implementation, ProgressNotificationParam, RequestMetaObject, ServerCapabilities, ServerConfig,
};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    Peer, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// `echo`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    pub text: String,
}

/// `progress`'s arguments (both optional, as in the demo).
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ProgressArgs {
    #[schemars(range(min = 0))]
    pub steps: Option<u64>,
    #[schemars(range(min = 0))]
    pub delay_ms: Option<u64>,
}

/// The server: the demo's `echo` and `progress`.
#[derive(Debug, Clone)]
pub struct Demo {
    // Read by the code `#[tool_handler]` generates.
    #[allow(dead_code)]
    tool_router: ToolRouter<Self>,
    name: &'static str,
}

impl Demo {
    /// The server, reporting `name` as its implementation name.
    pub fn new(name: &'static str) -> Self {
        Self {
            tool_router: Self::tool_router(),
            name,
        }
    }
}

#[tool_router]
impl Demo {
    #[tool(description = "Returns its text.")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }

    #[tool(description = "Sends `steps` progress notifications, `delay_ms` apart, then a result.")]
    async fn progress(
        &self,
        Parameters(args): Parameters<ProgressArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> String {
        let steps = args.steps.unwrap_or(3);
        let delay = args.delay_ms.unwrap_or(100);
        let token = meta.get_progress_token();
        for i in 1..=steps {
            // A zero delay sends at once, as the demo does.
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if let Some(token) = &token {
                let note = ProgressNotificationParam::new(token.clone(), i as f64)
                    .with_total(steps as f64)
                    .with_message(format!("step {i} of {steps}"));
                // A client that went away ends the call's stream; the
                // result is then dropped too.
                let _ = peer.notify_progress(note).await;
            }
        }
        format!("done after {steps} steps")
    }
}

#[tool_handler]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name, env!("CARGO_PKG_VERSION")))
            .with_instructions("An rmcp server of the mcpwire demo's echo and progress tools.")
    }
}

/// The Streamable HTTP endpoint at [`MCP_PATH`]: stateless (no
/// `Mcp-Session-Id`, no session for the 2025 revisions either), JSON
/// responses for calls that stream nothing, SSE for the others.
pub fn http_router() -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service: StreamableHttpService<Demo, NeverSessionManager> = StreamableHttpService::new(
        || Ok(Demo::new("rmcp-http-server")),
        Default::default(),
        config,
    );
    axum::Router::new().nest_service(MCP_PATH, service)
}

/// Serves MCP on stdin and stdout (rmcp's non-blocking pipe transport when
/// both are pipes, as when a host launches the server) until stdin ends.
pub async fn serve_stdio() -> Result<(), String> {
    let running = Demo::new("rmcp-stdio-server")
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| format!("serving stdio: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("stdio service: {e}"))
}
