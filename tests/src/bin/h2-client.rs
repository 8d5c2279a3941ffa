//! An HTTP/2 client (prior knowledge) over `mcpwire_interop::client`:
//!
//! ```text
//! h2-client PORT post PATH BYTES [--streams K]
//! h2-client PORT get PATH [--expect FILE | --expect-len N]
//! ```
//!
//! `post` sends K (default 1) concurrent requests of BYTES generated octets
//! and checks that each response is status 200 and echoes its body. `get`
//! checks status 200 and, if asked, the body: equal to FILE, or N octets
//! (of the echo server's pattern for `/big/N`). Prints `ok <bytes received>`
//! and exits 0, or prints `FAIL: <why>` and exits 1.

use std::process::ExitCode;

use mcpwire_interop::client::{self, Request, Response};
use mcpwire_interop::{Config, echo};

fn usage() -> ExitCode {
    eprintln!(
        "usage: h2-client PORT post PATH BYTES [--streams K]\n       h2-client PORT get PATH [--expect FILE | --expect-len N]"
    );
    ExitCode::from(2)
}

enum Expect {
    Echo(Vec<u8>),
    Bytes(Vec<u8>),
    Len(usize),
    Any,
}

fn check(r: &Response, expect: &Expect) -> Result<(), String> {
    if let Some(e) = &r.error {
        return Err(format!(
            "{e} (status {:?}, {} octets)",
            r.status,
            r.body.len()
        ));
    }
    if r.status != Some(200) {
        return Err(format!("status {:?}", r.status));
    }
    let want = match expect {
        Expect::Echo(b) | Expect::Bytes(b) => b.as_slice(),
        Expect::Len(n) => {
            if r.body.len() != *n {
                return Err(format!("{} octets, expected {n}", r.body.len()));
            }
            return Ok(());
        }
        Expect::Any => return Ok(()),
    };
    if r.body.len() != want.len() {
        return Err(format!("{} octets, expected {}", r.body.len(), want.len()));
    }
    if let Some(at) = r.body.iter().zip(want).position(|(a, b)| a != b) {
        return Err(format!("body differs at octet {at}"));
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(Ok(port)) = args.first().map(|p| p.parse::<u16>()) else {
        return usage();
    };
    let (requests, expect) = match args.get(1..).unwrap_or_default() {
        [m, path, n, rest @ ..] if m == "post" => {
            let Ok(n) = n.parse::<usize>() else {
                return usage();
            };
            let streams = match rest {
                [] => 1,
                [flag, k] if flag == "--streams" => match k.parse::<usize>() {
                    Ok(k) if k > 0 => k,
                    _ => return usage(),
                },
                _ => return usage(),
            };
            let body = echo::pattern_body(n);
            let requests = vec![Request::post(path, body.clone()); streams];
            (requests, Expect::Echo(body))
        }
        [m, path, rest @ ..] if m == "get" => {
            let expect = match rest {
                [] => Expect::Any,
                [flag, file] if flag == "--expect" => match std::fs::read(file) {
                    Ok(b) => Expect::Bytes(b),
                    Err(e) => {
                        eprintln!("h2-client: {file}: {e}");
                        return ExitCode::from(2);
                    }
                },
                [flag, n] if flag == "--expect-len" => match n.parse::<usize>() {
                    Ok(n) if path.starts_with("/big/") => Expect::Bytes(echo::pattern_body(n)),
                    Ok(n) => Expect::Len(n),
                    Err(_) => return usage(),
                },
                _ => return usage(),
            };
            (vec![Request::get(path)], expect)
        }
        _ => return usage(),
    };
    let addr = format!("127.0.0.1:{port}");
    let responses = match client::run(&addr, Config::default(), requests).await {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL: {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut total = 0;
    for (i, r) in responses.iter().enumerate() {
        if let Err(why) = check(r, &expect) {
            println!("FAIL: request {i}: {why}");
            return ExitCode::FAILURE;
        }
        total += r.body.len();
    }
    println!("ok {total}");
    ExitCode::SUCCESS
}
