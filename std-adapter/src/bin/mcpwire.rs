//! `mcpwire serve`: the demo application (or, with `--fixtures
//! conformance`, the conformance suite's fixture set) over the gRPC tunnel
//! binding, the typed gRPC service `model_context_protocol.Mcp` and
//! Streamable HTTP on one port, or with `--stdio` over stdin and stdout (MCP §6: stdout carries
//! MCP messages only; this program writes its own words to stderr);
//! `mcpwire call`: discovers, lists and calls tools of a tunnel server, a
//! Streamable HTTP endpoint or a stdio child; `mcpwire conformance-client`:
//! the driver of the conformance suite's client scenarios.

use std::process::ExitCode;
use std::time::Duration;

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

const USAGE: &str = "usage: mcpwire serve [--listen ADDR]   (default 127.0.0.1:50051)
         [--token TOKEN]... [--token-file FILE]   require one of these bearer tokens
         [--tls-cert PEM --tls-key PEM]          serve TLS only (ALPN h2 or http/1.1)
         [--http-path PATH]   the Streamable HTTP endpoint (default /mcp), on the same port as gRPC
         [--allow-host NAME]...   Host (:authority)/Origin names accepted besides loopback (* for any)
           (both over HTTP/1.1 and HTTP/2 alike)
         [--tick-ms N]   the demo's listen source announces tools/list_changed every N ms (default 5000)
         [--fixtures demo|conformance]   what is served: the demo (default), or every tool,
           resource and prompt the official MCP conformance suite calls by name (its
           requestState is sealed with the key in MCPWIRE_STATE_KEY, random when unset)
  --token-file: one token a line, optionally followed by a principal name
  (blank lines and lines starting with # are skipped); prefer it to
  --token, which other users can see in the process list.
       mcpwire serve --stdio [--tick-ms N] [--fixtures F]   the app on stdin and stdout, one JSON-RPC
         message a line (MCP stdio); exits 0 at the end of stdin
       mcpwire call [--server ADDR] [--tls | --tls-ca PEM] [--tls-server-name NAME] discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N]
         (MCPWIRE_TOKEN, if set, is sent as a bearer token)
       mcpwire call --stdio [-v] [--era probe|modern|legacy] [--pass-env NAME]... [--inherit-env] [--cwd DIR]
         discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N] -- /ABS/SERVER [ARGS...]
         launches a stdio server (empty environment but --pass-env; MCPWIRE_TOKEN is passed to it);
         -v prints the era, versions and fallback to stderr
       mcpwire call http://HOST:PORT/PATH [-v] discover | list | tool NAME [JSON-ARGS] [--progress] [--timeout-ms N]
         a modern Streamable HTTP endpoint (MCPWIRE_TOKEN, if set, is sent as a bearer token);
         -v prints the era, versions, URL, status and content type to stderr
       mcpwire bridge --stdio-host --to http[s]://HOST:PORT/PATH | grpc://HOST:PORT   a stdio host reaches that server
       mcpwire bridge --stdio-host [--pass-env NAME]... -- /ABS/SERVER [ARGS...]   ... or a stdio child
       mcpwire bridge --listen [ADDR:]PORT (--token-file FILE | --no-auth) [--tls-cert PEM --tls-key PEM] (--to URL | -- /ABS/SERVER ...)
         network hosts (Streamable HTTP, gRPC) reach that server; `mcpwire bridge --help` for more
         (requests forwarded with their ids, progress and cancellation; diagnostics on stderr)
       mcpwire conformance-client URL   the driver the MCP conformance suite runs per client scenario
         (MCP_CONFORMANCE_SCENARIO names it, MCP_CONFORMANCE_CONTEXT carries its data)";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut listen = String::from("127.0.0.1:50051");
    let mut listen_given = false;
    let mut stdio = false;
    let mut tick = Duration::from_secs(5);
    let mut fixtures = Fixtures::Demo;
    let mut opts = ServeOptions::default();
    match args.next().as_deref() {
        Some("serve") => {}
        Some("call") => return call::main(args),
        Some("bridge") => return bridge::main(args),
        Some(conformance_client::NAME) => return conformance_client::main(args),
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
                Some(addr) => (listen, listen_given) = (addr, true),
                None => {
                    eprintln!("--listen needs an address\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            (_, Some(("--listen", addr))) => (listen, listen_given) = (addr.to_owned(), true),
            ("--stdio", _) => stdio = true,
            ("--fixtures", _) | (_, Some(("--fixtures", _))) => {
                let value = match arg.split_once('=') {
                    Some((_, v)) => Some(v.to_owned()),
                    None => args.next(),
                };
                match value.as_deref() {
                    Some("demo") => fixtures = Fixtures::Demo,
                    Some(conformance::NAME) => fixtures = Fixtures::Conformance,
                    _ => {
                        eprintln!("--fixtures takes demo or conformance\n{USAGE}");
                        return ExitCode::from(2);
                    }
                }
            }
            ("--tick-ms", _) | (_, Some(("--tick-ms", _))) => {
                let value = match arg.split_once('=') {
                    Some((_, v)) => Some(v.to_owned()),
                    None => args.next(),
                };
                match value
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|&ms| ms > 0)
                {
                    Some(ms) => tick = Duration::from_millis(ms),
                    None => {
                        eprintln!("--tick-ms needs a positive number of milliseconds\n{USAGE}");
                        return ExitCode::from(2);
                    }
                }
            }
            ("-h" | "--help", _) => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if ServeOptions::takes(&arg) => {
                if let Err(e) = opts.take(&arg, &mut args) {
                    eprintln!("{e}\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
            _ => {
                eprintln!("unknown argument {arg}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if stdio && (listen_given || opts.is_set()) {
        eprintln!("--stdio takes no --listen, token, TLS or HTTP option\n{USAGE}");
        return ExitCode::from(2);
    }
    // One connection over stdio: a single thread runs it and its handlers
    // (no wake-ups across threads); a network server spreads connections
    // over the cores.
    let mut builder = if stdio {
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
    let served = if stdio {
        // The runtime serves nothing else: an idle server waits for its
        // next line in one blocking read.
        let config = mcpwire_tokio::StdioConfig {
            idle_read_blocks: true,
            ..mcpwire_tokio::StdioConfig::default()
        };
        runtime.block_on(async { fixtures.app(tick)?.serve_stdio_with(config).await })
    } else {
        runtime.block_on(serve(&listen, opts, fixtures, tick))
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
#[derive(Debug, Clone, Copy)]
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

/// The value of `--baud` (`call --serial`, `bridge --serial`): a positive
/// line speed.
fn parse_baud(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|b| *b > 0)
        .ok_or(format!("bad --baud {v}"))
}

/// The bearer tokens, TLS files and HTTP settings of `serve`.
#[derive(Default)]
struct ServeOptions {
    /// (token, principal); principals of `--token` are `token-1`, ...
    tokens: Vec<(String, String)>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    /// `--allow-host`: names besides loopback; `*` for any.
    allowed_hosts: Vec<String>,
    http_path: Option<String>,
    /// How long a request may run (the server's default when `None`).
    request_timeout: Option<Duration>,
}

impl ServeOptions {
    const FLAGS: [&str; 6] = [
        "--token",
        "--token-file",
        "--tls-cert",
        "--tls-key",
        "--allow-host",
        "--http-path",
    ];

    /// Whether a network-only option was given.
    fn is_set(&self) -> bool {
        !self.tokens.is_empty()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || !self.allowed_hosts.is_empty()
            || self.http_path.is_some()
    }

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

    fn takes(arg: &str) -> bool {
        Self::FLAGS.contains(&arg.split_once('=').map_or(arg, |(flag, _)| flag))
    }

    /// Takes `arg` (`--flag VALUE` or `--flag=VALUE`).
    fn take(&mut self, arg: &str, args: &mut impl Iterator<Item = String>) -> Result<(), String> {
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, value.to_owned()),
            None => (
                arg,
                args.next().ok_or_else(|| format!("{arg} needs a value"))?,
            ),
        };
        match flag {
            "--token" => {
                if value.is_empty() {
                    return Err("--token needs a non-empty token".into());
                }
                let principal = format!("token-{}", self.tokens.len() + 1);
                self.tokens.push((value, principal));
            }
            "--token-file" => {
                let text = std::fs::read_to_string(&value)
                    .map_err(|e| format!("--token-file {value}: {e}"))?;
                let before = self.tokens.len();
                for line in text.lines().map(str::trim) {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let mut words = line.split_whitespace();
                    let token = words.next().unwrap_or_default().to_owned();
                    let principal = words
                        .next()
                        .map_or_else(|| format!("token-{}", self.tokens.len() + 1), str::to_owned);
                    self.tokens.push((token, principal));
                }
                if self.tokens.len() == before {
                    return Err(format!("--token-file {value}: no token"));
                }
            }
            "--tls-cert" => self.tls_cert = Some(value),
            "--allow-host" => self.allowed_hosts.push(value),
            "--http-path" => {
                if !value.starts_with('/') {
                    return Err(format!("--http-path {value}: a path starts with /"));
                }
                self.http_path = Some(value);
            }
            _ => self.tls_key = Some(value),
        }
        Ok(())
    }
}

/// The server the options name, bound to `listen`, and a sentence of
/// what it serves (address, path, TLS, how many tokens; never a token).
async fn bind(listen: &str, opts: ServeOptions) -> std::io::Result<(Server, String)> {
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
    let tokens = opts.tokens.len();
    if tokens > 0 {
        server = server.with_auth(mcpwire_tokio::BearerTokens::new(opts.tokens));
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
        if tokens > 0 {
            format!("{tokens} bearer token(s)")
        } else {
            "no authentication".to_owned()
        },
    );
    Ok((server, sentence))
}

async fn serve(
    listen: &str,
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
