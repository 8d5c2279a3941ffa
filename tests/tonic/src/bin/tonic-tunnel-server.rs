//! `tonic-tunnel-server [--listen ADDR]`: the tonic MCP tunnel server of
//! `mcpwire-tonic-peer` (default 127.0.0.1:50052), until Ctrl-C.

use std::process::ExitCode;

use mcpwire_tonic_peer::DEFAULT_LISTEN;

const USAGE: &str = "usage: tonic-tunnel-server [--listen ADDR]   (default 127.0.0.1:50052)";

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut listen = DEFAULT_LISTEN.to_owned();
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
            eprintln!("tonic-tunnel-server: cannot listen on {listen}: {e}");
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
    match mcpwire_tonic_peer::serve_with_shutdown(listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tonic-tunnel-server: {e}");
            ExitCode::FAILURE
        }
    }
}
