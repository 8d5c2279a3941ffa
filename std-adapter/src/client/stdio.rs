//! The stdio binding's client on tokio ([`Client::stdio`](super::Client::stdio)):
//! the core's [`StdioEngine`] (every rule of the binding's client side:
//! the era probe and its fallback, request lines, matching answers,
//! timeouts, restarts and their budget, listen streams that outlive a
//! restart) on the one client dispatcher, its links a server's pipes:
//!
//! - a child process ([`Config::new`], [`ServerCommand`]): an absolute
//!   executable path, arguments, a working directory and an explicit
//!   environment (nothing of this process's environment is passed on
//!   unless asked; a token belongs in the environment, never in the
//!   arguments, which other users see in the process list). Its stderr
//!   goes to this process's stderr, each line after
//!   [`Config::stderr_prefix`]; so do the engine's notes (a restart, a
//!   pause). When the engine lets the child go (a crash, or
//!   [`Client::close`](super::Client::close)) its stdin closes; a child
//!   that does not exit within [`Config::close_wait`] gets SIGTERM, and
//!   SIGKILL after [`Config::term_wait`].
//! - a serial device ([`Config::serial`], [`SerialDevice`], Unix): a board
//!   that serves the stdio binding on its UART, opened raw at its line
//!   speed; it going away (EOF or an error on read) is a crash, and
//!   opening it again is the restart.

use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use mcpwire_core::mcp::client::era::{EraChoice, EraDiagnostics};
use mcpwire_core::mcp::client::stdio::{StdioClientConfig, StdioEngine, StdioEngineConfig};
use mcpwire_core::mcp::client::{LinkId, Negotiated};
use tokio::io::{AsyncRead, AsyncWrite, Join, ReadBuf};
use tokio::process::Child;
use tokio::task::JoinHandle;

pub use mcpwire_core::mcp::client::stdio::{MAX_RESTARTS, RestartPolicy};

mod command;
#[cfg(unix)]
pub(crate) mod serial;
pub(crate) mod stderr;

use super::dispatch::{self, Handle};
pub use super::era::EraInfo;
use super::link::{BoxIo, Connector, Opening};
use crate::store::HeapStore;
pub use command::ServerCommand;
#[cfg(unix)]
pub use serial::{DEFAULT_BAUD, SerialDevice};

/// Calls in flight at once (half of them, at most, listen streams).
pub const MAX_CALLS: usize = 64;

/// The engine: lines read into a `Vec` of `max_line_bytes`, calls' lines
/// in heap buffers.
type Engine = StdioEngine<Vec<u8>, HeapStore, MAX_CALLS>;

/// What speaks the stdio binding with the client.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A child process, over its stdin and stdout.
    Child(ServerCommand),
    /// A serial device running the stdio binding (a board's UART).
    #[cfg(unix)]
    Serial(SerialDevice),
}

/// Settings of a stdio client.
#[derive(Debug, Clone)]
pub struct Config {
    pub endpoint: Endpoint,
    /// A call's timeout when it names none (not `subscriptions/listen`).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// How long the era probe and `initialize` wait. Default 10 s.
    pub probe_timeout: Duration,
    /// Probe (default), or choose the era.
    pub era: EraChoice,
    /// The longest line taken from the server; a longer one is skipped
    /// and reported (and fails its call when its head names one). Default
    /// 4 MiB.
    pub max_line_bytes: usize,
    /// `io.modelcontextprotocol/clientCapabilities` (raw JSON object).
    pub client_capabilities: &'static str,
    /// When a server that stopped is started again (5 restarts per 30 s,
    /// from a 100 ms backoff doubling up to 5 s, by default).
    pub restart: RestartPolicy,
    /// While a new server starts, calls are refused at once with
    /// UNAVAILABLE and "the server is restarting (attempt N of M)" instead
    /// of waiting for it (each bounded by its timeout).
    pub refuse_while_restarting: bool,
    /// After closing the child's stdin, how long to wait for it to exit
    /// before SIGTERM. Default 2 s.
    pub close_wait: Duration,
    /// After SIGTERM, how long to wait before SIGKILL. Default 2 s.
    pub term_wait: Duration,
    /// Put before each line of the child's stderr and each note.
    pub stderr_prefix: String,
}

impl Config {
    /// A child process; its stderr lines are prefixed with its name.
    pub fn new(command: ServerCommand) -> Self {
        let name = command
            .program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::with(Endpoint::Child(command), name)
    }

    /// A serial device running the stdio binding.
    #[cfg(unix)]
    pub fn serial(device: SerialDevice) -> Self {
        let name = device.path.display().to_string();
        Self::with(Endpoint::Serial(device), name)
    }

    fn with(endpoint: Endpoint, name: String) -> Self {
        Self {
            endpoint,
            request_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(10),
            era: EraChoice::Probe,
            max_line_bytes: 4 << 20,
            client_capabilities: "{}",
            restart: RestartPolicy::default(),
            refuse_while_restarting: false,
            close_wait: Duration::from_secs(2),
            term_wait: Duration::from_secs(2),
            stderr_prefix: format!("[{name}] "),
        }
    }

    /// Checks what can be checked before a start: a child's executable is
    /// an absolute path.
    pub(crate) fn check(&self) -> Result<(), String> {
        match &self.endpoint {
            Endpoint::Child(c) if !c.program.is_absolute() => Err(format!(
                "the server's executable must be an absolute path, not {}",
                c.program.display()
            )),
            _ => Ok(()),
        }
    }

    /// Starts the engine's task; the stops of its children (or the
    /// device's closes) are told to `stops`.
    pub(crate) fn spawn(&self, stops: Stops) -> Handle {
        let engine = Engine::new(
            StdioEngineConfig {
                client: StdioClientConfig {
                    max_line_bytes: self.max_line_bytes,
                    request_timeout: self.request_timeout,
                    probe_timeout: self.probe_timeout,
                    era: self.era,
                    client_capabilities: self.client_capabilities,
                    ..StdioClientConfig::default()
                },
                restart: self.restart,
                refuse_while_restarting: self.refuse_while_restarting,
            },
            vec![0; self.max_line_bytes],
            // A call's line: its message and the `_meta` merged in.
            HeapStore::new(self.max_line_bytes.saturating_add(4096)),
            crate::clock::now(),
        );
        let connector = StdioConnector {
            endpoint: self.endpoint.clone(),
            prefix: self.stderr_prefix.clone(),
            close_wait: self.close_wait,
            term_wait: self.term_wait,
            stops,
        };
        dispatch::spawn(Box::new(engine), connector)
    }
}

/// The era as a [`Client`](super::Client) reports it.
pub(crate) fn era_info(d: &EraDiagnostics) -> EraInfo {
    EraInfo {
        era: d.era.unwrap_or(mcpwire_core::mcp::client::era::Era::Modern),
        version: d.version().unwrap_or_default().to_owned(),
        requested: d.requested.to_owned(),
        server_versions: d.server_versions().map(str::to_owned),
        fallback: d.fallback.then(|| d.reason.unwrap_or("").to_owned()),
        probe_error: d.probe_error,
        restarted_for_fallback: d.restarted,
    }
}

/// How a stdio server ended at [`Client::close`](super::Client::close)
/// (or an older-era HTTP server's session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It exited after its stdin closed.
    Exited(Option<i32>),
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
    /// No child was running.
    NotRunning,
    /// The HTTP session was closed (`DELETE` for a 2025 session, the
    /// event stream of the 2024 shape).
    SessionClosed,
    /// The serial device was closed.
    DeviceClosed,
}

/// How the last server ended, once it did: the task that stops it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stops(Arc<Mutex<Option<JoinHandle<Stopped>>>>);

impl Stops {
    fn set(&self, task: JoinHandle<Stopped>) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some(task);
        }
    }

    /// How the last server ended (waiting for its stop to finish).
    pub(crate) async fn last(&self) -> Stopped {
        let task = self.0.lock().ok().and_then(|mut t| t.take());
        match task {
            Some(task) => task.await.unwrap_or(Stopped::NotRunning),
            None => Stopped::NotRunning,
        }
    }
}

/// Starts the children (or opens the device) the engine asks for.
struct StdioConnector {
    endpoint: Endpoint,
    prefix: String,
    close_wait: Duration,
    term_wait: Duration,
    stops: Stops,
}

impl Connector for StdioConnector {
    fn connect(&self, _: LinkId) -> Opening {
        let opened = match &self.endpoint {
            Endpoint::Child(command) => self.launch(command),
            #[cfg(unix)]
            Endpoint::Serial(device) => serial::open(device)
                .map(|(reader, writer)| {
                    Box::new(ServerIo {
                        io: Some(tokio::io::join(
                            Box::new(reader) as Box<dyn AsyncRead + Unpin + Send>,
                            Box::new(writer) as Box<dyn AsyncWrite + Unpin + Send>,
                        )),
                        child: None,
                        eof: false,
                        stop: self.stop_plan(),
                    }) as BoxIo
                })
                .map_err(io::Error::other),
        };
        Box::pin(std::future::ready(
            opened.map(|io| (io, Negotiated::Nothing)),
        ))
    }

    fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Child(c) => c.program.display().to_string(),
            #[cfg(unix)]
            Endpoint::Serial(d) => d.path.display().to_string(),
        }
    }

    fn note(&self, text: &str) {
        eprintln!("{}{text}", self.prefix);
    }
}

impl StdioConnector {
    fn stop_plan(&self) -> StopPlan {
        StopPlan {
            close_wait: self.close_wait,
            term_wait: self.term_wait,
            prefix: self.prefix.clone(),
            stops: self.stops.clone(),
        }
    }

    /// Starts `c` with its pipes; its stderr goes to ours, line by line.
    fn launch(&self, c: &ServerCommand) -> io::Result<BoxIo> {
        let mut cmd = tokio::process::Command::new(&c.program);
        cmd.args(&c.args);
        if !c.inherit_env {
            cmd.env_clear();
            for key in &c.pass_env {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        cmd.envs(c.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &c.current_dir {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("the child's pipes are missing"));
        };
        tokio::spawn(stderr::forward_stderr(stderr, self.prefix.clone()));
        Ok(Box::new(ServerIo {
            io: Some(tokio::io::join(
                Box::new(stdout) as Box<dyn AsyncRead + Unpin + Send>,
                Box::new(stdin) as Box<dyn AsyncWrite + Unpin + Send>,
            )),
            child: Some(child),
            eof: false,
            stop: self.stop_plan(),
        }))
    }
}

/// How a server is stopped once the engine lets it go.
struct StopPlan {
    close_wait: Duration,
    term_wait: Duration,
    prefix: String,
    stops: Stops,
}

type Pipes = Join<Box<dyn AsyncRead + Unpin + Send>, Box<dyn AsyncWrite + Unpin + Send>>;

/// A server's pipes as one link (its stdout read, its stdin written), and
/// the child behind them: dropped (the engine let it go), its stdin
/// closes and the child is stopped in a task of its own.
struct ServerIo {
    io: Option<Pipes>,
    child: Option<Child>,
    /// Its stdout ended (it exited or crashed) before the engine let go.
    eof: bool,
    stop: StopPlan,
}

impl AsyncRead for ServerIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let Some(io) = self.io.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let before = buf.filled().len();
        let r = Pin::new(io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() == before
            || matches!(r, Poll::Ready(Err(_)))
        {
            self.eof = true;
        }
        r
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.io.as_mut() {
            Some(io) => Pin::new(io).poll_write(cx, data),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.io.as_mut() {
            Some(io) => Pin::new(io).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.io.as_mut() {
            Some(io) => Pin::new(io).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for ServerIo {
    fn drop(&mut self) {
        // The pipes close first: the child reads the end of its stdin.
        drop(self.io.take());
        let child = self.child.take();
        let plan = StopPlan {
            close_wait: self.stop.close_wait,
            term_wait: self.stop.term_wait,
            prefix: std::mem::take(&mut self.stop.prefix),
            stops: self.stop.stops.clone(),
        };
        let crashed = self.eof;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime left: the child is killed as it is dropped.
            return;
        };
        let task = runtime.spawn(async move {
            let Some(child) = child else {
                if crashed {
                    eprintln!("{}the serial device closed", plan.prefix);
                }
                return Stopped::DeviceClosed;
            };
            let how = stop(child, plan.close_wait, plan.term_wait).await;
            if crashed {
                let how = match how {
                    Stopped::Exited(Some(code)) => format!("exit status: {code}"),
                    Stopped::Exited(None) => "killed by a signal".to_owned(),
                    _ => "it did not exit: stopped".to_owned(),
                };
                eprintln!("{}the server's stdout closed ({how})", plan.prefix);
            }
            how
        });
        self.stop.stops.set(task);
    }
}

/// Waits `close_wait` for the child (its stdin closed) to exit, then
/// SIGTERM, waits `term_wait`, then SIGKILL.
async fn stop(mut child: Child, close_wait: Duration, term_wait: Duration) -> Stopped {
    if let Ok(Ok(s)) = tokio::time::timeout(close_wait, child.wait()).await {
        return Stopped::Exited(s.code());
    }
    if let Some(pid) = child.id() {
        // std has no SIGTERM and this crate has no unsafe: kill(1) sends it.
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if let Ok(Ok(_)) = tokio::time::timeout(term_wait, child.wait()).await {
            return Stopped::Terminated;
        }
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    Stopped::Killed
}
