//! `rmcp-http-server [--listen ADDR]`: the rmcp Streamable HTTP server of
//! `mcpwire-rmcp-peer` (stateless, JSON responses, axum; default
//! 127.0.0.1:50053), until Ctrl-C. Prints `listening on ADDR` on stderr
//! once it accepts connections.

use std::process::ExitCode;

use axum::serve::ListenerExt;

const USAGE: &str = "usage: rmcp-http-server [--listen ADDR]   (default 127.0.0.1:50053)";

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:50053".to_owned();
    while let Some(arg) = args.next() {
        match (arg.as_str(), arg.split_once('=')) {
            ("--listen", _) => match args.next() {
                Some(addr) => listen = addr,
                None => {
                    eprintln!("--listen needs an address\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            (_, Some(("--listen", addr))) => listen = addr.to_owned(),
            ("-h" | "--help", _) => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("unknown argument {arg}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rmcp-http-server: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(addr) => eprintln!("listening on {addr}"),
        Err(_) => eprintln!("listening on {listen}"),
    }
    let shutdown = async {
        // Without a signal handler, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    // TCP_NODELAY on accepted sockets, as axum's documentation shows (and
    // as tonic and our server do): without it, each small SSE event after
    // the first waits for the client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let served = axum::serve(listener, mcpwire_rmcp_peer::http_router())
        .with_graceful_shutdown(shutdown)
        .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmcp-http-server: {e}");
            ExitCode::FAILURE
        }
    }
}
