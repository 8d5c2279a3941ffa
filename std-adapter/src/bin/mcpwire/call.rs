//! `mcpwire call [OPTIONS] [URL] discover | list | tool NAME [JSON-ARGS]`:
//! one request; the result JSON goes to stdout, progress (with
//! `--progress`) and diagnostics (with `-v`) to stderr.
//!
//! The server is a gRPC tunnel server (`grpc://HOST:PORT` or `--server`,
//! `127.0.0.1:50051` by default; cleartext HTTP/2, or TLS with ALPN `h2`
//! trusting the platform's roots or those of a PEM file; `--typed` sends
//! `list` and `tool` as RPCs of the typed binding,
//! [`grpc::Mode::Typed`]), a Streamable HTTP endpoint (`http://` or
//! `https://`: its era probed, or chosen with `--era`; `https://` speaks
//! HTTP/2 when the server selects ALPN `h2`, `--http2` always, `--http1`
//! never), a stdio server launched as a child (`--stdio ... --
//! /ABS/SERVER [ARGS...]`) or a serial device (`--serial`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{ArgGroup, Subcommand};
use mcpwire_core::mcp::client::stdio::EraChoice;
use mcpwire_tokio::client::grpc;
use mcpwire_tokio::{Call, Client, StreamMessage, grpc_authority, redact_url};
use serde_json::{Value, json};

/// `mcpwire call`. The options of one transport conflict with those of
/// another (the groups); those of a URL's scheme are checked after.
#[derive(Debug, clap::Args)]
#[command(
    subcommand_required = true,
    group = ArgGroup::new("grpc").args(["server", "typed"]).multiple(true),
    group = ArgGroup::new("secure").args(["tls", "tls_ca", "tls_server_name"]).multiple(true),
    group = ArgGroup::new("http").args(["http1", "http2"]).multiple(true)
        .conflicts_with_all(["grpc", "child", "device"]),
    group = ArgGroup::new("child").args(["stdio", "pass_env", "inherit_env", "cwd"]).multiple(true)
        .conflicts_with_all(["url", "grpc", "secure", "device"]),
    group = ArgGroup::new("device").args(["serial", "baud"]).multiple(true)
        .conflicts_with_all(["url", "grpc", "secure"]),
    group = ArgGroup::new("eras").args(["url", "stdio", "serial"]).multiple(true),
    after_help = "MCPWIRE_TOKEN, if set, is sent as a bearer token over gRPC and HTTP, and \
        passed to a stdio server as MCPWIRE_TOKEN."
)]
pub struct CallArgs {
    /// The server: http[s]://HOST:PORT/PATH (Streamable HTTP) or
    /// grpc://HOST:PORT (the gRPC tunnel)
    #[arg(value_name = "URL", value_parser = TargetParser, conflicts_with = "server")]
    url: Option<Target>,
    /// A gRPC tunnel server's HOST:PORT [default: 127.0.0.1:50051]
    #[arg(long, value_name = "HOST:PORT", value_parser = host_port)]
    server: Option<String>,
    /// gRPC: the typed binding (model_context_protocol.Mcp), the tunnel
    /// for discover
    #[arg(long)]
    typed: bool,
    /// gRPC: TLS (ALPN h2) trusting the platform's roots
    #[arg(long)]
    tls: bool,
    /// TLS trusting the roots of this PEM file instead
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<PathBuf>,
    /// The name the server's certificate must carry (default: the host)
    #[arg(long, value_name = "NAME")]
    tls_server_name: Option<String>,
    /// Launch the stdio server named after `--` (an empty environment but
    /// --pass-env), and stop it after the request
    #[arg(long)]
    stdio: bool,
    /// A serial device that speaks the stdio binding (a board's UART),
    /// opened raw, 8N1
    #[arg(long, value_name = "DEVICE")]
    serial: Option<PathBuf>,
    /// The serial device's speed [default: 115200]
    #[arg(long, value_name = "N", requires = "serial", value_parser = clap::value_parser!(u32).range(1..))]
    baud: Option<u32>,
    /// Pass this variable of the environment to the stdio server
    /// (repeatable)
    #[arg(long, value_name = "NAME", requires = "stdio")]
    pass_env: Vec<String>,
    /// The stdio server inherits the whole environment
    #[arg(long, requires = "stdio")]
    inherit_env: bool,
    /// The stdio server's working directory
    #[arg(long, value_name = "DIR", requires = "stdio")]
    cwd: Option<PathBuf>,
    /// HTTP and stdio: probe with server/discover, falling back to a
    /// 2025-11-25 session or 2024-11-05 HTTP+SSE (stdio: to initialize);
    /// modern: 2026-07-28 only; legacy: initialize first [default: probe]
    #[arg(long, requires = "eras", value_parser = era())]
    era: Option<EraChoice>,
    /// HTTP: HTTP/1.1 only
    #[arg(long, conflicts_with = "http2", requires = "url")]
    http1: bool,
    /// HTTP: HTTP/2 always (h2c with prior knowledge over http://)
    #[arg(long, requires = "url")]
    http2: bool,
    /// Print the era, the versions, the transport and (HTTP) the URL,
    /// status and HTTP version to stderr
    #[arg(short, long)]
    verbose: bool,
    /// Print the request's progress notifications to stderr
    #[arg(long, global = true)]
    progress: bool,
    /// Give up on the request after MS milliseconds
    #[arg(long = "timeout-ms", value_name = "MS", global = true, value_parser = super::millis)]
    timeout: Option<Duration>,
    #[command(subcommand)]
    request: Request,
}

#[derive(Debug, Subcommand)]
enum Request {
    /// server/discover: what the server is, speaks and offers
    Discover(Child),
    /// tools/list
    List(Child),
    /// tools/call: the tool NAME with JSON-ARGS
    Tool {
        /// The tool's name
        name: String,
        /// Its arguments
        #[arg(value_name = "JSON-ARGS", value_parser = |v: &str| serde_json::from_str::<Value>(v), default_value = "{}")]
        arguments: Value,
        #[command(flatten)]
        child: Child,
    },
}

/// The server `--stdio` launches.
#[derive(Debug, clap::Args)]
struct Child {
    /// With --stdio: the server's executable (an absolute path) and its
    /// arguments
    #[arg(last = true, value_name = "SERVER")]
    command: Vec<String>,
}

/// The server a URL names.
#[derive(Debug, Clone)]
enum Target {
    Http(url::Url),
    /// The `HOST:PORT` of `grpc://HOST:PORT`.
    Grpc(String),
}

/// Parses `[URL]`; its errors show no credentials (clap's own would echo
/// the value).
#[derive(Clone)]
struct TargetParser;

impl TypedValueParser for TargetParser {
    type Value = Target;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Target, clap::Error> {
        let text = value.to_string_lossy();
        let why = match url::Url::parse(&text) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => return Ok(Target::Http(url)),
            Ok(url) if url.scheme() == "grpc" => match grpc_authority(&text) {
                Ok(Some(authority)) => return Ok(Target::Grpc(authority)),
                _ => "a gRPC address is grpc://HOST:PORT, without credentials or a path".into(),
            },
            Ok(_) => "a URL is http://, https:// or grpc://HOST:PORT".into(),
            Err(e) => e.to_string(),
        };
        let message = format!("invalid URL {}: {why}", redact_url(&text));
        Err(cmd.clone().error(ErrorKind::ValueValidation, message))
    }
}

/// The value of `--server`: `HOST:PORT`, as in `grpc://HOST:PORT`.
fn host_port(v: &str) -> Result<String, String> {
    match grpc_authority(&format!("grpc://{v}")) {
        Ok(Some(authority)) => Ok(authority),
        _ => Err("a gRPC server is HOST:PORT".into()),
    }
}

/// The value of `--era`.
fn era() -> impl TypedValueParser<Value = EraChoice> {
    let eras = clap::builder::PossibleValuesParser::new(["probe", "modern", "legacy"]);
    eras.map(|era| match era.as_str() {
        "modern" => EraChoice::Modern,
        "legacy" => EraChoice::Legacy,
        _ => EraChoice::Probe,
    })
}

impl CallArgs {
    /// The rules clap cannot declare: `--stdio` and the command after the
    /// request's `--`, and those that hang on a URL's scheme.
    fn check(&self) -> Result<(), clap::Error> {
        let error = |kind, message: &str| {
            let cmd = clap::Command::new("mcpwire call");
            <Self as clap::Args>::augment_args(cmd).error(kind, message)
        };
        match (self.stdio, self.request_command().first()) {
            (true, None) => Err(error(
                ErrorKind::MissingRequiredArgument,
                "--stdio needs `-- /ABS/SERVER [ARGS...]` after the request",
            )),
            (true, Some(p)) if !Path::new(p).is_absolute() => Err(error(
                ErrorKind::ValueValidation,
                &format!("the server's executable must be an absolute path, not {p}"),
            )),
            (false, Some(_)) => Err(error(
                ErrorKind::ArgumentConflict,
                "`-- /ABS/SERVER` goes with --stdio",
            )),
            _ => Ok(()),
        }?;
        let tls = self.tls || self.tls_ca.is_some();
        let rule = match &self.url {
            Some(Target::Http(_)) if self.typed => "--typed goes with a gRPC server",
            Some(Target::Http(url))
                if url.scheme() == "http" && (tls || self.tls_server_name.is_some()) =>
            {
                "--tls, --tls-ca and --tls-server-name go with an https:// URL"
            }
            Some(Target::Grpc(_)) if self.era.is_some() || self.http1 || self.http2 => {
                "--era, --http1 and --http2 go with an http(s):// URL"
            }
            Some(Target::Grpc(_)) | None if self.tls_server_name.is_some() && !tls => {
                "--tls-server-name goes with --tls, --tls-ca or an https:// URL"
            }
            _ => return Ok(()),
        };
        Err(error(ErrorKind::ArgumentConflict, rule))
    }

    /// The JSON-RPC method and params of the request.
    fn request(&self) -> (&'static str, Value) {
        match &self.request {
            Request::Discover(_) => ("server/discover", json!({})),
            Request::List(_) => ("tools/list", json!({})),
            Request::Tool {
                name, arguments, ..
            } => ("tools/call", json!({"name": name, "arguments": arguments})),
        }
    }

    /// The words after the request's `--`.
    fn request_command(&self) -> &[String] {
        match &self.request {
            Request::Discover(c) | Request::List(c) | Request::Tool { child: c, .. } => &c.command,
        }
    }
}

/// Runs `mcpwire call`.
pub fn main(args: CallArgs) -> ExitCode {
    if let Err(e) = args.check() {
        let _ = e.print();
        return ExitCode::from(2);
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
    runtime.block_on(run(args))
}

/// Connects, sends the request, prints what comes back, closes.
async fn run(args: CallArgs) -> ExitCode {
    let client = match connect(&args).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.verbose {
        if let Some(era) = client.era() {
            eprintln!("mcpwire: {era}");
        }
        eprintln!("mcpwire: transport {}", client.transport_name());
    }
    let (code, call) = request_and_print(&client, &args).await;
    if args.verbose
        && let Some(facts) = call.as_ref().and_then(Call::http_facts)
    {
        eprintln!("mcpwire: {facts}");
    }
    // A stdio server is stopped, a 2025 session deleted.
    if let Some(stopped) = client.close().await
        && args.verbose
    {
        let what = match args.url {
            Some(_) => "the session ended",
            None => "the server stopped",
        };
        eprintln!("mcpwire: {what}: {stopped:?}");
    }
    code
}

/// The client of the server the arguments name, or (said on stderr) why
/// not: exit 2 for a URL the HTTP client refuses, 1 for anything else.
async fn connect(args: &CallArgs) -> Result<Client, ExitCode> {
    use mcpwire_tokio::ServerCommand;
    use mcpwire_tokio::client::{http, stdio};
    let token = std::env::var("MCPWIRE_TOKEN").ok();
    let era = args.era.unwrap_or_default();
    let started = match &args.url {
        Some(Target::Http(url)) => {
            let mut config = match http::Config::new(url.as_str()) {
                Ok(config) => config,
                Err(e) => {
                    eprintln!("mcpwire: {e}");
                    return Err(ExitCode::from(2));
                }
            };
            config.bearer = token;
            config.era = era;
            config.http2 = match (args.http1, args.http2) {
                (true, _) => http::Http2Mode::Never,
                (_, true) => http::Http2Mode::Always,
                _ => http::Http2Mode::default(),
            };
            if let Some(t) = args.timeout {
                config.request_timeout = t;
            }
            #[cfg(feature = "tls")]
            match client_tls(args, url.scheme() == "https") {
                Ok(tls) => config.tls = tls,
                Err(e) => return Err(failed(e)),
            }
            // A tool's x-mcp-header annotations come from tools/list,
            // which the client reads when the server refuses the call's
            // headers.
            Client::http(config).await
        }
        _ if args.stdio || args.serial.is_some() => {
            let mut config = match &args.serial {
                Some(device) => {
                    let device = mcpwire_tokio::SerialDevice::new(device);
                    stdio::Config::serial(match args.baud {
                        Some(baud) => device.baud(baud),
                        None => device,
                    })
                }
                None => {
                    let mut words = args.request_command().iter();
                    let program = words.next().cloned().unwrap_or_default();
                    let mut command = ServerCommand::new(program)
                        .args(words)
                        .inherit_env(args.inherit_env);
                    for name in &args.pass_env {
                        command = command.pass_env(name);
                    }
                    if let Some(token) = token {
                        command = command.env("MCPWIRE_TOKEN", token);
                    }
                    if let Some(dir) = &args.cwd {
                        command = command.current_dir(dir);
                    }
                    stdio::Config::new(command)
                }
            };
            config.era = era;
            Client::stdio(config).await
        }
        target => {
            let server = match target {
                Some(Target::Grpc(authority)) => authority.clone(),
                _ => args.server.clone().unwrap_or("127.0.0.1:50051".into()),
            };
            let mut config = grpc::Config::new(server);
            if args.typed {
                config.mode = grpc::Mode::Typed;
            }
            config.bearer = token;
            if let Err(e) = secure(&mut config, args) {
                return Err(failed(e));
            }
            Client::grpc(config).await
        }
    };
    started.map_err(|e| {
        let refused = matches!(args.url, Some(Target::Http(_)))
            && e.status == mcpwire_core::grpc::Code::InvalidArgument;
        eprintln!("mcpwire: {e}");
        if let Some(w) = &e.diagnostics.www_authenticate {
            eprintln!("mcpwire: WWW-Authenticate: {w}");
        }
        ExitCode::from(if refused { 2 } else { 1 })
    })
}

/// Says why the client was not set up; exit 1.
fn failed(why: String) -> ExitCode {
    eprintln!("mcpwire: {why}");
    ExitCode::FAILURE
}

/// Sends the command's request on `client`: its progress (with
/// `--progress`) and errors go to stderr, its result to stdout. The call,
/// when it started, comes back for its facts.
async fn request_and_print(client: &Client, args: &CallArgs) -> (ExitCode, Option<Call>) {
    let (method, mut params) = args.request();
    if args.progress {
        params["_meta"] = json!({"progressToken": "mcpwire-cli"});
    }
    let request = json!({"jsonrpc": "2.0", "method": method, "params": params});
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
fn secure(config: &mut grpc::Config, args: &CallArgs) -> Result<(), String> {
    config.tls = client_tls(args, false)?;
    Ok(())
}

/// The client TLS of `--tls`, `--tls-ca` and `--tls-server-name` (or of an
/// `https://` URL, `https`); `None` for cleartext.
#[cfg(feature = "tls")]
fn client_tls(
    args: &CallArgs,
    https: bool,
) -> Result<Option<mcpwire_tokio::ClientTlsConfig>, String> {
    if !(https || args.tls || args.tls_ca.is_some()) {
        return Ok(None);
    }
    let mut client = match &args.tls_ca {
        Some(path) => mcpwire_tokio::ClientTlsConfig::with_pem_roots_file(path),
        None => mcpwire_tokio::ClientTlsConfig::with_platform_roots(),
    }
    .map_err(|e| e.to_string())?;
    if let Some(name) = &args.tls_server_name {
        client = client.server_name(name.clone());
    }
    Ok(Some(client))
}

#[cfg(not(feature = "tls"))]
fn secure(_config: &mut grpc::Config, args: &CallArgs) -> Result<(), String> {
    if args.tls || args.tls_ca.is_some() || args.tls_server_name.is_some() {
        return Err("this mcpwire is built without the `tls` feature".into());
    }
    Ok(())
}
