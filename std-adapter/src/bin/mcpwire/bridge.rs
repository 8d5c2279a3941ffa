//! `mcpwire bridge --stdio-host (--to URL | -- /ABS/SERVER [ARGS...])`:
//! a host that speaks only stdio reaches a server over any transport of
//! [`Client`]: Streamable HTTP (`http://`, `https://`), the gRPC tunnel
//! (`grpc://HOST:PORT`) or a stdio child.
//!
//! Each line of stdin is one JSON-RPC message of the host. A request is
//! forwarded as one downstream call, unchanged but for its id: the client
//! picks the downstream id and the bridge puts the host's back on the
//! response, and on every `notifications/progress` of the call the host's
//! progress token. `notifications/cancelled` drops the downstream call (the
//! HTTP stream closed, the gRPC stream reset, or `notifications/cancelled`
//! to a child) and nothing more is sent for that request. A call that
//! breaks downstream is a JSON-RPC error to the host that says so; the
//! server's own errors (version errors among them) go back as they came.
//! Only JSON-RPC lines go to stdout; diagnostics go to stderr. At the end
//! of stdin the calls in flight finish, then the bridge exits 0.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::stdio::{Era, EraChoice};
use mcpwire_core::mcp::error::{INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR};
use mcpwire_core::mcp::meta::{KEY_SUBSCRIPTION_ID, PROTOCOL_VERSION};
use mcpwire_tokio::{
    App, CallError, Client, ForwardRequest, HttpChannelConfig, ServerCommand, StdioChannelConfig,
    StreamMessage, ToolError,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub const USAGE: &str = "usage: mcpwire bridge HOST-SIDE [--timeout-ms N] [RESTART] --to http[s]://HOST:PORT/PATH | grpc://HOST:PORT
       mcpwire bridge HOST-SIDE [--timeout-ms N] [RESTART] [--pass-env NAME]... -- /ABS/SERVER [ARGS...]
  HOST-SIDE is one of
         --stdio-host   the host speaks MCP over stdin/stdout
         --listen [ADDR:]PORT (--token-file FILE | --no-auth) [--tls-cert PEM --tls-key PEM]
              [--allow-host NAME]... [--http-path PATH]
           the host reaches Streamable HTTP (at /mcp), the gRPC tunnel and the typed gRPC service
           on that port (127.0.0.1 unless ADDR says otherwise); a bearer token of FILE is required
           unless --no-auth; an Origin that is not allowed is refused (403)
  RESTART (a stdio server): [--restart-max N] starts in a row that may fail (default 5),
         [--restart-backoff-ms N] the first wait before a restart (default 100, doubling up to 5 s)
  each request is forwarded to the server; the host's token is never sent on
  (MCPWIRE_TOKEN, if set, is the bearer token sent downstream over HTTP and gRPC)";

/// The longest line read from the host; a longer one is refused.
const MAX_LINE_BYTES: usize = 16 << 20;

/// The server side.
enum Downstream {
    Address(String),
    Child {
        command: Vec<String>,
        pass_env: Vec<String>,
    },
}

/// The host side.
enum Host {
    Stdio,
    /// `--listen`: the network server, its options (tokens, TLS, hosts).
    Listen {
        addr: String,
        opts: super::ServeOptions,
        no_auth: bool,
    },
}

/// How a stdio server is restarted after a crash.
#[derive(Default)]
struct Restart {
    max: Option<u32>,
    backoff: Option<Duration>,
}

struct Args {
    host: Host,
    downstream: Downstream,
    timeout: Option<Duration>,
    restart: Restart,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut stdio_host = false;
    let mut listen = None;
    let mut no_auth = false;
    let mut opts = super::ServeOptions::default();
    let mut restart = Restart::default();
    let mut to = None;
    let mut command = None;
    let mut pass_env = Vec::new();
    let mut timeout = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if super::ServeOptions::takes(&arg) {
            if arg.split('=').next() == Some("--token") {
                return Err(
                    "a token on the command line is seen in the process list: use --token-file"
                        .into(),
                );
            }
            opts.take(&arg, &mut args)?;
            continue;
        }
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--stdio-host" => stdio_host = true,
            "--listen" => listen = Some(value("--listen")?),
            "--no-auth" => no_auth = true,
            "--restart-max" => {
                let v = value("--restart-max")?;
                restart.max = Some(v.parse().map_err(|_| format!("bad --restart-max {v}"))?);
            }
            "--restart-backoff-ms" => {
                let v = value("--restart-backoff-ms")?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("bad --restart-backoff-ms {v}"))?;
                restart.backoff = Some(Duration::from_millis(ms));
            }
            "--to" => to = Some(value("--to")?),
            "--pass-env" => pass_env.push(value("--pass-env")?),
            "--timeout-ms" => {
                let v = value("--timeout-ms")?;
                let ms: u64 = v.parse().map_err(|_| format!("bad --timeout-ms {v}"))?;
                timeout = Some(Duration::from_millis(ms));
            }
            "--" => {
                command = Some(args.by_ref().collect::<Vec<_>>());
                break;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let host = match (stdio_host, listen) {
        (true, Some(_)) => return Err("one host side: --stdio-host or --listen, not both".into()),
        (false, None) => return Err("the host side is needed: --stdio-host or --listen".into()),
        (true, None) => {
            if opts.is_set() || no_auth {
                return Err("--token-file, --no-auth, --tls-*, --allow-host and --http-path go with --listen".into());
            }
            Host::Stdio
        }
        (false, Some(addr)) => {
            match (opts.tokens.is_empty(), no_auth) {
                (true, false) => {
                    return Err("--listen needs --token-file FILE (or --no-auth, which lets anyone who reaches the port in)".into());
                }
                (false, true) => return Err("either --token-file or --no-auth, not both".into()),
                _ => {}
            }
            // A port alone binds loopback.
            let addr = if addr.parse::<u16>().is_ok() {
                format!("127.0.0.1:{addr}")
            } else {
                addr
            };
            Host::Listen {
                addr,
                opts,
                no_auth,
            }
        }
    };
    let downstream = match (to, command) {
        (Some(_), Some(_)) => return Err("either --to URL or -- /ABS/SERVER, not both".into()),
        (None, None) => return Err("the server side is needed: --to URL or -- /ABS/SERVER".into()),
        (Some(_), None) if !pass_env.is_empty() => {
            return Err("--pass-env goes with -- /ABS/SERVER".into());
        }
        (Some(url), None) => Downstream::Address(url),
        (None, Some(command)) => {
            match command.first() {
                None => return Err("-- needs /ABS/SERVER [ARGS...]".into()),
                Some(p) if !std::path::Path::new(p).is_absolute() => {
                    return Err(format!(
                        "the server's executable must be an absolute path, not {p}"
                    ));
                }
                Some(_) => {}
            }
            Downstream::Child { command, pass_env }
        }
    };
    if matches!(downstream, Downstream::Address(_))
        && (restart.max.is_some() || restart.backoff.is_some())
    {
        return Err("--restart-max and --restart-backoff-ms go with -- /ABS/SERVER".into());
    }
    Ok(Args {
        host,
        downstream,
        timeout,
        restart,
    })
}

/// Runs the subcommand with the arguments after `bridge`.
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mcpwire bridge: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args))
}

async fn connect(
    downstream: &Downstream,
    restart: &Restart,
) -> Result<(Client, String), CallError> {
    let token = std::env::var("MCPWIRE_TOKEN").ok();
    match downstream {
        Downstream::Address(url) if url.starts_with("http://") || url.starts_with("https://") => {
            let mut config = HttpChannelConfig::new(url.clone());
            config.bearer = token;
            let client = Client::http(config, EraChoice::Probe).await?;
            Ok((client, redact(url)))
        }
        Downstream::Address(addr) => {
            let client = match (addr.strip_prefix("grpc://"), token) {
                (Some(authority), Some(token)) => {
                    let mut config =
                        mcpwire_tokio::ChannelConfig::new(authority.trim_end_matches('/'));
                    config
                        .extra_metadata
                        .push(("authorization".into(), format!("Bearer {token}")));
                    Client::grpc(mcpwire_tokio::Channel::with_config(config))
                }
                _ => Client::connect(addr).await?,
            };
            Ok((client, redact(addr)))
        }
        Downstream::Child { command, pass_env } => {
            let mut words = command.iter();
            let program = words.next().cloned().unwrap_or_default();
            let mut server = ServerCommand::new(program.clone()).args(words.cloned());
            for name in pass_env {
                server = server.pass_env(name.clone());
            }
            let mut config = StdioChannelConfig::new(server);
            if let Some(max) = restart.max {
                config.max_restarts = max;
            }
            if let Some(backoff) = restart.backoff {
                config.restart_backoff = backoff;
            }
            let client = Client::stdio(config).await?;
            Ok((client, program))
        }
    }
}

/// The address without any user information, for the startup line.
fn redact(address: &str) -> String {
    let Some((scheme, rest)) = address.split_once("://") else {
        return address.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest.get(..end).and_then(|authority| authority.rfind('@')) {
        Some(at) => format!("{scheme}://{}", rest.get(at + 1..).unwrap_or_default()),
        None => address.to_owned(),
    }
}

/// A call in flight: its task, and whether it is a listen stream (which
/// has no end of its own).
struct Forward {
    task: JoinHandle<()>,
    listen: bool,
}

/// The calls in flight, by the host's id (its JSON text).
type InFlight = Arc<Mutex<HashMap<String, Forward>>>;

async fn run(args: Args) -> ExitCode {
    let (client, target) = match connect(&args.downstream, &args.restart).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot reach the server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server_side = match client.era() {
        Some(era) => format!("{} {target} ({era})", client.transport_name()),
        None => format!(
            "{} {target} (MCP {PROTOCOL_VERSION}, the binding's one era)",
            client.transport_name()
        ),
    };
    let older = client
        .era()
        .filter(|era| era.era != Era::Modern)
        .map(|era| format!("{} {}", era.era.describe(), era.version));
    match args.host {
        Host::Stdio => {
            eprintln!(
                "mcpwire bridge {}: host side stdio (MCP {PROTOCOL_VERSION}, JSON-RPC lines on stdin and stdout) -> server side {server_side}",
                env!("CARGO_PKG_VERSION")
            );
            if let Some(older) = older {
                eprintln!(
                    "mcpwire bridge: warning: the server is of an older era ({older}); requests are forwarded as the client sends them, the host's lifecycle is not translated"
                );
            }
            stdio_host(client, args.timeout).await
        }
        Host::Listen {
            addr,
            opts,
            no_auth,
        } => {
            listen_host(
                client,
                &addr,
                opts,
                no_auth,
                args.timeout,
                &server_side,
                older,
            )
            .await
        }
    }
}

/// Completes at SIGTERM or Ctrl-C (never, when neither can be watched).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                r = tokio::signal::ctrl_c() => if r.is_err() {
                    term.recv().await;
                },
            }
            return;
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The network host side: one forwarding app on the server of `opts`
/// (Streamable HTTP, the gRPC tunnel, the typed service), until SIGTERM.
async fn listen_host(
    client: Client,
    addr: &str,
    opts: super::ServeOptions,
    no_auth: bool,
    timeout: Option<Duration>,
    server_side: &str,
    older: Option<String>,
) -> ExitCode {
    let (server, sentence) = match super::bind(addr, opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot listen on {addr}: {e}");
            client.close().await;
            return ExitCode::FAILURE;
        }
    };
    if no_auth {
        eprintln!(
            "mcpwire bridge: warning: --no-auth: whoever reaches {addr} uses the server through the bridge, unauthenticated"
        );
    }
    let translation = match &older {
        Some(older) => format!(
            "; the server speaks {older}: the host side stays MCP {PROTOCOL_VERSION} and its server/discover is answered from what the server reported"
        ),
        None => String::new(),
    };
    eprintln!(
        "mcpwire bridge {}: host side {sentence}, MCP {PROTOCOL_VERSION} -> server side {server_side}{translation}",
        env!("CARGO_PKG_VERSION")
    );
    let discover = match older {
        Some(_) => Some(Arc::new(legacy_discover(&client).await)),
        None => None,
    };
    let downstream = client.clone();
    let app = App::new("mcpwire-bridge", env!("CARGO_PKG_VERSION")).forward(move |request| {
        let client = downstream.clone();
        let discover = discover.clone();
        async move {
            if let Some(discover) = discover
                && request.method() == "server/discover"
            {
                return Ok(Value::clone(&discover));
            }
            forward_request(client, request, timeout).await
        }
    });
    let served = server.serve_with_shutdown(app, shutdown_signal()).await;
    client.close().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire bridge: the host side failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `server/discover` result of an older-era server, from what it
/// reported: the lists it answers become its capabilities; the version is
/// the host side's.
async fn legacy_discover(client: &Client) -> Value {
    let mut capabilities = serde_json::Map::new();
    for (method, capability) in [
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("prompts/list", "prompts"),
    ] {
        let params = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }});
        if let Ok(answer) = client.request(method, params).await
            && answer.get("result").is_some()
        {
            capabilities.insert(capability.into(), json!({}));
        }
    }
    json!({
        "resultType": "complete",
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": capabilities,
        "_meta": {"io.modelcontextprotocol/serverInfo": {
            "name": "mcpwire-bridge",
            "version": env!("CARGO_PKG_VERSION"),
        }},
    })
}

/// One request of the network host, forwarded: its notifications, then
/// its result or error, under the host's id and progress token (the
/// engine puts the id on the answer).
async fn forward_request(
    client: Client,
    request: ForwardRequest,
    timeout: Option<Duration>,
) -> Result<Value, ToolError> {
    let transport = client.transport_name();
    let id = request.id().clone();
    let token = request.progress_token().cloned();
    let mut call = client
        .call_with_timeout(request.message(), timeout)
        .await
        .map_err(|e| downstream_tool_error(transport, &e))?;
    loop {
        match call.next().await {
            Ok(Some(StreamMessage::Notification(mut n))) => {
                let Some(method) = n.get("method").and_then(Value::as_str).map(str::to_owned)
                else {
                    continue;
                };
                if method == "notifications/progress" {
                    let Some(token) = &token else { continue };
                    if let Some(params) = n.get_mut("params").and_then(Value::as_object_mut) {
                        params.insert("progressToken".into(), token.clone());
                    }
                }
                restore_id(&mut n, "params", &id);
                let params = n.get("params").cloned().unwrap_or_else(|| json!({}));
                request.notify(&method, &params).await;
            }
            Ok(Some(StreamMessage::Response(mut r))) => {
                restore_id(&mut r, "result", &id);
                if let Some(result) = r.get_mut("result") {
                    return Ok(result.take());
                }
                let error = r.get("error");
                let code = error
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_i64)
                    .and_then(|c| i32::try_from(c).ok())
                    .unwrap_or(INTERNAL_ERROR);
                let message = error
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the server's error has no message");
                let mut e = ToolError::new(code, message);
                e.data = error.and_then(|e| e.get("data")).cloned();
                return Err(e);
            }
            Ok(None) => {
                return Err(ToolError::internal(format!(
                    "the bridge's call to the server ({transport}) ended without a response"
                )));
            }
            Err(e) => return Err(downstream_tool_error(transport, &e)),
        }
    }
}

/// [`downstream_error`] as the error a forwarding handler returns.
fn downstream_tool_error(transport: &str, e: &CallError) -> ToolError {
    let response = downstream_error(Value::Null, transport, e);
    let error = &response["error"];
    let mut out = ToolError::new(
        error["code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(INTERNAL_ERROR),
        error["message"].as_str().unwrap_or_default(),
    );
    out.data = error.get("data").cloned();
    out
}

/// The stdio host side: JSON-RPC lines on stdin and stdout, until the end
/// of stdin or SIGTERM.
async fn stdio_host(client: Client, timeout: Option<Duration>) -> ExitCode {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.to_string();
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });

    let in_flight: InFlight = Arc::default();
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    let mut stop = std::pin::pin!(shutdown_signal());
    loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut stdin, &mut line) => read,
            () = &mut stop => {
                // The calls in flight are dropped (each cancelled downstream).
                let calls: Vec<_> = match in_flight.lock() {
                    Ok(mut map) => map.drain().map(|(_, f)| f).collect(),
                    Err(_) => Vec::new(),
                };
                for f in calls {
                    f.task.abort();
                }
                break;
            }
        };
        match read {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong) => {
                let _ = out_tx.send(error_response(
                    Value::Null,
                    INVALID_REQUEST,
                    &format!("the line is longer than {MAX_LINE_BYTES} bytes"),
                ));
            }
            Ok(Line::Read) => handle_line(&line, &client, timeout, &out_tx, &in_flight),
            Err(e) => {
                eprintln!("mcpwire bridge: reading stdin: {e}");
                break;
            }
        }
    }
    // The end of stdin: the calls in flight finish (listen streams, which
    // never do, are dropped), then the bridge ends.
    let calls: Vec<_> = match in_flight.lock() {
        Ok(mut map) => map.drain().map(|(_, f)| f).collect(),
        Err(_) => Vec::new(),
    };
    for f in calls {
        if f.listen {
            f.task.abort();
        }
        let _ = f.task.await;
    }
    drop(out_tx);
    let _ = writer.await;
    client.close().await;
    ExitCode::SUCCESS
}

enum Line {
    Read,
    TooLong,
    Eof,
}

/// Reads one line (without its end) into `buf`, at most
/// [`MAX_LINE_BYTES`]; the rest of a longer line is skipped.
async fn read_line(
    reader: &mut BufReader<tokio::io::Stdin>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Read
            });
        }
        let (chunk, used, end) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !too_long && buf.len() + chunk.len() <= MAX_LINE_BYTES {
            buf.extend_from_slice(chunk);
        } else {
            too_long = true;
            buf.clear();
        }
        reader.consume(used);
        if end {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

fn error_response(id: Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A failure of the downstream call, as the host sees it.
fn downstream_error(id: Value, transport: &str, e: &CallError) -> Value {
    let code = match (e.diagnostics.rpc_code, e.status) {
        (Some(code), _) => i64::from(code),
        // The code SDKs give a request that timed out.
        (None, Code::DeadlineExceeded) => -32001,
        (None, _) => i64::from(INTERNAL_ERROR),
    };
    let mut data = json!({"grpcStatus": format!("{:?}", e.status)});
    if let Some(status) = e.diagnostics.http_status {
        data["httpStatus"] = json!(status);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": code,
        "message": format!("the bridge's call to the server ({transport}) failed: {}", e.message),
        "data": data,
    }})
}

fn handle_line(
    line: &[u8],
    client: &Client,
    timeout: Option<Duration>,
    out: &mpsc::UnboundedSender<Value>,
    in_flight: &InFlight,
) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let mut msg: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            let _ = out.send(error_response(
                Value::Null,
                PARSE_ERROR,
                &format!("not JSON: {e}"),
            ));
            return;
        }
    };
    let Some(obj) = msg.as_object_mut() else {
        let _ = out.send(error_response(
            Value::Null,
            INVALID_REQUEST,
            "a message is a JSON object",
        ));
        return;
    };
    let id = obj.remove("id");
    let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) else {
        if obj.contains_key("result") || obj.contains_key("error") {
            eprintln!(
                "mcpwire bridge: a response from the host, to no request of the bridge: dropped"
            );
        } else {
            let _ = out.send(error_response(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "a request needs a method",
            ));
        }
        return;
    };
    let Some(id) = id else {
        notification(&method, msg, client, in_flight);
        return;
    };
    if !(id.is_string() || id.is_number()) {
        let _ = out.send(error_response(
            Value::Null,
            INVALID_REQUEST,
            "an id is a string or a number",
        ));
        return;
    }
    let key = id.to_string();
    let Ok(mut map) = in_flight.lock() else {
        return;
    };
    map.retain(|_, f| !f.task.is_finished());
    if map.contains_key(&key) {
        let _ = out.send(error_response(
            id,
            INVALID_REQUEST,
            "a request with this id is in flight",
        ));
        return;
    }
    let token = msg
        .pointer("/params/_meta/progressToken")
        .filter(|t| !t.is_null())
        .cloned();
    let listen = method == "subscriptions/listen";
    let task = tokio::spawn(forward(
        client.clone(),
        msg,
        id,
        token,
        timeout,
        out.clone(),
    ));
    map.insert(key, Forward { task, listen });
}

/// A notification of the host: `notifications/cancelled` drops the call
/// it names; the others go to the server.
fn notification(method: &str, msg: Value, client: &Client, in_flight: &InFlight) {
    if method == "notifications/cancelled" {
        let Some(key) = msg.pointer("/params/requestId").map(Value::to_string) else {
            return;
        };
        if let Some(f) = in_flight.lock().ok().and_then(|mut m| m.remove(&key)) {
            // Dropping the call cancels it downstream.
            f.task.abort();
        }
        return;
    }
    if client.transport_name() == "stdio" {
        // The stdio client sends requests only; a notification would go
        // out with an id.
        eprintln!("mcpwire bridge: the host's {method} is not forwarded to a stdio server");
        return;
    }
    let client = client.clone();
    let method = method.to_owned();
    tokio::spawn(async move {
        let sent = match client.call(msg).await {
            Ok(mut call) => loop {
                match call.next().await {
                    Ok(Some(_)) => {}
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                }
            },
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            eprintln!("mcpwire bridge: the host's {method} did not reach the server: {e}");
        }
    });
}

/// The places where a message of a call names the call's id (a listen's
/// subscription id, the `requestId` of a server's `notifications/cancelled`
/// that ends a listen) get the host's id back.
fn restore_id(msg: &mut Value, part: &str, id: &Value) {
    let cancelled = msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled");
    let Some(body) = msg.get_mut(part).and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(meta) = body.get_mut("_meta").and_then(Value::as_object_mut)
        && let Some(sub) = meta.get_mut(KEY_SUBSCRIPTION_ID)
    {
        *sub = id.clone();
    }
    if cancelled && let Some(request_id) = body.get_mut("requestId") {
        *request_id = id.clone();
    }
}

/// One request of the host, forwarded: its notifications, then its
/// response, each under the host's id and progress token.
async fn forward(
    client: Client,
    request: Value,
    id: Value,
    token: Option<Value>,
    timeout: Option<Duration>,
    out: mpsc::UnboundedSender<Value>,
) {
    let transport = client.transport_name();
    let mut call = match client.call_with_timeout(request, timeout).await {
        Ok(c) => c,
        Err(e) => {
            let _ = out.send(downstream_error(id, transport, &e));
            return;
        }
    };
    loop {
        match call.next().await {
            Ok(Some(StreamMessage::Notification(mut n))) => {
                if n.get("method").and_then(Value::as_str) == Some("notifications/progress") {
                    // The host asked for no progress: none is sent to it.
                    let Some(token) = &token else { continue };
                    if let Some(params) = n.get_mut("params").and_then(Value::as_object_mut) {
                        params.insert("progressToken".into(), token.clone());
                    }
                }
                restore_id(&mut n, "params", &id);
                let _ = out.send(n);
            }
            Ok(Some(StreamMessage::Response(mut r))) => {
                restore_id(&mut r, "result", &id);
                if let Some(obj) = r.as_object_mut() {
                    obj.insert("id".into(), id);
                    let _ = out.send(r);
                } else {
                    let _ = out.send(error_response(
                        id,
                        INTERNAL_ERROR,
                        "the server's response is not a JSON object",
                    ));
                }
                return;
            }
            Ok(None) => {
                let _ = out.send(error_response(
                    id,
                    INTERNAL_ERROR,
                    &format!(
                        "the bridge's call to the server ({transport}) ended without a response"
                    ),
                ));
                return;
            }
            Err(e) => {
                let _ = out.send(downstream_error(id, transport, &e));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> impl Iterator<Item = String> {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_command_line_names_one_host_side_and_one_server_side() {
        let to = parse(words("--stdio-host --to grpc://127.0.0.1:1")).unwrap();
        assert!(matches!(to.downstream, Downstream::Address(a) if a == "grpc://127.0.0.1:1"));
        let child = parse(words("--stdio-host --pass-env HOME -- /bin/server --flag")).unwrap();
        assert!(matches!(child.downstream,
            Downstream::Child { command, pass_env }
                if command == ["/bin/server", "--flag"] && pass_env == ["HOME"]));
        for (line, why) in [
            ("--to http://h/mcp", "--stdio-host"),
            ("--stdio-host", "the server side"),
            ("--stdio-host --to http://h/mcp -- /bin/s", "not both"),
            ("--stdio-host -- server", "absolute path"),
            ("--stdio-host --pass-env X --to http://h/mcp", "--pass-env"),
            (
                "--stdio-host --timeout-ms soon --to http://h/mcp",
                "--timeout-ms",
            ),
        ] {
            let err = parse(words(line)).err().unwrap_or_default();
            assert!(err.contains(why), "{line}: {err}");
        }
    }

    #[test]
    fn the_startup_line_shows_no_user_information() {
        assert_eq!(
            redact("https://user:secret@example.test:8443/mcp"),
            "https://example.test:8443/mcp"
        );
        assert_eq!(redact("grpc://127.0.0.1:50051"), "grpc://127.0.0.1:50051");
        assert_eq!(redact("http://h/mcp?a=b@c"), "http://h/mcp?a=b@c");
    }

    #[test]
    fn a_listens_id_is_the_hosts_again() {
        let mut event = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {KEY_SUBSCRIPTION_ID: 17}}});
        restore_id(&mut event, "params", &json!("L1"));
        assert_eq!(event["params"]["_meta"][KEY_SUBSCRIPTION_ID], "L1");
        let mut end = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 17}});
        restore_id(&mut end, "params", &json!("L1"));
        assert_eq!(end["params"]["requestId"], "L1");
        // Only a cancel's requestId is a call id.
        let mut other = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"requestId": 17}});
        restore_id(&mut other, "params", &json!("L1"));
        assert_eq!(other["params"]["requestId"], 17);
    }
}
