//! One client API over the three transports: the same calls to the demo
//! server over gRPC, Streamable HTTP and stdio (a child it starts).
//!
//! ```sh
//! cargo build -p mcpwire-tokio --bin mcpwire --example clients
//! target/debug/mcpwire serve &          # gRPC and HTTP on 127.0.0.1:50051
//! target/debug/examples/clients         # [ADDR] [/ABS/PATH/TO/mcpwire]
//! ```

use std::path::PathBuf;

use mcpwire_tokio::client::{grpc, http, stdio};
use mcpwire_tokio::{CallError, Client, ServerCommand};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), CallError> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:50051".into());
    // The stdio server is the mcpwire binary beside this example's
    // directory (target/debug/mcpwire), unless named.
    let mcpwire = match args.next() {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.parent()?.join("mcpwire")))
            .unwrap_or_default(),
    };

    let clients = [
        ("gRPC", Client::grpc(grpc::Config::new(&addr)).await?),
        (
            "Streamable HTTP",
            Client::http(http::Config::new(&format!("http://{addr}/mcp"))?).await?,
        ),
        (
            "stdio",
            Client::stdio(stdio::Config::new(
                ServerCommand::new(mcpwire).args(["serve", "--stdio"]),
            ))
            .await?,
        ),
    ];
    for (transport, client) in &clients {
        let tools = client.list_tools().await?;
        let echoed = client.call_tool("echo", json!({"text": "hello"})).await?;
        let mut steps = 0;
        client
            .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 10}), |_| {
                steps += 1;
            })
            .await?;
        println!(
            "{transport}: {} tools, echo said {:?}, {steps} progress notifications",
            tools.len(),
            echoed.text()
        );
        // A stdio server is stopped; the connections are closed.
        client.close().await;
    }
    Ok(())
}
