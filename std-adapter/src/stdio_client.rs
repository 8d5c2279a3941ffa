//! The client side of the stdio binding on tokio (MCP 2026-07-28 §6,
//! §8.3): a [`StdioChannel`] launches an MCP server as its child process,
//! speaks newline-delimited JSON-RPC over the child's stdin and stdout, and
//! supervises it. The binding's rules are the core's sans-IO
//! [`StdioClient`](mcpwire_core::mcp::client::stdio::StdioClient); this
//! module owns the process.
//!
//! - Launch ([`ServerCommand`]): an absolute executable path, arguments, a
//!   working directory and an explicit environment — nothing of this
//!   process's environment is passed on unless asked
//!   ([`ServerCommand::inherit_env`], [`ServerCommand::pass_env`]); a token
//!   belongs in the environment, never in the arguments, which other users
//!   see in the process list.
//! - A serial device instead of a child ([`StdioChannelConfig::serial`],
//!   [`SerialDevice`], Unix): a board that serves the stdio binding on its
//!   UART, opened raw at its line speed; it going away (EOF or an error on
//!   read) is a crash, and reopening it is the restart.
//! - The child's stderr goes to this process's stderr, each line prefixed
//!   with [`StdioChannelConfig::stderr_prefix`]; so do the client's own
//!   reports (a line on stdout that is not JSON-RPC, with its first octets
//!   and the likely cause; a line over the limit).
//! - The era: [`StdioChannel::connect`] returns after the handshake (the
//!   `server/discover` probe, or its fallback to `initialize`);
//!   [`StdioChannel::era`] says which era, which versions and whether a
//!   fallback (or a restart for it) happened.
//! - A crash (the child's stdout closes): every call in flight fails with
//!   UNAVAILABLE and a message that says so (never an invented result);
//!   the child is started again after a backoff (doubling from
//!   [`StdioChannelConfig::restart_backoff`] up to
//!   [`StdioChannelConfig::max_backoff`]), at most
//!   [`StdioChannelConfig::max_restarts`] times within
//!   [`StdioChannelConfig::restart_window`] (5 per 30 s): a crash past that
//!   budget pauses the restarts until it refills, every call failing at
//!   once meanwhile with the reason and the time left, so one caller that
//!   crashes the child again and again locks the others out for a window,
//!   not for good; a child that stays up 10 s makes the budget whole. A
//!   child that never gets ready makes the channel give up instead.
//!   While it restarts (from the crash until the new child is ready), new
//!   calls wait (bounded by their own timeout) and start once the new
//!   child is ready, or, with
//!   [`StdioChannelConfig::refuse_while_restarting`], fail at once with
//!   UNAVAILABLE and "the server is restarting (attempt N of M)";
//!   `subscriptions/listen` calls are sent again to the new child (the
//!   stream goes on; the server keeps no state).
//! - A call past its timeout fails with DEADLINE_EXCEEDED and the child
//!   gets `notifications/cancelled`; so does a call whose [`StdioCall`] is
//!   dropped before its response.
//! - [`StdioChannel::shutdown`]: closes the child's stdin, waits
//!   [`StdioChannelConfig::close_wait`], then SIGTERM and waits
//!   [`StdioChannelConfig::term_wait`], then SIGKILL.
//!
//! The typed helpers are those of [`Channel`](crate::Channel):
//! [`StdioChannel::list_tools`], [`StdioChannel::call_tool`],
//! [`StdioChannel::call_tool_with_progress`]; [`StdioChannel::request`] and
//! [`StdioChannel::call`] take any method as JSON.

pub(crate) mod http_link;
mod lines;
mod supervisor;
mod typed;

#[cfg(unix)]
pub use crate::client::stdio::serial::{DEFAULT_BAUD, SerialDevice};
pub use http_link::HttpLinkConfig;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::stdio::{Era, EraChoice};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::client::{CallDiagnostics, CallError, StreamMessage};
use supervisor::{Command, Msg};

/// How to launch the server.
#[derive(Clone)]
pub struct ServerCommand {
    /// The executable: an absolute path.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The child's environment: only these, plus what `pass_env` names or
    /// everything with `inherit_env`.
    pub env: Vec<(OsString, OsString)>,
    /// Variables of this process passed on by name (when set).
    pub pass_env: Vec<OsString>,
    /// Pass this process's whole environment on (off by default).
    pub inherit_env: bool,
    /// The child's working directory (this process's when `None`).
    pub current_dir: Option<PathBuf>,
}

impl fmt::Debug for ServerCommand {
    // Environment values may be secrets: their names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("pass_env", &self.pass_env)
            .field("inherit_env", &self.inherit_env)
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

impl ServerCommand {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            pass_env: Vec::new(),
            inherit_env: false,
            current_dir: None,
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn pass_env(mut self, key: impl Into<OsString>) -> Self {
        self.pass_env.push(key.into());
        self
    }

    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }
}

/// The server a [`StdioChannel`] speaks lines of JSON-RPC with.
#[derive(Debug, Clone)]
pub enum LineServer {
    /// A child process, over its stdin and stdout (the stdio binding).
    Command(ServerCommand),
    /// An older-era HTTP server (MCP 2026-07-28 §13): the 2025 Streamable
    /// HTTP shape with sessions, or the 2024 HTTP+SSE shape, told apart by
    /// the answer to `initialize`. Always the legacy lifecycle: a modern
    /// server is reached with the HTTP channel.
    LegacyHttp(HttpLinkConfig),
    /// A serial device running the stdio binding (a board's UART): its
    /// octets instead of a child's stdout and stdin; opened again after it
    /// went away, as a child is started again after a crash.
    #[cfg(unix)]
    Serial(SerialDevice),
}

/// Settings of a [`StdioChannel`].
#[derive(Debug, Clone)]
pub struct StdioChannelConfig {
    pub server: LineServer,
    /// A call's timeout when it names none (not `subscriptions/listen`).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// How long the era probe and `initialize` wait. Default 10 s.
    pub probe_timeout: Duration,
    /// Probe (default), or force an era.
    pub era: EraChoice,
    /// The longest line taken from the child; a longer one is skipped and
    /// reported (and fails its call when its head names one). Default 4 MiB.
    pub max_line_bytes: usize,
    /// `io.modelcontextprotocol/clientCapabilities` (raw JSON object).
    pub client_capabilities: &'static str,
    /// The first wait before a restart. Default 100 ms.
    pub restart_backoff: Duration,
    /// The longest wait before a restart. Default 5 s.
    pub max_backoff: Duration,
    /// Restarts within [`restart_window`](Self::restart_window): the
    /// budget. A crash past it pauses the restarts until the oldest of
    /// them leaves the window (calls are refused meanwhile, each saying
    /// so), then the child is started again; a child that stays up 10 s
    /// makes the budget whole again. Before the first child is ready a
    /// budget spent is a start that failed: the channel gives up. 0 turns
    /// restarts off (the first crash ends the channel). Default 5.
    pub max_restarts: u32,
    /// The window of the restart budget. Default 30 s.
    pub restart_window: Duration,
    /// While the server restarts (from its crash until the new child is
    /// ready), a new call fails at once with UNAVAILABLE and "the server
    /// is restarting (attempt N of M)", and so do calls that waited for a
    /// turn; off (the default), they wait for the new child, each bounded
    /// by its timeout. A bridge refuses: its host learns at once and
    /// chooses when to try again.
    pub refuse_while_restarting: bool,
    /// After closing the child's stdin, how long to wait for it to exit
    /// before SIGTERM. Default 2 s.
    pub close_wait: Duration,
    /// After SIGTERM, how long to wait before SIGKILL. Default 2 s.
    pub term_wait: Duration,
    /// Put before each line of the child's stderr and each report.
    pub stderr_prefix: String,
}

impl StdioChannelConfig {
    pub fn new(command: ServerCommand) -> Self {
        let name = command
            .program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::with_server(LineServer::Command(command), name)
    }

    /// Settings for an older-era HTTP server at `link.url`; the era is the
    /// legacy lifecycle (no probe: the HTTP channel's probe chose it).
    pub fn legacy_http(link: HttpLinkConfig) -> Self {
        let name = link.url.clone();
        let mut config = Self::with_server(LineServer::LegacyHttp(link), name);
        config.era = EraChoice::Legacy;
        config
    }

    /// Settings for a serial device running the stdio binding.
    #[cfg(unix)]
    pub fn serial(device: SerialDevice) -> Self {
        let name = device.path.display().to_string();
        Self::with_server(LineServer::Serial(device), name)
    }

    fn with_server(server: LineServer, name: String) -> Self {
        Self {
            server,
            request_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(10),
            era: EraChoice::Probe,
            max_line_bytes: 4 << 20,
            client_capabilities: "{}",
            restart_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_restarts: 5,
            restart_window: Duration::from_secs(30),
            refuse_while_restarting: false,
            close_wait: Duration::from_secs(2),
            term_wait: Duration::from_secs(2),
            stderr_prefix: format!("[{name}] "),
        }
    }
}

/// The era the channel speaks with its server (§8.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraInfo {
    pub era: Era,
    /// The protocol version in use.
    pub version: String,
    /// The modern version the probe asked for.
    pub requested: String,
    /// The versions the server named (raw JSON array), when it named any.
    pub server_versions: Option<String>,
    /// The client fell back to the 2025-11-25 lifecycle, and why.
    pub fallback: Option<String>,
    /// The JSON-RPC code the probe was answered with, when an error.
    pub probe_error: Option<i64>,
    /// The child was restarted before `initialize` (the probe left it
    /// unusable).
    pub restarted_for_fallback: bool,
}

impl fmt::Display for EraInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let era = self.era.describe();
        write!(
            f,
            "era {era}, version {}, requested {}, server versions {}",
            self.version,
            self.requested,
            self.server_versions.as_deref().unwrap_or("(none named)")
        )?;
        match &self.fallback {
            Some(why) => write!(f, ", fallback: {why}")?,
            None => write!(f, ", no fallback")?,
        }
        if let Some(code) = self.probe_error {
            write!(f, " (server/discover answered {code})")?;
        }
        if self.restarted_for_fallback {
            write!(f, ", child restarted before initialize")?;
        }
        Ok(())
    }
}

/// How the child ended at [`StdioChannel::shutdown`].
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
    /// The HTTP session was closed (`DELETE` for a 2025 session).
    SessionClosed,
    /// The serial device was closed.
    DeviceClosed,
}

/// A supervised stdio server and the calls to it. Cheap to clone: clones
/// share the child.
#[derive(Clone)]
pub struct StdioChannel {
    inner: Arc<Inner>,
}

struct Inner {
    tx: mpsc::UnboundedSender<Command>,
    era: Arc<Mutex<Option<EraInfo>>>,
    restarts: Arc<AtomicU64>,
    request_timeout: Duration,
    next_key: AtomicU64,
    next_id: AtomicU64,
}

impl fmt::Debug for StdioChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioChannel")
            .field("era", &self.era())
            .finish_non_exhaustive()
    }
}

pub(crate) fn error(status: Code, message: impl Into<String>) -> CallError {
    CallError {
        status,
        message: message.into(),
        diagnostics: CallDiagnostics::default(),
        rpc: None,
        tool_error: None,
    }
}

impl StdioChannel {
    /// Launches the server and runs the handshake; returns once calls can
    /// start (or the launch or the handshake failed).
    pub async fn connect(config: StdioChannelConfig) -> Result<Self, CallError> {
        if let LineServer::Command(command) = &config.server
            && !command.program.is_absolute()
        {
            return Err(error(
                Code::InvalidArgument,
                format!(
                    "the server's executable must be an absolute path, not {}",
                    command.program.display()
                ),
            ));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let era = Arc::new(Mutex::new(None));
        let restarts = Arc::new(AtomicU64::new(0));
        let request_timeout = config.request_timeout;
        supervisor::spawn(
            config,
            rx,
            ready_tx,
            Arc::clone(&era),
            Arc::clone(&restarts),
        )?;
        ready_rx
            .await
            .unwrap_or_else(|_| Err(error(Code::Unavailable, "the supervisor ended")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                tx,
                era,
                restarts,
                request_timeout,
                next_key: AtomicU64::new(1),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The era chosen, its versions and whether a fallback happened.
    pub fn era(&self) -> Option<EraInfo> {
        self.inner.era.lock().ok()?.clone()
    }

    /// How many times the child was started again after a crash.
    pub fn restarts(&self) -> u64 {
        self.inner.restarts.load(Ordering::Relaxed)
    }

    /// Sends `method` with `params` (an `id` is added; in the modern era
    /// the client adds `_meta`) and waits for the response, skipping
    /// notifications.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await?
            .response()
            .await
    }

    /// Starts a call of one JSON-RPC request (an `id` is added when
    /// absent). Its timeout is the channel's.
    pub async fn call(&self, request: Value) -> Result<StdioCall, CallError> {
        self.call_with_timeout(request, None).await
    }

    /// [`StdioChannel::call`] with its own timeout.
    pub async fn call_with_timeout(
        &self,
        mut request: Value,
        timeout: Option<Duration>,
    ) -> Result<StdioCall, CallError> {
        let invalid = |m: &str| {
            let mut e = error(Code::InvalidArgument, m);
            e.diagnostics.rpc_code = Some(mcpwire_core::mcp::error::INVALID_REQUEST);
            e
        };
        let Some(obj) = request.as_object_mut() else {
            return Err(invalid("a request is a JSON object"));
        };
        let method = obj
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid("a request needs a method"))?;
        obj.entry("jsonrpc").or_insert_with(|| json!("2.0"));
        if !obj.contains_key("id") {
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            obj.insert("id".into(), json!(id));
        }
        let listen = method == "subscriptions/listen";
        let timeout = match (timeout, listen) {
            (None, true) => None,
            (t, _) => Some(t.unwrap_or(self.inner.request_timeout)),
        };
        let body = serde_json::to_vec(&request).map_err(|e| invalid(&e.to_string()))?;
        let key = self.inner.next_key.fetch_add(1, Ordering::Relaxed);
        let (etx, erx) = mpsc::unbounded_channel();
        self.inner
            .tx
            .send(Command::Start {
                key,
                body,
                timeout,
                listen,
                events: etx,
            })
            .map_err(|_| error(Code::Unavailable, "the stdio channel is shut down"))?;
        Ok(StdioCall {
            tx: self.inner.tx.clone(),
            key,
            id: request.get("id").cloned().unwrap_or(Value::Null),
            // The supervisor fails the call at its deadline; this one is
            // the backstop for a call still waiting for a restart.
            deadline: timeout.map(|t| tokio::time::Instant::now() + t + Duration::from_millis(250)),
            events: erx,
            finished: false,
        })
    }

    /// Stops the child: closes its stdin, waits, then SIGTERM, waits, then
    /// SIGKILL (the bounds of the configuration). Calls in flight fail.
    pub async fn shutdown(&self) -> Stopped {
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Command::Shutdown { done: tx }).is_err() {
            return Stopped::NotRunning;
        }
        rx.await.unwrap_or(Stopped::NotRunning)
    }
}

/// A call in flight: [`StdioCall::next`] gives its notifications as they
/// arrive, then the response. Dropping it before the end cancels it
/// (`notifications/cancelled`).
#[derive(Debug)]
pub struct StdioCall {
    tx: mpsc::UnboundedSender<Command>,
    key: u64,
    id: Value,
    deadline: Option<tokio::time::Instant>,
    events: mpsc::UnboundedReceiver<Msg>,
    finished: bool,
}

impl StdioCall {
    /// The request's id.
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// The next message: notifications, then the response (a result or
    /// the server's JSON-RPC error); `Ok(None)` after it. A failure of
    /// the transport (a crash, a timeout) is an `Err`.
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        if self.finished {
            return Ok(None);
        }
        let msg = match self.deadline {
            Some(d) => match tokio::time::timeout_at(d, self.events.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    self.cancel();
                    return Err(error(Code::DeadlineExceeded, "the request timed out"));
                }
            },
            None => self.events.recv().await,
        };
        let parse = |bytes: &[u8]| {
            serde_json::from_slice::<Value>(bytes)
                .map_err(|_| error(Code::Internal, "a message is not JSON"))
        };
        match msg {
            Some(Msg::Notification(n)) => Ok(Some(StreamMessage::Notification(parse(&n)?))),
            Some(Msg::Response(r)) => {
                self.finished = true;
                Ok(Some(StreamMessage::Response(parse(&r)?)))
            }
            Some(Msg::Error(e)) => {
                self.finished = true;
                Err(e)
            }
            None => {
                self.finished = true;
                Err(error(Code::Unavailable, "the stdio channel is shut down"))
            }
        }
    }

    /// Waits for the response, skipping notifications.
    pub async fn response(mut self) -> Result<Value, CallError> {
        loop {
            match self.next().await? {
                Some(StreamMessage::Response(r)) => return Ok(r),
                Some(StreamMessage::Notification(_)) => {}
                None => return Err(error(Code::Internal, "the call ended without a response")),
            }
        }
    }

    fn cancel(&mut self) {
        if !self.finished {
            self.finished = true;
            let _ = self.tx.send(Command::Cancel { key: self.key });
        }
    }
}

impl Drop for StdioCall {
    fn drop(&mut self) {
        self.cancel();
    }
}
