//! `h2-echo-server PORT [--window OCTETS]`: the echo server of
//! `mcpwire_interop::echo` on 127.0.0.1:PORT, HTTP/2 with prior knowledge.
//! PORT 0 picks a free port. Prints `listening 127.0.0.1:PORT` once bound.
//! `--window` sets the stream receive window (SETTINGS_INITIAL_WINDOW_SIZE).

use std::io::Write;
use std::process::ExitCode;

use mcpwire_interop::{Config, echo};
use tokio::net::TcpListener;

fn usage() -> ExitCode {
    eprintln!("usage: h2-echo-server PORT [--window OCTETS]");
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(Ok(port)) = args.first().map(|p| p.parse::<u16>()) else {
        return usage();
    };
    let mut config = Config::default();
    match args.get(1..).unwrap_or_default() {
        [] => {}
        [flag, n] if flag == "--window" => match n.parse() {
            Ok(n) => config.initial_window_size = n,
            Err(_) => return usage(),
        },
        _ => return usage(),
    }
    let listener = match TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("h2-echo-server: bind 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        println!("listening {addr}");
        let _ = std::io::stdout().flush();
    }
    match echo::serve(listener, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("h2-echo-server: accept: {e}");
            ExitCode::FAILURE
        }
    }
}
