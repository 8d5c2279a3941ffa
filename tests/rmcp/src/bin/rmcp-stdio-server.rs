//! `rmcp-stdio-server`: the rmcp stdio server of `mcpwire-rmcp-peer`, one
//! JSON-RPC message per line on stdin and stdout, until stdin ends.
//! Diagnostics go to stderr only.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        if arg == "-h" || arg == "--help" {
            println!("usage: rmcp-stdio-server   (MCP on stdin and stdout)");
            return ExitCode::SUCCESS;
        }
        eprintln!("rmcp-stdio-server: unknown argument {arg}");
        return ExitCode::from(2);
    }
    match mcpwire_rmcp_peer::serve_stdio().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmcp-stdio-server: {e}");
            ExitCode::FAILURE
        }
    }
}
