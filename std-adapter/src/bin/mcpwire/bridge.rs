//! `mcpwire bridge (--stdio-host | --listen ADDR ...) (--to URL | --serial DEVICE | -- /ABS/SERVER [ARGS...])`:
//! a host reaches a server over any transport of [`Client`]. The
//! forwarding is the library's ([`mcpwire_tokio::bridge`]: ids, progress
//! tokens, deadlines, cancellation, merged pages, era translation, a
//! refusing server answered per request); this file parses the arguments,
//! makes the client, and serves the bridge's app on the host side: stdio
//! (`--stdio-host`) or the network (`--listen`: Streamable HTTP, the gRPC
//! tunnel and the typed service on one port, a bearer token required
//! unless `--no-auth`, Origin checked).
//!
//! Only JSON-RPC goes to stdout; diagnostics go to stderr, the first a
//! sentence naming the host side, the server side, the versions and the
//! eras. At the end of stdin (stdio host) the calls in flight get the stdio
//! server's grace to finish; SIGTERM ends either host side, and a stdio
//! child is shut down (stdin closed, SIGTERM, SIGKILL: [`CHILD_STOP_WAIT`]
//! each, within the second hosts grant a server they stop).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Args};
use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use mcpwire_tokio::bridge::{self, Bridge};
use mcpwire_tokio::{
    CallError, Client, Keepalive, SerialDevice, ServerCommand, ToolError,
    client::{grpc, http, stdio},
};
use url::Url;

/// The host side's own request timeout: none to speak of (a year). The
/// downstream call has its own (`--timeout-ms`, or the client's): its
/// error says which side gave up; a gRPC host's grpc-timeout still holds.
const NO_HOST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// A stdio child's shutdown: its stdin closed, then SIGTERM after this
/// long, then SIGKILL after as long again (the TypeScript SDK's host sends
/// SIGTERM, then SIGKILL after 1 s).
const CHILD_STOP_WAIT: Duration = Duration::from_millis(400);

/// `mcpwire bridge`'s arguments ([`BridgeArgs::ABOUT`]).
#[derive(Debug, Args)]
// One host side and one server side; what goes with one side conflicts
// with the others (a `requires` of an argument in a required group is met
// by any of the group: clap #4707).
#[command(group(ArgGroup::new("host").required(true).args(["stdio_host", "listen"])))]
#[command(group(ArgGroup::new("server").required(true).args(["to", "serial", "command"])))]
#[command(group(ArgGroup::new("auth").args(["token_file", "no_auth"])))]
pub struct BridgeArgs {
    /// The host speaks MCP over stdin and stdout.
    #[arg(long)]
    stdio_host: bool,
    /// Network hosts reach Streamable HTTP, the gRPC tunnel and the typed
    /// gRPC service (whose lists have no cursor: the server's pages are
    /// merged, up to 1024) on this port (127.0.0.1 unless ADDR is given); a
    /// Host (:authority) or Origin that is not allowed is refused (403).
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = listen_addr, requires = "auth")]
    listen: Option<String>,
    /// Bearer tokens the network hosts must send: one a line, optionally
    /// followed by a principal name.
    #[arg(long, value_name = "FILE", conflicts_with = "stdio_host", value_parser = super::token_file)]
    token_file: Vec<super::TokenFile>,
    /// No token: whoever reaches the port uses the server.
    #[arg(long, conflicts_with = "stdio_host")]
    no_auth: bool,
    /// Refused: a token on the command line is seen in the process list.
    #[arg(long, hide = true, value_parser = refuse_token)]
    token: Vec<String>,
    /// The host side's TLS certificate (with --tls-key): TLS only, ALPN h2
    /// or http/1.1.
    #[arg(
        long,
        value_name = "PEM",
        requires = "tls_key",
        conflicts_with = "stdio_host"
    )]
    tls_cert: Option<std::path::PathBuf>,
    /// The key of --tls-cert.
    #[arg(
        long,
        value_name = "PEM",
        requires = "tls_cert",
        conflicts_with = "stdio_host"
    )]
    tls_key: Option<std::path::PathBuf>,
    /// Host (:authority) and Origin names accepted besides loopback (* for
    /// any).
    #[arg(long, value_name = "NAME", conflicts_with = "stdio_host")]
    allow_host: Vec<String>,
    /// The Streamable HTTP endpoint (default /mcp).
    #[arg(long, value_name = "PATH", conflicts_with = "stdio_host", value_parser = super::http_path)]
    http_path: Option<String>,
    /// The server: http://HOST:PORT/PATH or https://... (Streamable HTTP,
    /// its era probed), or grpc://HOST:PORT (the gRPC tunnel).
    #[arg(long, value_name = "URL", value_parser = server_url)]
    to: Option<Url>,
    /// A serial device that speaks the stdio binding (a board's UART,
    /// /dev/ttyACM0), opened raw (8N1, no flow control), and opened again as
    /// the restart flags say when it goes away.
    #[arg(long, value_name = "DEVICE")]
    serial: Option<PathBuf>,
    /// The serial device's line speed (default 115200).
    #[arg(long, value_name = "N", conflicts_with_all = ["to", "command"], value_parser = baud)]
    baud: Option<u32>,
    /// An environment variable the stdio child gets (it gets none else but
    /// MCPWIRE_TOKEN).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["to", "serial"])]
    pass_env: Vec<String>,
    /// Restarts of a crashed stdio server or device within
    /// --restart-window-ms (default 5); until the new child is ready every
    /// call is refused at once (-32603 "the server is restarting (attempt N
    /// of M)"); a crash past the budget pauses the restarts until its oldest
    /// leaves the window; a child that stays up 10 s makes it whole.
    #[arg(long, value_name = "N", conflicts_with = "to")]
    restart_max: Option<u32>,
    /// The restart budget's window (default 30000).
    #[arg(long, value_name = "MS", conflicts_with = "to", value_parser = clap::value_parser!(u64).range(1..))]
    restart_window_ms: Option<u64>,
    /// The first wait before a restart (default 100, doubling up to 5 s).
    #[arg(long, value_name = "MS", conflicts_with = "to")]
    restart_backoff_ms: Option<u64>,
    /// A forwarded call's longest wait; a gRPC host's deadline goes
    /// downstream as what is left of it (the shorter of the two; without
    /// either the client's 60 s); listen streams have none but the host's.
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// A gRPC server: a PING after MS without a frame during a call, the
    /// calls failed if MS more pass without an answer (0: no pings; a
    /// grpc-core server refuses pings more often than every 5 minutes
    /// during a silent call by default).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    keepalive_ms: u64,
    /// The stdio server to launch: its absolute path and arguments.
    #[arg(last = true, value_name = "/ABS/SERVER [ARGS]")]
    command: Vec<String>,
}

fn listen_addr(v: &str) -> Result<String, String> {
    // A port alone binds loopback.
    Ok(match v.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => v.to_owned(),
    })
}

fn refuse_token(_: &str) -> Result<String, String> {
    Err("a token on the command line is seen in the process list: use --token-file".into())
}

fn baud(v: &str) -> Result<u32, String> {
    super::parse_baud(v)
}

/// `--to`: an http, https or grpc URL, without credentials or a path for
/// gRPC.
fn server_url(v: &str) -> Result<Url, String> {
    let url = Url::parse(v).map_err(|e| e.to_string())?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        "grpc" if url.host_str().is_none() || url.port().is_none() => {
            Err("a gRPC address is grpc://HOST:PORT".into())
        }
        "grpc" if !url.username().is_empty() || url.password().is_some() => {
            Err("a gRPC address has no credentials: set MCPWIRE_TOKEN".into())
        }
        "grpc" if !matches!(url.path(), "" | "/") => Err("a gRPC address has no path".into()),
        "grpc" => Ok(url),
        other => Err(format!(
            "{other}: the server is http://, https:// or grpc://"
        )),
    }
}

impl BridgeArgs {
    /// What the bridge does, for `--help`.
    pub const ABOUT: &str = "A host reaches a server through the bridge: each request is forwarded with its id and a progress token of the bridge's (the host's goes back on its progress and is never sent on), its cancel and its deadline. MCPWIRE_TOKEN, if set, is the bearer token sent downstream over HTTP and gRPC; a server that refuses it, or speaks none of the bridge's versions, is answered to each request as a JSON-RPC error naming the refusal, and tried again at the next.";

    /// What clap cannot say: the server's executable is an absolute path.
    fn check(&self) -> Result<(), String> {
        match self.command.first() {
            Some(p) if !std::path::Path::new(p).is_absolute() => Err(format!(
                "the server's executable must be an absolute path, not {p}"
            )),
            _ => Ok(()),
        }
    }

    /// A stdio server's (or device's) restart settings, and, as the
    /// bridge recipe asks, no new work while it restarts.
    fn restart(&self, mut config: stdio::Config) -> stdio::Config {
        if let Some(max) = self.restart_max {
            config.restart.max_restarts = max;
        }
        if let Some(ms) = self.restart_backoff_ms {
            config.restart.backoff = Duration::from_millis(ms);
        }
        if let Some(ms) = self.restart_window_ms {
            config.restart.window = Duration::from_millis(ms);
        }
        config.refuse_while_restarting = true;
        config
    }

    fn serial_device(&self) -> Option<SerialDevice> {
        let device = SerialDevice::new(self.serial.clone()?);
        Some(match self.baud {
            Some(b) => device.baud(b),
            None => device,
        })
    }

    /// The server side in words (no credentials).
    fn target(&self) -> String {
        if let Some(url) = &self.to {
            let mut shown = url.clone();
            let _ = shown.set_username("");
            let _ = shown.set_password(None);
            return shown.to_string();
        }
        match self.serial_device() {
            Some(d) => format!("{} at {} baud", d.path.display(), d.baud),
            None => self.command.first().cloned().unwrap_or_default(),
        }
    }

    /// A client of the server.
    async fn client(&self) -> Result<Client, CallError> {
        let token = std::env::var("MCPWIRE_TOKEN").ok();
        if let Some(url) = &self.to {
            if url.scheme() != "grpc" {
                let mut config = http::Config::new(url.as_str())?;
                config.bearer = token;
                return Client::http(config).await;
            }
            let host = url.host_str().unwrap_or_default();
            let port = url.port().unwrap_or_default();
            let mut config = grpc::Config::new(format!("{host}:{port}"));
            config.bearer = token;
            config.keepalive = (self.keepalive_ms > 0).then(|| {
                let every = Duration::from_millis(self.keepalive_ms);
                Keepalive::new(every, every)
            });
            return Client::grpc(config).await;
        }
        let config = match self.serial_device() {
            Some(device) => stdio::Config::serial(device),
            None => {
                let mut words = self.command.iter();
                let program = words.next().cloned().unwrap_or_default();
                let mut server = ServerCommand::new(program).args(words.cloned());
                for name in &self.pass_env {
                    server = server.pass_env(name.clone());
                }
                let mut config = stdio::Config::new(server);
                config.close_wait = CHILD_STOP_WAIT;
                config.term_wait = CHILD_STOP_WAIT;
                config
            }
        };
        Client::stdio(self.restart(config)).await
    }
}

/// Runs the bridge the arguments describe.
pub fn run(args: BridgeArgs) -> ExitCode {
    if let Err(e) = args.check() {
        eprintln!("mcpwire bridge: {e}");
        return ExitCode::from(2);
    }
    // One thread runs the host side, the client and the forwarding
    // handlers: every call crosses from one to the other, and on one
    // thread that is a poll, not a wake-up across threads.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    match builder.enable_all().build() {
        Ok(runtime) => runtime.block_on(bridge(Arc::new(args))),
        Err(e) => {
            eprintln!("mcpwire bridge: cannot start the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn bridge(args: Arc<BridgeArgs>) -> ExitCode {
    let builder = Bridge::builder()
        .timeout(args.timeout_ms.map(Duration::from_millis))
        .on_reconnect({
            let args = Arc::clone(&args);
            move |client| {
                let side = bridge::server_side(client, &args.target());
                eprintln!("mcpwire bridge: the server let the bridge in: server side {side}");
            }
        });
    let connect = {
        let args = Arc::clone(&args);
        move || {
            let args = Arc::clone(&args);
            async move { args.client().await }
        }
    };
    let bridge = match builder.connect(connect).await {
        Ok(bridge) => bridge,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot reach the server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (server_side, note) = match (bridge.client(), bridge.refusal()) {
        (Some(client), _) => (bridge::server_side(&client, &args.target()), None),
        (None, refusal) => (
            format!("{} (not connected: it refused the bridge)", args.target()),
            refusal.map(refusal_note),
        ),
    };
    let served = match &args.listen {
        None => {
            eprintln!(
                "mcpwire bridge {}: host side stdio (MCP {PROTOCOL_VERSION}, JSON-RPC lines on stdin and stdout) -> server side {server_side}",
                env!("CARGO_PKG_VERSION")
            );
            if let Some(note) = &note {
                eprintln!("{note}");
            }
            let config = mcpwire_tokio::StdioConfig {
                request_timeout: NO_HOST_TIMEOUT,
                ..mcpwire_tokio::StdioConfig::default()
            };
            tokio::select! {
                served = bridge.app().serve_stdio_with(config) => served,
                () = bridge::shutdown_signal() => Ok(()),
            }
        }
        Some(addr) => {
            let sides = format!("MCP {PROTOCOL_VERSION} -> server side {server_side}");
            match listen(&args, addr, &bridge, &sides, note.as_deref()).await {
                Some(served) => served,
                None => {
                    bridge.close().await;
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    bridge.close().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire bridge: the host side failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What stderr says of a server that refused the bridge at the start.
fn refusal_note(refusal: &ToolError) -> String {
    let supported = refusal.data.as_ref().and_then(|d| d.get("supported"));
    let why = match supported {
        Some(versions) => format!(
            "the server refused the bridge's protocol version {PROTOCOL_VERSION} ({}): it speaks {versions}",
            refusal.message
        ),
        None => refusal.message.clone(),
    };
    format!(
        "mcpwire bridge: {why}; each request is answered with this refusal (JSON-RPC {}) and the server is tried again at the next",
        refusal.code
    )
}

/// The network host side: the bridge's app on the server the options
/// name, until SIGTERM; `None` when it could not listen.
async fn listen(
    args: &BridgeArgs,
    addr: &str,
    bridge: &Bridge,
    sides: &str,
    note: Option<&str>,
) -> Option<std::io::Result<()>> {
    let opts = super::ServeOptions {
        token_files: args.token_file.clone(),
        tls_cert: args.tls_cert.clone(),
        tls_key: args.tls_key.clone(),
        allowed_hosts: args.allow_host.clone(),
        http_path: args.http_path.clone(),
        request_timeout: Some(NO_HOST_TIMEOUT),
        ..super::ServeOptions::default()
    };
    let (server, sentence) = match super::bind(addr, opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpwire bridge: cannot listen on {addr}: {e}");
            return None;
        }
    };
    if args.no_auth {
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
    Some(
        server
            .serve_with_shutdown(bridge.app(), bridge::shutdown_signal())
            .await,
    )
}
