//! `mcpwire serve [--listen 127.0.0.1:50051]`: the demo application over
//! the gRPC tunnel binding.

use std::process::ExitCode;
use std::time::Duration;

use mcpwire_tokio::{Server, demo};

const USAGE: &str = "usage: mcpwire serve [--listen ADDR]   (default 127.0.0.1:50051)";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut listen = String::from("127.0.0.1:50051");
    match args.next().as_deref() {
        Some("serve") => {}
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(&listen)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(listen: &str) -> std::io::Result<()> {
    let server = Server::bind(listen).await?;
    eprintln!("listening on {}", server.local_addr()?);
    let app = demo::app(Duration::from_secs(5));
    server
        .serve_with_shutdown(app, async {
            // Without a signal handler, serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
}
