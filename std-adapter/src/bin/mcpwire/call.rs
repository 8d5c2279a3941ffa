//! `mcpwire call [--server ADDR] [--tls | --tls-ca PEM] [--tls-server-name
//! NAME] discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms
//! N]`: one request over the tunnel binding (cleartext HTTP/2, or TLS with
//! ALPN `h2` trusting the platform's roots or those of a PEM file); the
//! result JSON goes to stdout, progress (with `--progress`) to stderr.
//! `--typed` sends `list` and `tool` as RPCs of the typed binding
//! (`model_context_protocol.Mcp`) and `discover` over the tunnel
//! ([`mcpwire_tokio::client::grpc::Mode::Typed`]).
//! With `--stdio [-v] ... -- /abs/server [ARGS...]` the request goes to a
//! stdio server launched as a child (the words after `--`); `-v` prints
//! the era, the versions and whether a fallback happened to stderr.
//! With an `http://HOST:PORT/PATH` or `https://...` URL instead of
//! `--server`, the request goes to that Streamable HTTP endpoint
//! ([`Client::http`](mcpwire_tokio::Client::http); `https://` trusts the
//! platform's roots, or those of `--tls-ca`, and verifies
//! `--tls-server-name` when given); `-v` prints the era, the versions and
//! the HTTP facts to stderr. `https://` speaks HTTP/2 when the server
//! selects ALPN `h2`; `--http2` speaks HTTP/2 always (`h2c` with prior
//! knowledge over `http://`), `--http1` never.

use std::process::ExitCode;
use std::time::Duration;

use mcpwire_core::mcp::client::stdio::EraChoice;
use mcpwire_tokio::client::grpc;
use mcpwire_tokio::{Call, Client, StreamMessage};
use serde_json::{Value, json};

pub const USAGE: &str = "usage: mcpwire call [--server ADDR | grpc://ADDR] [--typed] [--tls | --tls-ca PEM] [--tls-server-name NAME] discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N]   (default 127.0.0.1:50051, cleartext;
         --typed: the typed gRPC binding, with the tunnel for discover)
       mcpwire call --stdio [-v] [--era probe|modern|legacy] [--pass-env NAME]... [--inherit-env] [--cwd DIR]
         discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N] -- /ABS/SERVER [ARGS...]
         (the child gets an empty environment but the --pass-env names; MCPWIRE_TOKEN goes to it as MCPWIRE_TOKEN)
       mcpwire call --serial DEVICE [--baud N] [-v] [--era probe|modern|legacy]
         discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N]
         (a serial device that speaks the stdio binding, a board's UART: opened raw, 8N1, at N baud, default 115200)
       mcpwire call http[s]://HOST:PORT/PATH [--tls-ca PEM] [--tls-server-name NAME] [--http1 | --http2] [-v] [--era probe|modern|legacy]
         discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N]
         (Streamable HTTP: the era probed with server/discover, falling back to a 2025-11-25 session or
         2024-11-05 HTTP+SSE; -v prints the era, the versions and the fallback; MCPWIRE_TOKEN, if set,
         is sent as a bearer token)";

/// How the call connects.
#[derive(Debug, Default)]
struct Tls {
    /// `--tls` or `--tls-ca`: TLS with ALPN h2.
    on: bool,
    /// `--tls-ca`: trust these roots instead of the platform's.
    ca: Option<String>,
    server_name: Option<String>,
}

/// `--stdio`: the server to launch and how.
#[derive(Default)]
struct StdioArgs {
    command: Vec<String>,
    /// `--serial DEVICE [--baud N]` instead of a command.
    serial: Option<mcpwire_tokio::SerialDevice>,
    verbose: bool,
    era: EraChoice,
    pass_env: Vec<String>,
    inherit_env: bool,
    cwd: Option<String>,
}

struct Args {
    server: String,
    method: String,
    params: Value,
    progress: bool,
    timeout: Option<Duration>,
    tls: Tls,
    stdio: Option<StdioArgs>,
    /// An `http://` URL: the modern Streamable HTTP endpoint to call.
    http: Option<String>,
    /// `--era` before an `http://` URL: probe (default), modern or legacy.
    http_era: EraChoice,
    /// `-v` (HTTP): the diagnostics line on stderr.
    verbose: bool,
    /// `--http1` / `--http2` (HTTP).
    http2: mcpwire_tokio::client::http::Http2Mode,
    /// `--typed` (gRPC): the typed binding, the tunnel as its fallback.
    typed: bool,
}

fn era_choice(v: &str) -> Result<EraChoice, String> {
    Ok(match v {
        "probe" => EraChoice::Probe,
        "modern" => EraChoice::Modern,
        "legacy" => EraChoice::Legacy,
        other => return Err(format!("--era probe|modern|legacy, not {other}")),
    })
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut server = String::from("127.0.0.1:50051");
    let mut progress = false;
    let mut timeout = None;
    let mut tls = Tls::default();
    let mut words = Vec::new();
    let mut stdio: Option<StdioArgs> = None;
    let mut http = None;
    let mut http_era = None;
    let mut verbose = false;
    let mut http2 = None;
    let mut typed = false;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        if let Some(s) = stdio.as_mut() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            match arg.as_str() {
                "--" => {
                    s.command = args.by_ref().collect();
                    break;
                }
                "-v" => {
                    s.verbose = true;
                    continue;
                }
                "--inherit-env" => {
                    s.inherit_env = true;
                    continue;
                }
                "--pass-env" => {
                    s.pass_env.push(value("--pass-env")?);
                    continue;
                }
                "--cwd" => {
                    s.cwd = Some(value("--cwd")?);
                    continue;
                }
                "--era" => {
                    s.era = era_choice(&value("--era")?)?;
                    continue;
                }
                "--baud" if s.serial.is_some() => {
                    let baud = super::parse_baud(&value("--baud")?)?;
                    s.serial = s.serial.take().map(|d| d.baud(baud));
                    continue;
                }
                _ => {}
            }
        }
        if arg == "--stdio" || arg == "--serial" {
            if stdio.is_some() {
                return Err("one of --stdio and --serial".into());
            }
            let serial = match arg.as_str() {
                "--serial" => Some(mcpwire_tokio::SerialDevice::new(
                    args.next().ok_or("--serial needs a device")?,
                )),
                _ => None,
            };
            stdio = Some(StdioArgs {
                serial,
                ..StdioArgs::default()
            });
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "--server" => {
                server = inline
                    .or_else(|| args.next())
                    .ok_or("--server needs an address")?;
            }
            "--timeout-ms" => {
                let v = inline
                    .or_else(|| args.next())
                    .ok_or("--timeout-ms needs a number")?;
                let ms: u64 = v.parse().map_err(|_| format!("bad --timeout-ms {v}"))?;
                timeout = Some(Duration::from_millis(ms));
            }
            "--progress" => progress = true,
            "--typed" => typed = true,
            "-v" => verbose = true,
            "--era" => {
                let v = inline
                    .or_else(|| args.next())
                    .ok_or("--era needs a value")?;
                http_era = Some(era_choice(&v)?);
            }
            "--http1" | "--http2" if http2.is_some() => {
                return Err("one of --http1 and --http2".into());
            }
            "--http1" => http2 = Some(mcpwire_tokio::client::http::Http2Mode::Never),
            "--http2" => http2 = Some(mcpwire_tokio::client::http::Http2Mode::Always),
            // The gRPC tunnel by URL, as `Client::connect` takes it.
            _ if flag.starts_with("grpc://") => {
                server = flag["grpc://".len()..].trim_end_matches('/').to_owned();
            }
            _ if flag.starts_with("http://") || flag.starts_with("https://") => {
                if http.replace(arg).is_some() {
                    return Err("one URL only".into());
                }
            }
            "--tls" => tls.on = true,
            "--tls-ca" => {
                tls.ca = Some(
                    inline
                        .or_else(|| args.next())
                        .ok_or("--tls-ca needs a file")?,
                );
                tls.on = true;
            }
            "--tls-server-name" => {
                tls.server_name = Some(
                    inline
                        .or_else(|| args.next())
                        .ok_or("--tls-server-name needs a name")?,
                );
            }
            _ if flag.starts_with("--") => return Err(format!("unknown argument {arg}")),
            _ => words.push(arg),
        }
    }
    let mut words = words.into_iter();
    let (method, params) = match words.next().as_deref() {
        Some("discover") => ("server/discover", json!({})),
        Some("list") => ("tools/list", json!({})),
        Some("tool") => {
            let name = words.next().ok_or("tool needs a NAME")?;
            let arguments = match words.next() {
                Some(text) => {
                    serde_json::from_str::<Value>(&text).map_err(|e| format!("JSON-ARGS: {e}"))?
                }
                None => json!({}),
            };
            ("tools/call", json!({"name": name, "arguments": arguments}))
        }
        Some(other) => return Err(format!("unknown command {other}")),
        None => return Err("a command is needed".into()),
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected argument {extra}"));
    }
    if let Some(s) = stdio.as_ref().filter(|s| s.serial.is_some()) {
        if !s.command.is_empty() || !s.pass_env.is_empty() || s.inherit_env || s.cwd.is_some() {
            return Err(
                "--serial takes no server command, --pass-env, --inherit-env or --cwd".into(),
            );
        }
    } else if let Some(s) = &stdio {
        match s.command.first() {
            None => return Err("--stdio needs `-- /ABS/SERVER [ARGS...]`".into()),
            Some(p) if !std::path::Path::new(p).is_absolute() => {
                return Err(format!(
                    "the server's executable must be an absolute path, not {p}"
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(url) = &http {
        if stdio.is_some() {
            return Err("a URL goes without --stdio".into());
        }
        let https = url.starts_with("https://");
        if !https && (tls.on || tls.server_name.is_some()) {
            return Err("--tls, --tls-ca and --tls-server-name go with an https:// URL".into());
        }
        tls.on = https;
    }
    if typed && (http.is_some() || stdio.is_some()) {
        return Err("--typed goes with a gRPC server".into());
    }
    if http2.is_some() && http.is_none() {
        return Err("--http1 and --http2 go with a URL".into());
    }
    if verbose && http.is_none() {
        return Err("-v goes with --stdio or an http:// URL".into());
    }
    if http_era.is_some() && http.is_none() {
        return Err("--era goes with --stdio or an http:// URL".into());
    }
    Ok(Args {
        http,
        http_era: http_era.unwrap_or_default(),
        verbose,
        http2: http2.unwrap_or_default(),
        typed,
        stdio,
        server,
        method: method.to_owned(),
        params,
        progress,
        timeout,
        tls,
    })
}

/// Runs the subcommand with the arguments after `call`.
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
    if args.stdio.is_some() {
        return runtime.block_on(run_stdio(args));
    }
    if args.http.is_some() {
        return runtime.block_on(run_http(args));
    }
    runtime.block_on(run(args))
}

/// `--stdio`: launches the server, runs the request, shuts the server down.
async fn run_stdio(mut args: Args) -> ExitCode {
    use mcpwire_tokio::ServerCommand;
    use mcpwire_tokio::client::stdio;
    let Some(s) = args.stdio.take() else {
        return ExitCode::from(2);
    };
    let mut config = match s.serial {
        Some(device) => stdio::Config::serial(device),
        None => {
            let mut words = s.command.into_iter();
            let mut command = ServerCommand::new(words.next().unwrap_or_default())
                .args(words)
                .inherit_env(s.inherit_env);
            for name in s.pass_env {
                command = command.pass_env(name);
            }
            if let Ok(token) = std::env::var("MCPWIRE_TOKEN") {
                command = command.env("MCPWIRE_TOKEN", token);
            }
            if let Some(dir) = s.cwd {
                command = command.current_dir(dir);
            }
            stdio::Config::new(command)
        }
    };
    config.era = s.era;
    let client = match Client::stdio(config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::FAILURE;
        }
    };
    if s.verbose
        && let Some(era) = client.era()
    {
        eprintln!("mcpwire: {era}");
    }
    let (code, _) = request_and_print(&client, args).await;
    if let Some(stopped) = client.close().await
        && s.verbose
    {
        eprintln!("mcpwire: the server stopped: {stopped:?}");
    }
    code
}

/// An `http://` URL: one request to a Streamable HTTP endpoint, its era
/// probed first (or chosen with `--era`).
async fn run_http(args: Args) -> ExitCode {
    let mut config =
        match mcpwire_tokio::client::http::Config::new(args.http.as_deref().unwrap_or_default()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("mcpwire: {e}\n{USAGE}");
                return ExitCode::from(2);
            }
        };
    config.bearer = std::env::var("MCPWIRE_TOKEN").ok();
    config.http2 = args.http2;
    config.era = args.http_era;
    if let Some(t) = args.timeout {
        config.request_timeout = t;
    }
    #[cfg(feature = "tls")]
    match client_tls(&args.tls) {
        Ok(tls) => config.tls = tls,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::FAILURE;
        }
    }
    // A tool's x-mcp-header annotations come from tools/list, which the
    // channel reads when the server refuses the call's headers (-32020).
    let client = match Client::http(config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            if let Some(w) = &e.diagnostics.www_authenticate {
                eprintln!("mcpwire: WWW-Authenticate: {w}");
            }
            return ExitCode::from(if e.status == mcpwire_core::grpc::Code::InvalidArgument {
                2
            } else {
                1
            });
        }
    };
    let verbose = args.verbose;
    if verbose {
        if let Some(era) = client.era() {
            eprintln!("mcpwire: {era}");
        }
        eprintln!("mcpwire: transport {}", client.transport_name());
    }
    let (code, call) = request_and_print(&client, args).await;
    if verbose && let Some(facts) = call.as_ref().and_then(Call::http_facts) {
        eprintln!("mcpwire: {facts}");
    }
    // A 2025 session is deleted.
    if let Some(stopped) = client.close().await
        && verbose
    {
        eprintln!("mcpwire: the session ended: {stopped:?}");
    }
    code
}

/// The gRPC tunnel (or the typed binding): one request.
async fn run(args: Args) -> ExitCode {
    let mut config = grpc::Config::new(args.server.clone());
    if args.typed {
        config.mode = grpc::Mode::Typed;
    }
    config.bearer = std::env::var("MCPWIRE_TOKEN").ok();
    if let Err(e) = secure(&mut config, &args.tls) {
        eprintln!("mcpwire: {e}");
        return ExitCode::FAILURE;
    }
    let client = match Client::grpc(config).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::FAILURE;
        }
    };
    request_and_print(&client, args).await.0
}

/// Sends the command's request on `client`: its progress (with
/// `--progress`) and errors go to stderr, its result to stdout. The call,
/// when it started, comes back for its facts.
async fn request_and_print(client: &Client, args: Args) -> (ExitCode, Option<Call>) {
    let mut params = args.params;
    if args.progress {
        params["_meta"] = json!({"progressToken": "mcpwire-cli"});
    }
    let request = json!({"jsonrpc": "2.0", "method": args.method, "params": params});
    let mut call = match client.call_with_timeout(request, args.timeout).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return (ExitCode::FAILURE, None);
        }
    };
    let code = loop {
        match call.next().await {
            Ok(Some(StreamMessage::Notification(n))) => print_progress(args.progress, &n),
            Ok(Some(StreamMessage::Response(r))) => break print_response(&r),
            Ok(None) => {
                eprintln!("mcpwire: the call ended without a response");
                break ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("mcpwire: {e}");
                if let Some(w) = &e.diagnostics.www_authenticate {
                    eprintln!("mcpwire: WWW-Authenticate: {w}");
                }
                break ExitCode::FAILURE;
            }
        }
    };
    (code, Some(call))
}

fn print_progress(enabled: bool, n: &Value) {
    if enabled && n["method"] == "notifications/progress" {
        let p = &n["params"];
        let total = p["total"]
            .as_f64()
            .map(|t| format!("/{t}"))
            .unwrap_or_default();
        let message = p["message"].as_str().unwrap_or("");
        eprintln!("progress {}{total} {message}", p["progress"]);
    }
}

fn print_response(r: &Value) -> ExitCode {
    if let Some(error) = r.get("error") {
        eprintln!("mcpwire: JSON-RPC error {error}");
        return ExitCode::FAILURE;
    }
    let result = r.get("result").cloned().unwrap_or(Value::Null);
    match serde_json::to_string_pretty(&result) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpwire: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "tls")]
fn secure(config: &mut grpc::Config, tls: &Tls) -> Result<(), String> {
    config.tls = client_tls(tls)?;
    Ok(())
}

/// The client TLS of `--tls`, `--tls-ca` and `--tls-server-name` (or of an
/// `https://` URL); `None` for cleartext.
#[cfg(feature = "tls")]
fn client_tls(tls: &Tls) -> Result<Option<mcpwire_tokio::ClientTlsConfig>, String> {
    if !tls.on {
        return match tls.server_name {
            Some(_) => Err("--tls-server-name needs --tls or --tls-ca".into()),
            None => Ok(None),
        };
    }
    let mut client = match &tls.ca {
        Some(path) => mcpwire_tokio::ClientTlsConfig::with_pem_roots_file(path),
        None => mcpwire_tokio::ClientTlsConfig::with_platform_roots(),
    }
    .map_err(|e| e.to_string())?;
    if let Some(name) = &tls.server_name {
        client = client.server_name(name.clone());
    }
    Ok(Some(client))
}

#[cfg(not(feature = "tls"))]
fn secure(_config: &mut grpc::Config, tls: &Tls) -> Result<(), String> {
    if tls.on || tls.server_name.is_some() {
        return Err("this mcpwire is built without the `tls` feature".into());
    }
    Ok(())
}
