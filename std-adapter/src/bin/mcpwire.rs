//! The `mcpwire` command line (clap): `serve` (this file) the demo
//! application, or with `--fixtures conformance` the conformance suite's
//! fixture set, over the gRPC tunnel binding, the typed gRPC service
//! `model_context_protocol.Mcp` and Streamable HTTP on one port, or with
//! `--stdio` over stdin and stdout (MCP §6: stdout carries MCP messages
//! only; this program writes its own words to stderr); `call` one
//! request to any server; `bridge` a host side joined to a server side;
//! `conformance-client` the driver of the conformance suite's client
//! scenarios. A usage error exits 2, a failure 1.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use mcpwire_tokio::{App, Server, StateSeal};

#[path = "mcpwire/bridge.rs"]
mod bridge;
#[path = "mcpwire/call.rs"]
mod call;
#[path = "mcpwire/conformance.rs"]
mod conformance;
#[path = "mcpwire/conformance_client.rs"]
mod conformance_client;
#[path = "mcpwire/demo.rs"]
mod demo;

/// The key that seals the fixtures' multi round-trip `requestState`
/// (HMAC-SHA256; its bytes as they are). Unset: a random key per process.
const STATE_KEY_VAR: &str = "MCPWIRE_STATE_KEY";

/// MCP 2026-07-28 over the gRPC tunnel, the typed gRPC service,
/// Streamable HTTP and stdio.
#[derive(Debug, Parser)]
#[command(name = "mcpwire", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the demo (or the conformance fixtures) over gRPC and
    /// Streamable HTTP on one port, or over stdio
    Serve(ServeArgs),
    /// Send one request to a gRPC server, a Streamable HTTP endpoint, a
    /// stdio server or a serial device; its result to stdout
    Call(call::CallArgs),
    /// Join a host (stdio or the network) to a server over any transport
    /// (`mcpwire bridge --help` for every flag)
    #[command(long_about = bridge::BridgeArgs::ABOUT)]
    Bridge(bridge::BridgeArgs),
    /// The driver the MCP conformance suite runs for each client scenario
    ConformanceClient(conformance_client::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(args) => serve_main(args),
        Command::Call(args) => call::main(args),
        Command::Bridge(args) => bridge::run(args),
        Command::ConformanceClient(args) => conformance_client::main(args),
    }
}

/// `mcpwire serve`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The conformance fixtures seal their requestState with the key in \
    MCPWIRE_STATE_KEY (a random key per process when unset)."
)]
struct ServeArgs {
    /// The address gRPC and Streamable HTTP are served on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Serve on stdin and stdout instead: one JSON-RPC message a line (MCP
    /// stdio); exits 0 at the end of stdin
    #[arg(long, conflicts_with_all = ["listen", "ServeOptions"])]
    stdio: bool,
    #[command(flatten)]
    options: ServeOptions,
    /// The demo's listen source announces tools/list_changed every MS
    /// milliseconds
    #[arg(long = "tick-ms", value_name = "MS", default_value = "5000", value_parser = positive_ms)]
    tick: Duration,
    /// What is served: the demo, or every tool, resource and prompt the
    /// official MCP conformance suite calls by name
    #[arg(long, value_enum, value_name = "SET", default_value_t = Fixtures::Demo)]
    fixtures: Fixtures,
}

fn serve_main(args: ServeArgs) -> ExitCode {
    // One connection over stdio: a single thread runs it and its handlers
    // (no wake-ups across threads); a network server spreads connections
    // over the cores.
    let mut builder = if args.stdio {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (fixtures, tick) = (args.fixtures, args.tick);
    let served = if args.stdio {
        // The runtime serves nothing else: an idle server waits for its
        // next line in one blocking read.
        let config = mcpwire_tokio::StdioConfig {
            idle_read_blocks: true,
            ..mcpwire_tokio::StdioConfig::default()
        };
        runtime.block_on(async { fixtures.app(tick)?.serve_stdio_with(config).await })
    } else {
        runtime.block_on(serve(args.listen, args.options, fixtures, tick))
    };
    // Reading stdin takes a blocking thread, which may still wait for
    // input after an error: do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What `serve` serves.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Fixtures {
    Demo,
    Conformance,
}

impl Fixtures {
    /// The app; call inside the runtime (the demo spawns its ticker).
    fn app(self, tick: Duration) -> std::io::Result<App> {
        Ok(match self {
            Self::Demo => demo::app(tick),
            Self::Conformance => {
                let (seal, configured) = StateSeal::from_env(STATE_KEY_VAR)?;
                if !configured {
                    eprintln!(
                        "mcpwire: {STATE_KEY_VAR} is not set: requestState is sealed with a random key"
                    );
                }
                conformance::app(seal)
            }
        })
    }
}

/// A number of milliseconds (`--timeout-ms`).
fn millis(v: &str) -> Result<Duration, String> {
    v.parse()
        .map(Duration::from_millis)
        .map_err(|_| "a number of milliseconds".to_owned())
}

/// A positive number of milliseconds (`--tick-ms`).
fn positive_ms(v: &str) -> Result<Duration, String> {
    millis(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| "a positive number of milliseconds".to_owned())
}

/// The value of `--baud` (`bridge --serial`): a positive line speed.
fn parse_baud(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|b| *b > 0)
        .ok_or(format!("bad --baud {v}"))
}

/// A bearer token and the principal its calls run as (`token-N`, its
/// place among the server's tokens, when none is named).
#[derive(Debug, Clone)]
struct Token {
    token: String,
    principal: Option<String>,
}

/// The value of `--token`: a token of its own.
fn bearer(v: &str) -> Result<Token, String> {
    if v.is_empty() {
        return Err("a token is not empty".into());
    }
    Ok(Token {
        token: v.to_owned(),
        principal: None,
    })
}

/// The tokens of a `--token-file`.
#[derive(Debug, Clone)]
struct TokenFile(Vec<Token>);

/// Reads a `--token-file`: one token a line, optionally followed by a
/// principal; blank lines and lines starting with `#` skipped.
fn token_file(path: &str) -> Result<TokenFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let tokens: Vec<Token> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some(Token {
                token: words.next()?.to_owned(),
                principal: words.next().map(str::to_owned),
            })
        })
        .collect();
    if tokens.is_empty() {
        return Err("no token in it".into());
    }
    Ok(TokenFile(tokens))
}

/// The value of `--http-path`.
fn http_path(v: &str) -> Result<String, String> {
    if !v.starts_with('/') {
        return Err("a path starts with /".into());
    }
    Ok(v.to_owned())
}

/// The bearer tokens, TLS files and HTTP settings of a network server
/// (`serve`, and the bridge's `--listen`).
#[derive(Debug, Default, clap::Args)]
struct ServeOptions {
    /// Require this bearer token (repeatable); other users see it in the
    /// process list: prefer --token-file
    #[arg(long = "token", value_name = "TOKEN", value_parser = bearer)]
    tokens: Vec<Token>,
    /// Require one of the tokens of FILE: one a line, optionally followed
    /// by a principal name (blank lines and lines starting with # skipped)
    #[arg(long = "token-file", value_name = "FILE", value_parser = token_file)]
    token_files: Vec<TokenFile>,
    /// Serve TLS only (ALPN h2 or http/1.1): the certificate chain
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A Host (:authority) and Origin name accepted besides loopback
    /// (repeatable; * for any), over HTTP/1.1 and HTTP/2 alike
    #[arg(long = "allow-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// The Streamable HTTP endpoint, on the port of the gRPC services
    #[arg(long, value_name = "PATH", value_parser = http_path, default_value = "/mcp")]
    http_path: Option<String>,
    /// How long a request may run (the server's default when `None`).
    #[arg(skip)]
    request_timeout: Option<Duration>,
}

impl ServeOptions {
    /// The server settings these options name.
    fn config(&self) -> mcpwire_tokio::ServerConfig {
        use mcpwire_tokio::AllowedHosts;
        let defaults = mcpwire_tokio::ServerConfig::default();
        let allowed_hosts = if self.allowed_hosts.iter().any(|h| h == "*") {
            AllowedHosts::Any
        } else if self.allowed_hosts.is_empty() {
            AllowedHosts::Loopback
        } else {
            AllowedHosts::Hosts(self.allowed_hosts.clone())
        };
        mcpwire_tokio::ServerConfig {
            http_path: self.http_path.clone().unwrap_or(defaults.http_path.clone()),
            allowed_hosts,
            request_timeout: self.request_timeout.unwrap_or(defaults.request_timeout),
            ..defaults
        }
    }

    /// Every token with its principal.
    fn bearer_tokens(&self) -> Vec<(String, String)> {
        let files = self.token_files.iter().flat_map(|f| &f.0);
        let tokens = self.tokens.iter().chain(files).enumerate();
        tokens
            .map(|(i, t)| {
                let principal = t.principal.clone();
                let principal = principal.unwrap_or_else(|| format!("token-{}", i + 1));
                (t.token.clone(), principal)
            })
            .collect()
    }
}

/// The server the options name, bound to `listen`, and a sentence of
/// what it serves (address, path, TLS, how many tokens; never a token).
async fn bind(
    listen: impl tokio::net::ToSocketAddrs,
    opts: ServeOptions,
) -> std::io::Result<(Server, String)> {
    use std::io::{Error, ErrorKind};
    let mut server = match (&opts.tls_cert, &opts.tls_key) {
        (None, None) => Server::bind(listen).await?,
        #[cfg(feature = "tls")]
        (Some(cert), Some(key)) => {
            let tls = mcpwire_tokio::TlsConfig::from_pem_files(cert, key)?;
            Server::bind(listen).await?.with_tls(tls)
        }
        #[cfg(not(feature = "tls"))]
        (Some(_), Some(_)) => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "this mcpwire is built without the `tls` feature",
            ));
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--tls-cert and --tls-key go together",
            ));
        }
    };
    let secured = opts.tls_cert.is_some();
    let config = opts.config();
    let path = config.http_path.clone();
    server = server.with_config(config);
    let tokens = opts.bearer_tokens();
    let count = tokens.len();
    if count > 0 {
        server = server.with_auth(mcpwire_tokio::BearerTokens::new(tokens));
    }
    // The tokens themselves are never printed.
    let sentence = format!(
        "{} (gRPC and Streamable HTTP at {path}; {}; {})",
        server.local_addr()?,
        if secured {
            "TLS, ALPN h2 or http/1.1"
        } else {
            "cleartext HTTP/2 and HTTP/1.1"
        },
        if count > 0 {
            format!("{count} bearer token(s)")
        } else {
            "no authentication".to_owned()
        },
    );
    Ok((server, sentence))
}

async fn serve(
    listen: SocketAddr,
    opts: ServeOptions,
    fixtures: Fixtures,
    tick: Duration,
) -> std::io::Result<()> {
    let (server, sentence) = bind(listen, opts).await?;
    eprintln!("listening on {sentence}");
    let app = fixtures.app(tick)?;
    server
        .serve_with_shutdown(app, async {
            // Without a signal handler, serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
}
