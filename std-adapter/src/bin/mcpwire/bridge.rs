//! `mcpwire bridge (--stdio-host | --listen ADDR ...) (--to URL | -- /ABS/SERVER [ARGS...])`:
//! a host reaches a server over any transport of [`Client`]: Streamable
//! HTTP (`http://`, `https://`), the gRPC tunnel (`grpc://HOST:PORT`) or a
//! stdio child.
//!
//! Both host sides are one [`App::forward`] on the server engine: stdio
//! (`--stdio-host`, the stdio binding on stdin and stdout) or the network
//! (`--listen`: Streamable HTTP, the gRPC tunnel and the typed service on
//! one port, a bearer token required unless `--no-auth`, Origin checked).
//! The engine judges each host message as the binding says (envelope,
//! `_meta`, version, mirrored headers, ids in use, cancellation; a
//! `tools/call`'s `Mcp-Param-*` headers against the server's schemas,
//! which [`LearntTools`] reads from its `tools/list` and keeps); every
//! request it admits is forwarded as one downstream call, unchanged but
//! for its id: the client picks the downstream id, the engine puts the
//! host's back on the response, and the bridge puts it on a listen's
//! events and the host's progress token on every
//! `notifications/progress` (downstream each call carries a progress token
//! of the bridge's: hosts pick theirs independently, and a child or a
//! session routes progress by token). A gRPC host's deadline goes
//! downstream (what is left of it, bounded by `--timeout-ms`). The
//! host's cancel (`notifications/cancelled`,
//! its HTTP stream closed, RST_STREAM) drops the downstream call (the HTTP
//! stream closed, the gRPC stream reset, or `notifications/cancelled` to a
//! child). A call that breaks downstream is a JSON-RPC error to the host
//! that says so; the server's own errors (version errors among them) go
//! back as they came. The host's credential stays here: downstream the
//! bridge sends `MCPWIRE_TOKEN`, if set. A server that refuses the bridge
//! (401 or 403 to that token, or -32022 naming only versions the bridge
//! does not speak) does not end it ([`Reconnect`]): each host request is
//! answered with a JSON-RPC error that names the refusal, and the server
//! is tried again at the next; a token that expires later is refused per
//! call, in the same words. A stdio child that crashes fails
//! its calls in flight and is started again (`--restart-max` times within
//! `--restart-window-ms`, after `--restart-backoff-ms`); until the new
//! child is ready the bridge takes
//! no new work: a call is refused at once, -32603 "the server is
//! restarting (attempt N of M)" with `data.grpcStatus` `Unavailable` (over
//! Streamable HTTP a JSON-RPC error like any other, as the transports
//! document names no HTTP status for it; over the typed service INTERNAL
//! with `mcp-error-code`), and the host chooses when to try again. A
//! crash past the budget pauses the restarts until it refills: every call
//! fails at once meanwhile, saying so and for how long, and then a child
//! is started again, so one host that crashes the child again and again
//! locks the others out for a window, not for good. A gRPC server
//! that goes silent without closing (no FIN from a board switched off) is
//! found by keepalive PINGs (`--keepalive-ms`, 5 s by default): the calls
//! in flight fail UNAVAILABLE instead of waiting for their deadlines.
//!
//! Only JSON-RPC goes to stdout; diagnostics go to stderr, the first a
//! sentence naming the host side, the server side, the versions and the
//! eras. An older-era server (2025-11-25, 2024-11-05) is served to the
//! host as 2026-07-28: its `server/discover` is answered by the bridge from
//! what the server's lists answer. At the end of stdin (stdio host) the
//! calls in flight get the stdio server's grace to finish; SIGTERM ends
//! either host side, and the child is shut down.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::stdio::Era;
use mcpwire_core::mcp::error::{INTERNAL_ERROR, UNSUPPORTED_PROTOCOL_VERSION};
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::meta::{KEY_SUBSCRIPTION_ID, PROTOCOL_VERSION};
use mcpwire_core::mcp::server::Failure;
use mcpwire_tokio::client::{MAX_LIST_PAGES, stdio};
use mcpwire_tokio::{
    App, CallError, Client, ForwardRequest, ForwardResult, LearntTools, RawMessage, RawResponse,
    Reconnect, SerialDevice, ServerCommand, ToolError, grpc_authority, redact_url,
    refused_discover, server_refusal,
};
use memchr::memmem;
use serde_json::{Value, json};

pub const USAGE: &str = "usage: mcpwire bridge HOST-SIDE [--timeout-ms N] [RESTART] --to http[s]://HOST:PORT/PATH | grpc://HOST:PORT
       mcpwire bridge HOST-SIDE [--timeout-ms N] [RESTART] [--pass-env NAME]... -- /ABS/SERVER [ARGS...]
       mcpwire bridge HOST-SIDE [--timeout-ms N] [RESTART] --serial DEVICE [--baud N]
  HOST-SIDE is one of
         --stdio-host   the host speaks MCP over stdin/stdout
         --listen [ADDR:]PORT (--token-file FILE | --no-auth) [--tls-cert PEM --tls-key PEM]
              [--allow-host NAME]... [--http-path PATH]
           the host reaches Streamable HTTP (at /mcp), the gRPC tunnel and the typed gRPC service
           (whose lists have no cursor: the server's pages are merged, up to 1024)
           on that port (127.0.0.1 unless ADDR says otherwise); a bearer token of FILE is required
           unless --no-auth; a Host (:authority) or Origin that is not allowed is refused (403),
           over HTTP/1.1 and HTTP/2 alike
  --keepalive-ms N (a gRPC server): a PING after N ms without a frame during a call, the calls
         failed if N ms more pass without an answer (default 5000; 0: no pings; a server built on
         grpc-core refuses pings more often than every 5 minutes during a silent call by default)
  --serial DEVICE: a serial device (a board's UART, /dev/ttyACM0, a pseudo-terminal) that speaks
         the stdio binding, opened raw (8N1, no flow control) at --baud N (default 115200), and
         opened again as RESTART says when it goes away
  RESTART (a stdio server or device): [--restart-max N] restarts within [--restart-window-ms N]
         (default 5 within 30000), [--restart-backoff-ms N] the first wait before a restart
         (default 100, doubling up to 5 s); the calls in flight at a crash fail, and until the new
         child is ready every new call is refused at once (-32603 \"the server is restarting
         (attempt N of M)\"); a crash past the budget pauses the restarts until its oldest leaves
         the window, every call refused meanwhile, saying how long; a child that stays up 10 s
         makes the budget whole
  --timeout-ms N: a forwarded call's longest wait; a gRPC host's deadline goes downstream as
         what is left of it (the shorter of the two; without --timeout-ms the host's alone, and
         without either the client's 60 s); listen streams have none but the host's
  each request is forwarded to the server, with a progress token of the bridge's (the host's
  goes back on its progress); the host's token is never sent on
  (MCPWIRE_TOKEN, if set, is the bearer token sent downstream over HTTP and gRPC; a server
  that refuses it, or speaks none of the bridge's versions, is answered to each request as a
  JSON-RPC error naming the refusal, and tried again at the next)";

/// The host side's own request timeout: none to speak of (a year).
const NO_HOST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The server side.
enum Downstream {
    Address(String),
    Child {
        command: Vec<String>,
        pass_env: Vec<String>,
    },
    Serial(SerialDevice),
}

impl Downstream {
    /// The server side in words, before it is reached.
    fn describe(&self) -> String {
        match self {
            Self::Address(a) => redact_url(a),
            Self::Child { command, .. } => {
                format!("stdio {}", command.first().map_or("", String::as_str))
            }
            Self::Serial(device) => {
                format!("serial {} at {} baud", device.path.display(), device.baud)
            }
        }
    }
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
    window: Option<Duration>,
}

impl Restart {
    /// A stdio server's (or device's) restart settings: the flags given,
    /// and, as the bridge recipe asks, no new work while it restarts.
    fn apply(&self, mut config: stdio::Config) -> stdio::Config {
        if let Some(max) = self.max {
            config.restart.max_restarts = max;
        }
        if let Some(backoff) = self.backoff {
            config.restart.backoff = backoff;
        }
        if let Some(window) = self.window {
            config.restart.window = window;
        }
        config.refuse_while_restarting = true;
        config
    }
}

struct Args {
    host: Host,
    downstream: Downstream,
    timeout: Option<Duration>,
    restart: Restart,
    /// The gRPC server side's keepalive PING interval (and its wait for
    /// the answer); `None` with `--keepalive-ms 0`.
    keepalive: Option<Duration>,
}

/// A gRPC server that stops answering (a board switched off, a host gone
/// behind a NAT) sends no FIN: without pings the calls in flight would
/// wait for their deadlines. Every 5 s of silence during a call a PING
/// goes out, and 5 s without an answer fail the calls (UNAVAILABLE).
const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(5);

/// The longest wait for the server's tool list before the host side
/// starts: a slower list is learnt in the background, and until then a
/// call with an `Mcp-Param-*` header is refused (-32020), as it cannot be
/// checked.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// A stdio child's shutdown: its stdin closed, then SIGTERM after this
/// long, then SIGKILL after as long again, so the bridge itself ends well
/// within the second that hosts grant a server they stop (the TypeScript
/// SDK's SIGTERM, then SIGKILL after 1 s).
const CHILD_STOP_WAIT: Duration = Duration::from_millis(400);

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut stdio_host = false;
    let mut listen = None;
    let mut no_auth = false;
    let mut opts = super::ServeOptions::default();
    let mut restart = Restart::default();
    let mut to = None;
    let mut command = None;
    let mut serial = None;
    let mut baud = None;
    let mut pass_env = Vec::new();
    let mut timeout = None;
    let mut keepalive = Some(DEFAULT_KEEPALIVE);
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
            "--restart-window-ms" => {
                let v = value("--restart-window-ms")?;
                let ms: u64 = v
                    .parse()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .ok_or_else(|| format!("bad --restart-window-ms {v}"))?;
                restart.window = Some(Duration::from_millis(ms));
            }
            "--to" => to = Some(value("--to")?),
            "--serial" => serial = Some(value("--serial")?),
            "--baud" => baud = Some(super::parse_baud(&value("--baud")?)?),
            "--pass-env" => pass_env.push(value("--pass-env")?),
            "--timeout-ms" => {
                let v = value("--timeout-ms")?;
                let ms: u64 = v.parse().map_err(|_| format!("bad --timeout-ms {v}"))?;
                timeout = Some(Duration::from_millis(ms));
            }
            "--keepalive-ms" => {
                let v = value("--keepalive-ms")?;
                let ms: u64 = v.parse().map_err(|_| format!("bad --keepalive-ms {v}"))?;
                keepalive = (ms > 0).then(|| Duration::from_millis(ms));
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
    if !pass_env.is_empty() && command.is_none() {
        return Err("--pass-env goes with -- /ABS/SERVER".into());
    }
    if baud.is_some() && serial.is_none() {
        return Err("--baud goes with --serial DEVICE".into());
    }
    let downstream = match (to, command, serial) {
        (None, None, Some(path)) => {
            let device = SerialDevice::new(path);
            Downstream::Serial(match baud {
                Some(b) => device.baud(b),
                None => device,
            })
        }
        (_, _, Some(_)) => {
            return Err("one server side: --to URL, -- /ABS/SERVER or --serial DEVICE".into());
        }
        (Some(_), Some(_), None) => {
            return Err("either --to URL or -- /ABS/SERVER, not both".into());
        }
        (None, None, None) => {
            return Err(
                "the server side is needed: --to URL, -- /ABS/SERVER or --serial DEVICE".into(),
            );
        }
        (Some(url), None, None) => Downstream::Address(url),
        (None, Some(command), None) => {
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
        && (restart.max.is_some() || restart.backoff.is_some() || restart.window.is_some())
    {
        return Err(
            "--restart-max, --restart-backoff-ms and --restart-window-ms go with -- /ABS/SERVER or --serial"
                .into(),
        );
    }
    Ok(Args {
        host,
        downstream,
        timeout,
        restart,
        keepalive,
    })
}

/// Runs the subcommand with the arguments after `bridge`.
pub fn main(args: impl Iterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.collect();
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(args.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mcpwire bridge: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // One thread runs the host side, the client and the forwarding
    // handlers: every call crosses from one to the other, and on one
    // thread that is a poll, not a wake-up across threads (the downstream
    // is one connection in any case).
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let runtime = match builder.enable_all().build() {
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
    keepalive: Option<Duration>,
) -> Result<(Client, String), CallError> {
    let token = std::env::var("MCPWIRE_TOKEN").ok();
    match downstream {
        Downstream::Address(url) if url.starts_with("http://") || url.starts_with("https://") => {
            let mut config = mcpwire_tokio::client::http::Config::new(url)?;
            config.bearer = token;
            let client = Client::http(config).await?;
            Ok((client, redact_url(url)))
        }
        Downstream::Address(addr) => {
            let client = match grpc_authority(addr)? {
                Some(authority) => {
                    let mut config = mcpwire_tokio::client::grpc::Config::new(authority);
                    config.bearer = token;
                    config.keepalive =
                        keepalive.map(|every| mcpwire_tokio::Keepalive::new(every, every));
                    Client::grpc(config).await?
                }
                None => Client::connect(addr).await?,
            };
            Ok((client, redact_url(addr)))
        }
        Downstream::Child { command, pass_env } => {
            let mut words = command.iter();
            let program = words.next().cloned().unwrap_or_default();
            let mut server = ServerCommand::new(program.clone()).args(words.cloned());
            for name in pass_env {
                server = server.pass_env(name.clone());
            }
            let mut config = stdio::Config::new(server);
            config.close_wait = CHILD_STOP_WAIT;
            config.term_wait = CHILD_STOP_WAIT;
            let client = Client::stdio(restart.apply(config)).await?;
            Ok((client, program))
        }
        Downstream::Serial(device) => {
            let config = stdio::Config::serial(device.clone());
            let client = Client::stdio(restart.apply(config)).await?;
            Ok((
                client,
                format!("{} at {} baud", device.path.display(), device.baud),
            ))
        }
    }
}

/// The server side, as the bridge reaches it: how to connect, and the
/// learner of its tool schemas, started with the connection.
struct ServerSide {
    downstream: Downstream,
    restart: Restart,
    keepalive: Option<Duration>,
    tools: Arc<LearntTools>,
    learner: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// An attempt was refused: the next one that succeeds says so.
    refused: std::sync::atomic::AtomicBool,
}

/// The server side, connected.
struct Connected {
    client: Client,
    /// The answer to `server/discover` of an older-era server.
    discover: Option<Arc<Value>>,
    /// The server side in words, for the startup sentence.
    description: String,
}

impl ServerSide {
    /// Connects; an older-era server's discovery is made from what it
    /// answers, and its tool schemas are read (up to FIRST_LIST_WAIT) and
    /// then kept in the background.
    async fn connect(&self) -> Result<Connected, CallError> {
        let (client, target) = connect(&self.downstream, &self.restart, self.keepalive).await?;
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
        // Era translation: the host side stays the current era; an older
        // server's discovery is the bridge's, from what the server answers.
        let (translation, discover) = match &older {
            Some(older) => (
                format!(
                    "; the server speaks {older}: the host side stays MCP {PROTOCOL_VERSION} and its server/discover is answered from what the server reported"
                ),
                Some(Arc::new(legacy_discover(&client).await)),
            ),
            None => (String::new(), None),
        };
        let learner = {
            let (tools, client) = (Arc::clone(&self.tools), client.clone());
            tokio::spawn(async move { tools.follow(&client).await })
        };
        if let Ok(mut slot) = self.learner.lock()
            && let Some(old) = slot.replace(learner)
        {
            old.abort();
        }
        let _ = tokio::time::timeout(FIRST_LIST_WAIT, self.tools.first_read()).await;
        let description = format!("{server_side}{translation}");
        if self.refused.swap(false, Ordering::Relaxed) {
            eprintln!("mcpwire bridge: the server let the bridge in: server side {description}");
        }
        Ok(Connected {
            client,
            discover,
            description,
        })
    }

    fn stop_learning(&self) {
        if let Ok(mut slot) = self.learner.lock()
            && let Some(learner) = slot.take()
        {
            learner.abort();
        }
    }
}

async fn run(args: Args) -> ExitCode {
    let side = Arc::new(ServerSide {
        downstream: args.downstream,
        restart: args.restart,
        keepalive: args.keepalive,
        tools: Arc::new(LearntTools::new()),
        learner: std::sync::Mutex::new(None),
        refused: std::sync::atomic::AtomicBool::new(false),
    });
    let again = {
        let side = Arc::clone(&side);
        move || {
            let side = Arc::clone(&side);
            async move { side.connect().await }
        }
    };
    // A server that refuses the bridge (its credentials, its versions)
    // does not end it: each request is answered with the refusal, and the
    // server is tried again at the next (the host shows its user why).
    // Any other failure to reach it at the start does.
    let (downstream, server_side, refused) = match side.connect().await {
        Ok(connected) => {
            let description = connected.description.clone();
            (Reconnect::connected(connected), description, None)
        }
        Err(e) => match server_refusal(&e) {
            Some(refusal) => {
                side.refused.store(true, Ordering::Relaxed);
                let why = match refusal.data.as_ref().and_then(|d| d.get("supported")) {
                    Some(versions) if refusal.code == UNSUPPORTED_PROTOCOL_VERSION => format!(
                        "the server refused the bridge's protocol version {PROTOCOL_VERSION} ({}): it speaks {versions}",
                        refusal.message
                    ),
                    _ => refusal.message.clone(),
                };
                let note = format!(
                    "mcpwire bridge: {why}; each request is answered with this refusal (JSON-RPC {}) and the server is tried again at the next",
                    refusal.code
                );
                let description = format!(
                    "{} (not connected: it refused the bridge)",
                    side.downstream.describe()
                );
                (Reconnect::new(again), description, Some(note))
            }
            None => {
                eprintln!("mcpwire bridge: cannot reach the server: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let downstream = Arc::new(downstream);
    let app = forwarding_app(
        Arc::clone(&downstream),
        args.timeout,
        Arc::clone(&side.tools),
    );
    let exit = match args.host {
        Host::Stdio => {
            eprintln!(
                "mcpwire bridge {}: host side stdio (MCP {PROTOCOL_VERSION}, JSON-RPC lines on stdin and stdout) -> server side {server_side}",
                env!("CARGO_PKG_VERSION")
            );
            if let Some(note) = &refused {
                eprintln!("{note}");
            }
            let config = mcpwire_tokio::StdioConfig {
                // The downstream call has its own timeout (--timeout-ms,
                // or the client's); the host side adds none.
                request_timeout: NO_HOST_TIMEOUT,
                ..mcpwire_tokio::StdioConfig::default()
            };
            let served = tokio::select! {
                served = app.serve_stdio_with(config) => served,
                () = shutdown_signal() => Ok(()),
            };
            finish(&downstream, served).await
        }
        Host::Listen {
            addr,
            opts,
            no_auth,
        } => {
            let sides = format!("MCP {PROTOCOL_VERSION} -> server side {server_side}");
            let listen = Listen {
                addr: &addr,
                no_auth,
                sides: &sides,
                note: refused.as_deref(),
            };
            listen_host(&downstream, app, opts, listen).await
        }
    };
    side.stop_learning();
    exit
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
/// What the network host side says of itself: its address, whether
/// anyone may call, the sides in words, and a note after its startup
/// sentence (a server that refused the bridge).
struct Listen<'a> {
    addr: &'a str,
    no_auth: bool,
    sides: &'a str,
    note: Option<&'a str>,
}

async fn listen_host(
    downstream: &Reconnect<Connected>,
    app: App,
    opts: super::ServeOptions,
    listen: Listen<'_>,
) -> ExitCode {
    let Listen {
        addr,
        no_auth,
        sides,
        note,
    } = listen;
    let mut opts = opts;
    // The downstream call has its own timeout (--timeout-ms, or the
    // client's): its -32001 says which side gave up. The host side adds
    // none (a gRPC host's grpc-timeout still holds).
    opts.request_timeout = Some(NO_HOST_TIMEOUT);
    let (server, sentence) = match super::bind(addr, opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot listen on {addr}: {e}");
            if let Some(c) = downstream.current() {
                c.client.close().await;
            }
            return ExitCode::FAILURE;
        }
    };
    if no_auth {
        // The port bound, not the one asked for (0 asks for any).
        let bound = server
            .local_addr()
            .map_or_else(|_| addr.to_owned(), |a| a.to_string());
        eprintln!(
            "mcpwire bridge: warning: --no-auth: whoever reaches {bound} uses the server through the bridge, unauthenticated"
        );
    }
    // The line scripts wait for, as `mcpwire serve` prints it.
    eprintln!("listening on {sentence}");
    eprintln!(
        "mcpwire bridge {}: host side {sentence}, {sides}",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(note) = note {
        eprintln!("{note}");
    }
    let served = server.serve_with_shutdown(app, shutdown_signal()).await;
    finish(downstream, served).await
}

/// The end of either host side: the server side closed (a child stopped,
/// a session deleted), then the exit status of how the host side ended.
async fn finish(downstream: &Reconnect<Connected>, served: std::io::Result<()>) -> ExitCode {
    if let Some(c) = downstream.current() {
        c.client.close().await;
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire bridge: the host side failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The one forwarding path of both host sides: every request the engine
/// admits goes to the server `downstream` reaches (connected at the first
/// request, when the server refused the bridge at the start: until it lets
/// the bridge in, each request is answered with the refusal); an
/// older-era server's `server/discover` is the bridge's. The tool lists
/// hosts read teach `tools` too.
fn forwarding_app(
    downstream: Arc<Reconnect<Connected>>,
    timeout: Option<Duration>,
    tools: Arc<LearntTools>,
) -> App {
    let learnt = Arc::clone(&tools);
    App::new("mcpwire-bridge", env!("CARGO_PKG_VERSION"))
        .forward(move |request| {
            let downstream = Arc::clone(&downstream);
            let tools = Arc::clone(&learnt);
            async move {
                let method = request.method().to_owned();
                // Refused credentials: a host's discovery is the bridge's,
                // and the host learns of the refusal at its next request,
                // not from a legacy fallback that hides it.
                let refused = |e: ToolError| match method.as_str() {
                    "server/discover" => {
                        refused_discover(&e, "mcpwire-bridge", env!("CARGO_PKG_VERSION"))
                            .map(ForwardResult::Value)
                            .ok_or(e)
                    }
                    _ => Err(e),
                };
                let connected = match downstream.get().await {
                    Ok(c) => c,
                    Err(e) => return refused(e),
                };
                let client = &connected.client;
                let discover = connected.discover.as_deref();
                if discover.is_none() && method == "server/discover" {
                    return forward_request(client, request, timeout)
                        .await
                        .or_else(refused);
                }
                // A tools/list answered to a host teaches the schemas too.
                let learn = method == "tools/list";
                if discover.is_none() && !learn {
                    return forward_request(client, request, timeout).await;
                }
                // An older-era server: its discovery is the bridge's, and
                // its results get the fields the current era requires.
                if let Some(discover) = discover
                    && method == "server/discover"
                {
                    return Ok(ForwardResult::Value(discover.clone()));
                }
                let params = learn.then(|| request.params().clone());
                let mut result = into_value(forward_request(client, request, timeout).await?)?;
                if discover.is_some() {
                    current_era_result(&method, &mut result);
                }
                if let Some(params) = params {
                    tools.learn_answer(&params, &result);
                }
                Ok(result.into())
            }
        })
        .forward_tools(tools)
}

/// A result as a tree (its text parsed: the era's fields and the pages
/// of a whole list are added to it).
fn into_value(result: ForwardResult) -> Result<Value, ToolError> {
    match result {
        ForwardResult::Value(v) => Ok(v),
        ForwardResult::Raw(raw) => serde_json::from_slice(raw.as_bytes())
            .map_err(|_| ToolError::internal("the server's result is not JSON")),
    }
}

/// An older-era server's result of `method`, as MCP 2026-07-28 has it:
/// `resultType` (`complete`: older eras have no other), and on the
/// cacheable results the caching hints (stale at once, for this caller:
/// the older server promised nothing).
fn current_era_result(method: &str, result: &mut Value) {
    let Some(object) = result.as_object_mut() else {
        return;
    };
    object
        .entry("resultType")
        .or_insert_with(|| json!("complete"));
    if matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    ) {
        object.entry("ttlMs").or_insert_with(|| json!(0));
        object
            .entry("cacheScope")
            .or_insert_with(|| json!("private"));
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
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {
            "name": "mcpwire-bridge",
            "version": env!("CARGO_PKG_VERSION"),
        }},
    })
}

/// One request of the network host, forwarded: its notifications, then
/// its result or error, under the host's id and progress token (the
/// engine puts the id on the answer).
/// When the caller cannot page ([`ForwardRequest::whole_list`]), a list's
/// pages are followed and merged into one result.
async fn forward_request(
    client: &Client,
    request: ForwardRequest,
    timeout: Option<Duration>,
) -> Result<ForwardResult, ToolError> {
    let first = forward_call(client, &request, None, timeout).await?;
    let key = list_key(request.method());
    match key {
        Some(key) if request.whole_list() => {
            let first = sized(first)?;
            // Boxed: the usual call's future stays small.
            let merged = Box::pin(merge_pages(first, key, *HOST_MAX_MESSAGE, |cursor| {
                let mut message = request.message();
                if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
                    params.insert("cursor".into(), Value::String(cursor));
                }
                let page = forward_call(client, &request, Some(message), timeout);
                async move { sized(page.await?) }
            }))
            .await?;
            Ok(merged.into())
        }
        _ => Ok(first),
    }
}

/// The largest message of the host side (its server's default): what a
/// merged list gathers at most (the server's pages past it are not
/// read), and the most octets of a call's notifications the bridge holds
/// for a host that has not taken them (beyond the host side's own room).
static HOST_MAX_MESSAGE: LazyLock<usize> =
    LazyLock::new(|| mcpwire_tokio::ServerConfig::default().max_message_bytes);

/// A page as a tree, and its text's length.
fn sized(page: ForwardResult) -> Result<(Value, usize), ToolError> {
    let len = match &page {
        ForwardResult::Raw(raw) => raw.as_bytes().len(),
        ForwardResult::Value(v) => serde_json::to_vec(v).map_or(0, |t| t.len()),
    };
    Ok((into_value(page)?, len))
}

/// The array a list method's result carries.
fn list_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/list" => Some("tools"),
        "resources/list" => Some("resources"),
        "resources/templates/list" => Some("resourceTemplates"),
        "prompts/list" => Some("prompts"),
        _ => None,
    }
}

/// Follows the first page's `nextCursor` through `next` (the same request
/// with that cursor), appending each page's `key` array to `merged`'s (the
/// first page), up to [`MAX_LIST_PAGES`] pages in all (typed binding §7
/// step 7; the client's own list helpers read as many). The first page's
/// other members stay; `nextCursor` is the last page's (none at the end):
/// a cursor left after them stays, and the typed binding refuses it. The
/// pages (each with its text's length) may hold `max_bytes` in all; a
/// list larger than that fails.
async fn merge_pages<F, Fut>(
    (mut merged, mut bytes): (Value, usize),
    key: &str,
    max_bytes: usize,
    mut next: F,
) -> Result<Value, ToolError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Value, usize), ToolError>>,
{
    for pages in 1..MAX_LIST_PAGES {
        let Some(object) = merged.as_object_mut() else {
            break;
        };
        let cursor = match object.get("nextCursor") {
            Some(Value::String(c)) => c.clone(),
            Some(Value::Null) => {
                object.remove("nextCursor");
                break;
            }
            _ => break,
        };
        let (mut page, len) = next(cursor).await?;
        bytes = bytes.saturating_add(len);
        if bytes > max_bytes {
            return Err(ToolError::internal(format!(
                "the server's list is larger than the {max_bytes} octets the bridge gathers ({} pages read)",
                pages + 1
            )));
        }
        let items = match page.get_mut(key).map(Value::take) {
            Some(Value::Array(items)) => items,
            None => Vec::new(),
            Some(_) => {
                return Err(ToolError::internal(format!(
                    "a page of the server's list has no `{key}` array"
                )));
            }
        };
        match object.get_mut(key) {
            Some(Value::Array(list)) => list.extend(items),
            _ => {
                return Err(ToolError::internal(format!(
                    "the server's list has no `{key}` array"
                )));
            }
        }
        match page.get_mut("nextCursor").map(Value::take) {
            Some(cursor) => object.insert("nextCursor".into(), cursor),
            None => object.remove("nextCursor"),
        };
    }
    Ok(merged)
}

/// One downstream call: its notifications go to the host (under the host's
/// id and progress token); its result or error is the answer. The call is
/// the host's request as it came (its `params` text sent on as it is),
/// or `message` instead (a page of a whole list). A result is handed back
/// as the text the client engine validated, unless a subscription id in
/// it must become the host's.
async fn forward_call(
    client: &Client,
    request: &ForwardRequest,
    message: Option<Value>,
    timeout: Option<Duration>,
) -> Result<ForwardResult, ToolError> {
    let transport = client.transport_name();
    let listen = request.method() == "subscriptions/listen";
    // The host's deadline holds downstream too: the server is told what is
    // left of it (`--timeout-ms` bounds it further). A subscription lasts
    // as long as the host keeps it: `--timeout-ms` bounds calls, not
    // listens.
    let left = request
        .deadline()
        .map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
    let timeout = match (left, listen) {
        (Some(left), true) => Some(left),
        (Some(left), false) => Some(timeout.map_or(left, |t| t.min(left))),
        (None, true) => None,
        (None, false) => timeout,
    };
    // The host's progress token is the host's: downstream the call carries
    // one of the bridge's, unique among every host's calls (MCP requires
    // it; a stdio child or a session routes progress by it), and the
    // host's goes back on each `notifications/progress`.
    let token = request
        .raw_progress_token()
        .is_some()
        .then(next_progress_token);
    let call = match message {
        None => {
            let own;
            let params = match &token {
                Some(t) => {
                    own = with_progress_token(request.raw_params(), format!("\"{t}\"").as_bytes());
                    &own
                }
                None => request.raw_params(),
            };
            client
                .call_raw(request.method(), params, request.meta_complete(), timeout)
                .await
        }
        // A page of a whole list (boxed: the future of any transport's
        // call is larger than the gRPC call's of the usual path).
        Some(mut message) => {
            if let (Some(t), Some(meta)) = (&token, message.pointer_mut("/params/_meta")) {
                meta["progressToken"] = Value::String(t.clone());
            }
            Box::pin(client.call_with_timeout(message, timeout)).await
        }
    };
    let mut call = call.map_err(|e| downstream_tool_error(transport, &e))?;
    // The server's notifications the host has not taken yet (each with its
    // size): the host's side gives room for the largest message, and this
    // queue holds as much again; a host that leaves more than that
    // untaken while the server goes on is not reading, and the call fails
    // rather than the bridge growing. A stdio child cannot be held back
    // for one call: its lines are read for all of them.
    let mut waiting: VecDeque<(String, Value, usize)> = VecDeque::new();
    let mut waiting_bytes = 0;
    loop {
        let next = match waiting.front() {
            None => call.next_raw().await,
            // The front one goes to the host once there is room; the
            // server is read meanwhile. (A call's `next_raw` only waits
            // for its queue once it has given a message, so dropping it
            // for the host's turn loses nothing.)
            Some((method, params, _)) => {
                let sent = tokio::select! {
                    () = request.notify(method, params) => None,
                    next = call.next_raw() => Some(next),
                };
                match sent {
                    Some(next) => next,
                    None => {
                        if let Some((_, _, n)) = waiting.pop_front() {
                            waiting_bytes -= n;
                        }
                        continue;
                    }
                }
            }
        };
        let message = match next {
            Ok(Some(RawMessage::Notification(text))) => {
                let Some((method, params)) = host_notification(request, &text) else {
                    continue;
                };
                waiting_bytes += text.len();
                waiting.push_back((method, params, text.len()));
                if waiting_bytes > *HOST_MAX_MESSAGE {
                    let e = Failure::ClientNotReading.error();
                    return Err(ToolError::new(e.code, e.message));
                }
                continue;
            }
            other => other,
        };
        // The call's end comes after the notifications before it.
        for (method, params, _) in waiting.drain(..) {
            request.notify(&method, &params).await;
        }
        return match message {
            Ok(Some(RawMessage::Response(response))) => {
                let response = if listen {
                    response
                } else {
                    match raw_result(response) {
                        Ok(text) => {
                            return ForwardResult::raw(text).ok_or_else(|| {
                                ToolError::internal("the forwarded result is not a JSON object")
                            });
                        }
                        Err(response) => response,
                    }
                };
                let Ok(mut r) = serde_json::from_slice::<Value>(response.text()) else {
                    return Err(ToolError::internal(format!(
                        "the bridge's call to the server ({transport}) got a response that is not JSON"
                    )));
                };
                response_value(&mut r, request.id())
            }
            Ok(Some(RawMessage::Notification(_)) | None) => Err(ToolError::internal(format!(
                "the bridge's call to the server ({transport}) ended without a response"
            ))),
            Err(e) => Err(downstream_tool_error(transport, &e)),
        };
    }
}

/// A notification of the downstream call as the host is to see it: its
/// method and params, with the host's progress token (a progress
/// notification of a host that asked for none is dropped) and the host's
/// id as the subscription id.
fn host_notification(request: &ForwardRequest, text: &[u8]) -> Option<(String, Value)> {
    // The client engine validated it.
    let mut n = serde_json::from_slice::<Value>(text).ok()?;
    let method = n.get("method").and_then(Value::as_str)?.to_owned();
    if method == "notifications/progress" {
        let token = request.progress_token()?;
        if let Some(params) = n.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("progressToken".into(), token.clone());
        }
    }
    restore_id(&mut n, "params", request.id());
    let params = n.get_mut("params").map_or_else(|| json!({}), Value::take);
    Some((method, params))
}

/// A progress token of the bridge's own (a string): unique among the
/// calls of this process.
fn next_progress_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("mcpwire-bridge-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `params` (a JSON object the engine validated) with `token` (JSON text)
/// as the value of every `_meta.progressToken` member.
fn with_progress_token(params: &[u8], token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(params.len() + token.len());
    let mut done = 0;
    for (key, meta) in json::members(params) {
        if !json::str_eq(key, b"_meta") {
            continue;
        }
        for (key, value) in json::members(meta) {
            if json::str_eq(key, b"progressToken") {
                let at = json::span(params, value);
                out.extend_from_slice(params.get(done..at.start).unwrap_or_default());
                out.extend_from_slice(token);
                done = at.end;
            }
        }
    }
    out.extend_from_slice(params.get(done..).unwrap_or_default());
    out
}

/// The `result` of a response as its text, when it can go to the host as
/// it is: a result without a subscription id in its `_meta` (that id is
/// the downstream call's, the host's replaces it); else the response back.
fn raw_result(response: RawResponse) -> Result<Vec<u8>, RawResponse> {
    if response.result().is_some_and(names_subscription) {
        return Err(response);
    }
    response.into_result()
}

/// Whether a result's `_meta` carries a subscription id.
fn names_subscription(result: &[u8]) -> bool {
    // Every `_meta` member: a duplicate one is not left to chance. A result
    // whose text has neither the key nor an escape (which could spell it)
    // has none: no walk (most results carry a `_meta`, few the key).
    static KEY: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(KEY_SUBSCRIPTION_ID.as_bytes()));
    let may_name_one = memchr::memchr(b'\\', result).is_some() || KEY.find(result).is_some();
    may_name_one
        && json::members(result).any(|(key, meta)| {
            json::str_eq(key, b"_meta") && json::get(meta, KEY_SUBSCRIPTION_ID.as_bytes()).is_some()
        })
}

/// A response as a tree: its result (the host's id in place of the
/// downstream call's), or its error.
fn response_value(r: &mut Value, id: &Value) -> Result<ForwardResult, ToolError> {
    restore_id(r, "result", id);
    if let Some(result) = r.get_mut("result") {
        return Ok(ForwardResult::Value(result.take()));
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
    Err(e)
}

/// A failure of the downstream call, as the host sees it: the server's
/// JSON-RPC code when it gave one, -32001 for a timeout, else -32603;
/// `data.grpcStatus` (and `data.httpStatus`) say what the client saw.
fn downstream_tool_error(transport: &str, e: &CallError) -> ToolError {
    let code = match (e.diagnostics.rpc_code, e.status) {
        (Some(code), _) => code,
        // The code SDKs give a request that timed out.
        (None, Code::DeadlineExceeded) => -32001,
        (None, _) => INTERNAL_ERROR,
    };
    let mut data = json!({"grpcStatus": format!("{:?}", e.status)});
    if let Some(status) = e.diagnostics.http_status {
        data["httpStatus"] = json!(status);
    }
    // A refusal of the bridge's credentials (a token that expired) says
    // so, as the refusal at the start does.
    let why = server_refusal(e)
        .filter(|r| r.code == INTERNAL_ERROR)
        .map_or_else(|| e.message.clone(), |r| r.message);
    let mut out = ToolError::new(
        code,
        format!("the bridge's call to the server ({transport}) failed: {why}"),
    );
    out.data = Some(data);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `merge_pages` over `pages` (the pages after the first), noting the
    /// cursors it asked for.
    async fn merged(first: Value, pages: Vec<Value>) -> (Result<Value, ToolError>, Vec<String>) {
        let asked = std::sync::Mutex::new(Vec::new());
        let pages = std::sync::Mutex::new(pages.into_iter());
        let result = merge_pages((first, 2), "prompts", 100, |cursor| {
            asked.lock().unwrap().push(cursor);
            let page = pages.lock().unwrap().next();
            async move {
                let page = page.ok_or_else(|| ToolError::internal("no more pages"))?;
                let len = page.to_string().len();
                Ok((page, len))
            }
        })
        .await;
        (result, asked.into_inner().unwrap())
    }

    #[tokio::test]
    async fn pages_are_joined_until_the_cursor_ends() {
        let (result, asked) = merged(
            json!({"prompts": [{"name": "a"}], "nextCursor": "c1", "ttlMs": 5}),
            vec![
                json!({"prompts": [{"name": "b"}], "nextCursor": "c2", "ttlMs": 9}),
                json!({"prompts": [], "nextCursor": null}),
            ],
        )
        .await;
        assert_eq!(
            result.unwrap(),
            json!({"prompts": [{"name": "a"}, {"name": "b"}], "ttlMs": 5})
        );
        assert_eq!(asked, ["c1", "c2"]);
        // A page without the list's array is the server's fault.
        let (result, _) = merged(
            json!({"prompts": [], "nextCursor": "c1"}),
            vec![json!({"prompts": {}})],
        )
        .await;
        assert_eq!(result.unwrap_err().code, INTERNAL_ERROR);
        // A failed page fails the list.
        let (result, _) = merged(json!({"prompts": [], "nextCursor": "c1"}), vec![]).await;
        assert_eq!(result.unwrap_err().message, "no more pages");
        // Pages past the bound (100 octets here) are not asked for.
        let page = |n: usize| json!({"prompts": [{"name": "x".repeat(30)}], "nextCursor": format!("c{n}")});
        let (result, asked) = merged(
            json!({"prompts": [], "nextCursor": "c0"}),
            (1..10).map(page).collect(),
        )
        .await;
        let e = result.unwrap_err();
        assert!(
            e.message.contains("larger than the 100 octets"),
            "{}",
            e.message
        );
        assert_eq!(asked, ["c0", "c1"]);
    }

    #[test]
    fn the_downstream_call_carries_the_bridges_progress_token() {
        let t = br#""mcpwire-bridge-7""#;
        let params = br#"{"name":"a","_meta":{"x":1,"progressToken":{"k":[1]},"y":2},"arguments":{"progressToken":3}}"#;
        assert_eq!(
            String::from_utf8(with_progress_token(params, t)).unwrap(),
            r#"{"name":"a","_meta":{"x":1,"progressToken":"mcpwire-bridge-7","y":2},"arguments":{"progressToken":3}}"#
        );
        // Every `_meta` member's (a duplicate one is not left to chance);
        // params without a token stay as they are.
        let twice = br#"{"_meta":{"progressToken":1},"_meta":{ "progressToken" : "a" }}"#;
        assert_eq!(
            String::from_utf8(with_progress_token(twice, t)).unwrap(),
            r#"{"_meta":{"progressToken":"mcpwire-bridge-7"},"_meta":{ "progressToken" : "mcpwire-bridge-7" }}"#
        );
        let none = br#"{"name":"a","_meta":{}}"#;
        assert_eq!(with_progress_token(none, t), none);
        assert_ne!(next_progress_token(), next_progress_token());
    }

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
        let serial = parse(words("--stdio-host --serial /dev/ttyACM0 --restart-max 9")).unwrap();
        assert!(matches!(&serial.downstream,
            Downstream::Serial(d) if d.path.as_os_str() == "/dev/ttyACM0" && d.baud == 115_200));
        assert_eq!(serial.restart.max, Some(9));
        let slow = parse(words("--stdio-host --baud 9600 --serial /dev/ttyS0")).unwrap();
        assert!(matches!(&slow.downstream, Downstream::Serial(d) if d.baud == 9600));
        for (line, why) in [
            (
                "--stdio-host --serial /dev/ttyS0 --to http://h/mcp",
                "one server side",
            ),
            (
                "--stdio-host --serial /dev/ttyS0 -- /bin/s",
                "one server side",
            ),
            (
                "--stdio-host --baud 9600 --to http://h/mcp",
                "--baud goes with --serial",
            ),
            ("--stdio-host --serial /dev/ttyS0 --baud fast", "bad --baud"),
            ("--stdio-host --serial /dev/ttyS0 --baud 0", "bad --baud"),
            (
                "--stdio-host --serial /dev/ttyS0 --pass-env HOME",
                "--pass-env",
            ),
            ("--to http://h/mcp", "--stdio-host"),
            ("--stdio-host", "the server side"),
            ("--stdio-host --to http://h/mcp -- /bin/s", "not both"),
            ("--stdio-host -- server", "absolute path"),
            ("--stdio-host --pass-env X --to http://h/mcp", "--pass-env"),
            ("--listen 8080 --to http://h/mcp", "--token-file"),
            (
                "--listen 8080 --no-auth --token-file /nonexistent --to http://h/mcp",
                "/nonexistent",
            ),
            (
                "--listen 8080 --token secret --to http://h/mcp",
                "process list",
            ),
            (
                "--stdio-host --listen 8080 --no-auth --to http://h/mcp",
                "not both",
            ),
            (
                "--stdio-host --no-auth --to http://h/mcp",
                "go with --listen",
            ),
            (
                "--stdio-host --restart-max 2 --to http://h/mcp",
                "go with -- /ABS/SERVER",
            ),
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
    fn a_grpc_server_side_pings_every_5_s_unless_told_otherwise() {
        let default = parse(words("--stdio-host --to grpc://127.0.0.1:1")).unwrap();
        assert_eq!(default.keepalive, Some(Duration::from_secs(5)));
        let set = parse(words(
            "--stdio-host --keepalive-ms 250 --to grpc://127.0.0.1:1",
        ))
        .unwrap();
        assert_eq!(set.keepalive, Some(Duration::from_millis(250)));
        let off = parse(words(
            "--stdio-host --keepalive-ms 0 --to grpc://127.0.0.1:1",
        ))
        .unwrap();
        assert_eq!(off.keepalive, None);
        assert!(
            parse(words(
                "--stdio-host --keepalive-ms soon --to grpc://127.0.0.1:1"
            ))
            .is_err()
        );
    }

    #[test]
    fn a_bare_port_listens_on_loopback() {
        let args = parse(words(
            "--listen 8080 --no-auth --restart-max 2 --restart-backoff-ms 10 -- /bin/server",
        ))
        .unwrap();
        assert!(matches!(args.host,
            Host::Listen { addr, no_auth: true, .. } if addr == "127.0.0.1:8080"));
        assert_eq!(args.restart.max, Some(2));
        assert_eq!(args.restart.backoff, Some(Duration::from_millis(10)));
        let args = parse(words("--listen 0.0.0.0:9 --no-auth --to grpc://h:1")).unwrap();
        assert!(matches!(args.host, Host::Listen { addr, .. } if addr == "0.0.0.0:9"));
    }

    #[test]
    fn an_older_servers_results_get_the_current_eras_fields() {
        let mut listed = json!({"tools": []});
        current_era_result("tools/list", &mut listed);
        assert_eq!(
            listed,
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let mut called = json!({"content": [], "resultType": "complete", "isError": false});
        current_era_result("tools/call", &mut called);
        assert_eq!(
            called,
            json!({"content": [], "resultType": "complete", "isError": false})
        );
        let mut kept = json!({"contents": [], "ttlMs": 5000, "cacheScope": "public"});
        current_era_result("resources/read", &mut kept);
        assert_eq!(kept["ttlMs"], 5000);
        assert_eq!(kept["cacheScope"], "public");
        assert_eq!(kept["resultType"], "complete");
    }

    #[test]
    fn a_result_goes_on_as_its_text_unless_it_names_a_subscription() {
        let raw = |text: &[u8]| raw_result(RawResponse::new(text.to_vec())).ok();
        let response = br#"{"jsonrpc":"2.0","id":7,"result":{"z":1,"a":[2.50]}}"#;
        assert_eq!(
            raw(response).as_deref(),
            Some(&br#"{"z":1,"a":[2.50]}"#[..])
        );
        let listening = br#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#;
        assert_eq!(raw(listening), None);
        let second = br#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{},"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#;
        assert_eq!(raw(second), None);
        // A key spelt with an escape is the same key.
        let escaped = br#"{"jsonrpc":"2.0","id":7,"result":{"\u005fmeta":{"io.modelcontextprotocol/subscriptionId":7}}}"#;
        assert_eq!(raw(escaped), None);
        let key_escaped = br#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/subscription\u0049d":7}}}"#;
        assert_eq!(raw(key_escaped), None);
        let text =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"_met"}]}}"#;
        assert!(raw(text).is_some());
        // The key's text outside `_meta`, and a `_meta` without it.
        let elsewhere = br#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{"a":1},"content":[{"type":"text","text":"io.modelcontextprotocol/subscriptionId"}]}}"#;
        assert!(raw(elsewhere).is_some());
        let other_meta =
            br#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#;
        assert!(raw(other_meta).is_some());
        let error = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
        assert_eq!(raw(error), None);
        // The error goes back as the server's.
        let mut error: Value = serde_json::from_slice(error).unwrap();
        let e = response_value(&mut error, &json!("h")).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32601, "no"));
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
