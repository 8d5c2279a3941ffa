//! The task that owns the child process: it launches it, feeds the core
//! client its stdout, writes the client's lines to its stdin, forwards its
//! stderr, routes each call's messages, and restarts it after a crash.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::CallId;
use mcpwire_core::mcp::client::stdio::{
    LOCAL_CLOSED, LOCAL_TIMEOUT, StdioClient, StdioClientConfig, StdioEvent, StdioStartError,
};
use mcpwire_core::time::Instant as CoreInstant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::http_link;
use super::lines::{LineReceiver, LineSender, lines};
use super::{EraInfo, LineServer, StdioChannelConfig, Stopped, error};
use crate::client::{CallError, JsonRpcError};
use mcpwire_core::mcp::error::UNSUPPORTED_PROTOCOL_VERSION;

/// Calls in flight at a time; more wait their turn.
const CALLS: usize = 64;
/// Listen streams open at a time: half the calls, so that streams that
/// last never leave the calls without a turn; one more is refused.
const MAX_LISTENS: usize = CALLS / 2;
/// A child that ran this long before it crashed has stayed up: the
/// restart budget is whole again, and the backoff back at its start.
const STABLE: Duration = Duration::from_secs(10);

pub(super) enum Command {
    Start {
        key: u64,
        body: Vec<u8>,
        timeout: Option<Duration>,
        listen: bool,
        events: mpsc::UnboundedSender<Msg>,
    },
    Cancel {
        key: u64,
    },
    Shutdown {
        done: oneshot::Sender<Stopped>,
    },
}

#[derive(Debug)]
pub(super) enum Msg {
    Notification(Vec<u8>),
    /// A result or the server's error response.
    Response(Vec<u8>),
    Error(CallError),
}

struct Entry {
    call: Option<CallId>,
    body: Vec<u8>,
    timeout: Option<Duration>,
    listen: bool,
    events: mpsc::UnboundedSender<Msg>,
    /// A listen stream sent again to each new child.
    reopen: bool,
}

struct Running {
    /// The child process; none for an HTTP link.
    child: Option<Child>,
    /// An HTTP link's task, why it ended and its shape.
    link: Option<LinkState>,
    /// Lines for the child's stdin (or the link), written by their own
    /// task so that a child that stops reading never stops this one
    /// reading its stdout; dropping it closes the child's stdin.
    stdin: Option<LineSender>,
    stdout: Box<dyn AsyncRead + Unpin + Send>,
    started: Instant,
}

impl Running {
    /// A server over a byte pipe: `child`'s stdin and stdout, or a serial
    /// device's two halves (no child, no link: closed when dropped). The
    /// lines go out through their own writer task.
    fn piped(
        child: Option<Child>,
        stdin: impl AsyncWrite + Unpin + Send + 'static,
        stdout: impl AsyncRead + Unpin + Send + 'static,
    ) -> Self {
        let (tx, rx) = lines();
        tokio::spawn(write_lines(stdin, rx));
        Self {
            child,
            link: None,
            stdin: Some(tx),
            stdout: Box::new(stdout),
            started: Instant::now(),
        }
    }
}

struct LinkState {
    task: tokio::task::JoinHandle<()>,
    fatal: Arc<Mutex<Option<String>>>,
    http_sse: Arc<AtomicBool>,
}

type Core = StdioClient<Vec<u8>, CALLS>;

struct Supervisor {
    config: StdioChannelConfig,
    core: Core,
    epoch: Instant,
    child: Option<Running>,
    calls: HashMap<u64, Entry>,
    by_call: HashMap<CallId, u64>,
    queued: VecDeque<u64>,
    ready: bool,
    failed: Option<String>,
    /// A restart is owed, after this wait.
    restart: Option<Duration>,
    /// The next child is started at this instant (the backoff).
    restart_at: Option<Instant>,
    /// From a crash until the next child is ready: the start under way
    /// (the last of `recent`).
    restarting: bool,
    /// The restarts within the budget's window
    /// ([`StdioChannelConfig::restart_window`]), oldest first: at most
    /// `max_restarts` of them.
    recent: VecDeque<Instant>,
    /// The budget is spent: no child until then, and every call is
    /// refused meanwhile (the last start is the pause's end).
    paused_until: Option<Instant>,
    /// A child was ready once: before that, a spent budget is a start
    /// that failed (the channel gives up), not a pause.
    was_ready: bool,
    ready_tx: Option<oneshot::Sender<Result<(), CallError>>>,
    era: Arc<Mutex<Option<EraInfo>>>,
    restarts: Arc<AtomicU64>,
    /// The server's lines that were skipped (too long, not JSON-RPC, for
    /// no call): each kind is logged at its first few and then at every
    /// power of two, so a server that floods them does not flood stderr.
    skipped: [u64; 3],
}

/// The kinds of [`Supervisor::skipped`] lines.
const TOO_LONG: usize = 0;
const BAD_LINE: usize = 1;
const UNMATCHED: usize = 2;

pub(super) fn spawn(
    config: StdioChannelConfig,
    rx: mpsc::UnboundedReceiver<Command>,
    ready_tx: oneshot::Sender<Result<(), CallError>>,
    era: Arc<Mutex<Option<EraInfo>>>,
    restarts: Arc<AtomicU64>,
) -> Result<(), CallError> {
    let core_config = StdioClientConfig {
        max_line_bytes: config.max_line_bytes,
        request_timeout: config.request_timeout,
        probe_timeout: config.probe_timeout,
        era: match config.server {
            LineServer::LegacyHttp(_) => mcpwire_core::mcp::client::stdio::EraChoice::Legacy,
            _ => config.era,
        },
        client_capabilities: config.client_capabilities,
        ..StdioClientConfig::default()
    };
    let epoch = Instant::now();
    let core = StdioClient::new(
        core_config,
        vec![0; config.max_line_bytes],
        CoreInstant::ZERO,
    );
    let mut s = Supervisor {
        config,
        core,
        epoch,
        child: None,
        calls: HashMap::new(),
        by_call: HashMap::new(),
        queued: VecDeque::new(),
        ready: false,
        failed: None,
        restart: None,
        restart_at: None,
        restarting: false,
        recent: VecDeque::new(),
        paused_until: None,
        was_ready: false,
        ready_tx: Some(ready_tx),
        skipped: [0; 3],
        era,
        restarts,
    };
    let child = s.launch().map_err(|e| error(Code::Unavailable, e))?;
    s.child = Some(child);
    tokio::spawn(s.run(rx));
    Ok(())
}

/// What woke the loop.
enum Wake {
    Command(Option<Command>),
    Read(std::io::Result<usize>),
    Timer,
    /// The backoff before a restart ended.
    Relaunch,
    /// The server took a line of the client's.
    Drained,
}

impl Supervisor {
    fn now(&self) -> CoreInstant {
        CoreInstant::from_micros(
            u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX),
        )
    }

    /// Counts a skipped line of `kind`; `Some` (what to add to its log
    /// line) when it is to be logged: the first 8, then the 16th, 32nd...
    fn skipped(&mut self, kind: usize) -> Option<String> {
        let n = self.skipped.get_mut(kind)?;
        *n += 1;
        match *n {
            1..=7 => Some(String::new()),
            8 => Some(" (the 8th; from now on only the 16th, 32nd... are logged)".into()),
            n if n.is_power_of_two() => Some(format!(" (the {n}th)")),
            _ => None,
        }
    }

    fn log(&self, text: &str) {
        eprintln!("{}{text}", self.config.stderr_prefix);
    }

    fn launch(&self) -> Result<Running, String> {
        let c = match &self.config.server {
            LineServer::Command(c) => c,
            LineServer::LegacyHttp(link) => {
                let l = http_link::launch(
                    link,
                    self.config.max_line_bytes,
                    &self.config.stderr_prefix,
                )?;
                return Ok(Running {
                    child: None,
                    link: Some(LinkState {
                        task: l.task,
                        fatal: l.fatal,
                        http_sse: l.http_sse,
                    }),
                    stdin: Some(l.lines),
                    stdout: Box::new(l.messages),
                    started: Instant::now(),
                });
            }
            #[cfg(unix)]
            LineServer::Serial(device) => {
                let (reader, writer) = crate::client::stdio::serial::open(device)?;
                return Ok(Running::piped(None, writer, reader));
            }
        };
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
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", c.program.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes are missing".into());
        };
        let prefix = self.config.stderr_prefix.clone();
        tokio::spawn(crate::client::stdio::stderr::forward_stderr(stderr, prefix));
        Ok(Running::piped(Some(child), stdin, stdout))
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        let now = self.now();
        self.core.begin(now);
        let mut buf = vec![0u8; 64 << 10];
        loop {
            self.pump().await;
            if let Some(wait) = self.restart.take() {
                self.schedule_restart(wait).await;
                continue;
            }
            let timer = self
                .core
                .poll_timeout()
                .map(|t| self.epoch + Duration::from_micros(t.as_micros()));
            // The backoff is a timer of this loop, not a sleep: commands
            // (new calls refused, cancels) are read while it runs.
            let backoff = self.restart_at;
            // Calls wait (for the child to read, or for a turn): each line
            // the child takes wakes the loop (a take since the last look
            // left a permit, so none is missed).
            let backlog = (!self.queued.is_empty())
                .then(|| self.child.as_ref().and_then(|r| r.stdin.as_ref()))
                .flatten()
                .map(LineSender::watch);
            let wake = {
                let drained = async {
                    match &backlog {
                        Some(w) => w.taken().await,
                        None => std::future::pending().await,
                    }
                };
                let read = async {
                    match self.child.as_mut() {
                        Some(r) => r.stdout.read(&mut buf).await,
                        None => std::future::pending().await,
                    }
                };
                let sleep = async {
                    match timer {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                };
                let backoff = async {
                    match backoff {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    c = rx.recv() => Wake::Command(c),
                    r = read => Wake::Read(r),
                    () = sleep => Wake::Timer,
                    () = backoff => Wake::Relaunch,
                    () = drained => Wake::Drained,
                }
            };
            match wake {
                Wake::Command(None) => {
                    self.stop().await;
                    return;
                }
                Wake::Command(Some(Command::Shutdown { done })) => {
                    let how = self.stop().await;
                    self.fail_everything("the stdio channel is shut down");
                    let _ = done.send(how);
                    return;
                }
                Wake::Command(Some(c)) => self.command(c),
                Wake::Read(Ok(n)) if n > 0 => {
                    let now = self.now();
                    let mut input = &buf[..n];
                    while !input.is_empty() {
                        let used = self.core.recv(input, now);
                        input = &input[used..];
                        self.events();
                    }
                }
                Wake::Read(_) => self.crashed().await,
                Wake::Timer => {
                    let now = self.now();
                    self.core.handle_timeout(now);
                }
                Wake::Relaunch => {
                    self.restart_at = None;
                    if self.paused_until.take().is_some() {
                        // The pause is over: a start of the refilled budget.
                        self.restart = Some(Duration::ZERO);
                    } else {
                        self.relaunch();
                    }
                }
                // The server read a line: the calls that wait may start.
                Wake::Drained => {}
            }
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Start {
                key,
                body,
                timeout,
                listen,
                events,
            } => {
                if let Some(why) = &self.failed {
                    let _ = events.send(Msg::Error(error(Code::Unavailable, why.clone())));
                    return;
                }
                if let Some(until) = self.paused_until {
                    let _ = events.send(Msg::Error(self.paused_error(until)));
                    return;
                }
                if self.restarting && self.config.refuse_while_restarting {
                    let _ = events.send(Msg::Error(self.restarting_error()));
                    return;
                }
                self.calls.insert(
                    key,
                    Entry {
                        call: None,
                        body,
                        timeout,
                        listen,
                        events,
                        reopen: false,
                    },
                );
                self.queued.push_back(key);
            }
            Command::Cancel { key } => {
                if let Some(e) = self.calls.remove(&key) {
                    self.queued.retain(|&k| k != key);
                    if let Some(call) = e.call {
                        self.by_call.remove(&call);
                        self.core.cancel(call);
                    }
                }
            }
            Command::Shutdown { .. } => {}
        }
    }

    /// Whether the lines that wait for the server to read them reach
    /// `max_line_bytes` (a child that stops reading its stdin): new calls
    /// wait until it reads.
    fn backlogged(&self) -> bool {
        self.child
            .as_ref()
            .and_then(|r| r.stdin.as_ref())
            .is_some_and(|s| s.waiting() >= self.config.max_line_bytes)
    }

    /// The listen streams the child has.
    fn open_listens(&self) -> usize {
        self.calls
            .values()
            .filter(|e| e.listen && e.call.is_some())
            .count()
    }

    /// Starts what waits, when the child is ready; writes the client's
    /// lines.
    async fn pump(&mut self) {
        // Writing a line may end the handshake (`notifications/initialized`):
        // round again until nothing more goes out.
        while self.pump_once().await {}
    }

    async fn pump_once(&mut self) -> bool {
        self.events();
        if self.ready {
            while let Some(&key) = self.queued.front() {
                let Some(entry) = self.calls.get(&key) else {
                    self.queued.pop_front();
                    continue;
                };
                // The server has not read enough of what went before: the
                // call waits (woken when it reads a line).
                if self.backlogged() {
                    break;
                }
                if entry.listen && self.open_listens() >= MAX_LISTENS {
                    self.queued.pop_front();
                    if let Some(e) = self.calls.remove(&key) {
                        let _ = e.events.send(Msg::Error(error(
                            Code::ResourceExhausted,
                            format!(
                                "{MAX_LISTENS} listen streams are open to this server: no more (they would leave calls no turn)"
                            ),
                        )));
                    }
                    continue;
                }
                let now = self.now();
                let mut out = vec![0u8; entry.body.len() + 1024];
                match self.core.call(&entry.body, entry.timeout, now, &mut out) {
                    Ok((call, n)) => {
                        self.queued.pop_front();
                        self.by_call.insert(call, key);
                        if let Some(e) = self.calls.get_mut(&key) {
                            e.call = Some(call);
                        }
                        self.write(&out[..n]).await;
                    }
                    Err(StdioStartError::Busy | StdioStartError::NotReady) => break,
                    Err(StdioStartError::Closed) => break,
                    Err(e) => {
                        self.queued.pop_front();
                        let err = match e {
                            StdioStartError::Invalid(rpc) => {
                                let mut err = error(Code::InvalidArgument, rpc.message);
                                err.diagnostics.rpc_code = Some(rpc.code);
                                err
                            }
                            _ => error(Code::ResourceExhausted, "the request line is too large"),
                        };
                        if let Some(e) = self.calls.remove(&key) {
                            let _ = e.events.send(Msg::Error(err));
                        }
                    }
                }
            }
        }
        let mut line = [0u8; 1024];
        let mut wrote = false;
        loop {
            let n = self.core.poll_transmit(&mut line);
            if n == 0 {
                return wrote;
            }
            wrote = true;
            self.write(&line[..n]).await;
        }
    }

    async fn write(&mut self, line: &[u8]) {
        if let Some(stdin) = self.child.as_ref().and_then(|r| r.stdin.as_ref()) {
            // A child that is gone: its stdout's end says more.
            stdin.send(line.to_vec());
        }
    }

    fn events(&mut self) {
        while let Some(e) = self.core.poll_event() {
            match e {
                StdioEvent::Notification { call } => {
                    let text = self.core.message(call).unwrap_or_default().to_vec();
                    self.send(call, Msg::Notification(text));
                }
                StdioEvent::Response { call } => {
                    let text = self.core.message(call).unwrap_or_default().to_vec();
                    self.send(call, Msg::Response(text));
                }
                StdioEvent::Failed { call } => self.failed_call(call),
                StdioEvent::Ended { call } => {
                    if let Some(key) = self.by_call.remove(&call)
                        && self.calls.get(&key).is_some_and(|e| !e.reopen)
                    {
                        self.calls.remove(&key);
                    }
                }
                StdioEvent::Ready => self.on_ready(),
                StdioEvent::HandshakeFailed => {
                    let why = format!(
                        "the handshake failed: {}",
                        self.core.handshake_error().unwrap_or("unknown")
                    );
                    self.log(&why);
                    // The start's error carries the server's -32022, so
                    // that its versions reach whoever started the channel.
                    let version = self
                        .version_refusal()
                        .and_then(|rpc| Some((rpc, self.ready_tx.take()?)));
                    self.give_up(why);
                    if let Some((rpc, tx)) = version {
                        let mut e = error(Code::FailedPrecondition, rpc.message.clone());
                        e.diagnostics.rpc_code = i32::try_from(rpc.code).ok();
                        e.rpc = Some(Box::new(rpc));
                        let _ = tx.send(Err(e));
                    }
                }
                StdioEvent::RestartNeeded => {
                    self.log(
                        "server/discover left the server unusable: restarting it for initialize",
                    );
                    self.restart = Some(Duration::ZERO);
                }
                StdioEvent::LineTooLong { len } => {
                    if let Some(nth) = self.skipped(TOO_LONG) {
                        self.log(&format!(
                            "stdout: skipped a line of {len} octets, over the limit of {} octets{nth}",
                            self.config.max_line_bytes
                        ));
                    }
                }
                StdioEvent::BadLine { json } => {
                    if let Some(nth) = self.skipped(BAD_LINE) {
                        self.log(&format!(
                            "stdout: a line that is not JSON-RPC ({}){nth}: {:?}",
                            Core::bad_line_cause(json),
                            String::from_utf8_lossy(self.core.bad_line())
                        ));
                    }
                }
                StdioEvent::Unmatched => {
                    if let Some(nth) = self.skipped(UNMATCHED) {
                        let text = String::from_utf8_lossy(self.core.unmatched());
                        let short: String = text.chars().take(200).collect();
                        self.log(&format!(
                            "stdout: a message no call waits for{nth}: {short}"
                        ));
                    }
                }
                // No call of the supervisor answers input (StdioClient::expect_input).
                StdioEvent::InputRequired { .. } | StdioEvent::Closed => {}
            }
        }
    }

    /// The server's -32022 to the probe, when it named versions this
    /// client speaks in neither era (the handshake failed on it).
    fn version_refusal(&self) -> Option<JsonRpcError> {
        let era = self.core.era();
        if era.probe_error != Some(i64::from(UNSUPPORTED_PROTOCOL_VERSION)) || era.fallback {
            return None;
        }
        let supported: serde_json::Value = serde_json::from_str(era.server_versions()?).ok()?;
        Some(JsonRpcError {
            code: i64::from(UNSUPPORTED_PROTOCOL_VERSION),
            message: "Unsupported protocol version".to_owned(),
            data: Some(serde_json::json!({"supported": supported, "requested": era.requested})),
        })
    }

    fn send(&mut self, call: CallId, msg: Msg) {
        if let Some(e) = self.by_call.get(&call).and_then(|k| self.calls.get(k)) {
            let _ = e.events.send(msg);
        }
    }

    fn failed_call(&mut self, call: CallId) {
        let Some(f) = self.core.failure(call) else {
            return;
        };
        if !f.local {
            let text = f.response.to_vec();
            self.send(call, Msg::Response(text));
            return;
        }
        let message = serde_json::from_slice::<String>(f.message).unwrap_or_default();
        let code = f.code;
        let key = self.by_call.get(&call).copied();
        if code == i64::from(LOCAL_CLOSED)
            && let Some(key) = key
            && let Some(e) = self.calls.get_mut(&key)
            && e.listen
            && self.failed.is_none()
        {
            // A listen stream goes on with the next child.
            e.reopen = true;
            e.call = None;
            self.queued.push_back(key);
            return;
        }
        let status = match code {
            c if c == i64::from(LOCAL_TIMEOUT) => Code::DeadlineExceeded,
            c if c == i64::from(LOCAL_CLOSED) => Code::Unavailable,
            _ => Code::ResourceExhausted,
        };
        self.send(call, Msg::Error(error(status, message)));
    }

    fn on_ready(&mut self) {
        self.ready = true;
        if self
            .child
            .as_ref()
            .and_then(|r| r.link.as_ref())
            .is_some_and(|l| l.http_sse.load(Ordering::Relaxed))
        {
            self.core.set_http_sse();
        }
        let d = self.core.era();
        let info = EraInfo {
            era: d
                .era
                .unwrap_or(mcpwire_core::mcp::client::stdio::Era::Modern),
            version: d.version().unwrap_or_default().to_owned(),
            requested: d.requested.to_owned(),
            server_versions: d.server_versions().map(str::to_owned),
            fallback: d.fallback.then(|| d.reason.unwrap_or("").to_owned()),
            probe_error: d.probe_error,
            restarted_for_fallback: d.restarted,
        };
        if let Ok(mut era) = self.era.lock() {
            *era = Some(info);
        }
        for e in self.calls.values_mut() {
            e.reopen = false;
        }
        self.restarting = false;
        self.was_ready = true;
        if let Some(tx) = self.ready_tx.take() {
            let _ = tx.send(Ok(()));
        }
    }

    /// The child's stdout ended: it exited or crashed.
    async fn crashed(&mut self) {
        // A link that knows why it ended says so before the engine guesses.
        let fatal = self
            .child
            .as_ref()
            .and_then(|r| r.link.as_ref())
            .and_then(|l| l.fatal.lock().ok().and_then(|mut f| f.take()));
        if let Some(why) = fatal {
            self.give_up(why);
        }
        self.core.recv_eof();
        self.ready = false;
        self.events();
        let Some(mut r) = self.child.take() else {
            return;
        };
        let ran = r.started.elapsed();
        if let Some(link) = r.link.take() {
            link.task.abort();
            if self.failed.is_some() {
                // The server is neither era, or refused: no restart helps.
                return;
            }
            self.log("the HTTP session ended");
        } else if let Some(child) = r.child.as_mut() {
            let status = match tokio::time::timeout(self.config.close_wait, child.wait()).await {
                Ok(Ok(s)) => s.to_string(),
                _ => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    "killed: its stdout closed but it did not exit".to_owned()
                }
            };
            self.log(&format!("the server's stdout closed ({status})"));
        } else {
            // Neither a child nor a link: a serial device.
            self.log("the serial device closed: opening it again");
        }
        if self.failed.is_some() || self.restart.is_some() {
            return;
        }
        if ran >= STABLE {
            self.recent.clear();
        }
        self.restart = Some(self.backoff());
    }

    /// The wait before the next start: doubling with each restart of the
    /// window, from [`StdioChannelConfig::restart_backoff`] up to
    /// [`StdioChannelConfig::max_backoff`].
    fn backoff(&mut self) -> Duration {
        self.forget_old_restarts(Instant::now());
        let shift = u32::try_from(self.recent.len()).unwrap_or(u32::MAX).min(16);
        self.config
            .restart_backoff
            .saturating_mul(1 << shift)
            .min(self.config.max_backoff)
    }

    /// Drops the restarts that left the budget's window by `now`.
    fn forget_old_restarts(&mut self, now: Instant) {
        let window = self.config.restart_window;
        while self
            .recent
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= window)
        {
            self.recent.pop_front();
        }
    }

    /// A fresh child is owed: stops the old one, counts the start in the
    /// budget, and sets the backoff's end. From here until the new child
    /// is ready the channel is restarting: with
    /// [`StdioChannelConfig::refuse_while_restarting`] new calls, and calls
    /// that waited for a turn, fail at once; otherwise they wait. A budget
    /// spent (`max_restarts` starts within `restart_window`) pauses the
    /// restarts until its oldest start leaves the window, every call
    /// refused meanwhile; before any child was ready, or with restarts
    /// off, the channel gives up instead.
    async fn schedule_restart(&mut self, wait: Duration) {
        if let Some(r) = self.child.take() {
            stop(r, Duration::from_millis(200), Duration::from_millis(200)).await;
        }
        let now = Instant::now();
        self.forget_old_restarts(now);
        let max = self.config.max_restarts;
        if self.recent.len() >= usize::try_from(max).unwrap_or(usize::MAX) {
            let window = words(self.config.restart_window);
            if max == 0 || !self.was_ready {
                let why = match max {
                    0 => "the server stopped and restarts are off: the channel gave up".to_owned(),
                    1 => "the server did not start after its one restart: the channel gave up"
                        .to_owned(),
                    n => format!(
                        "the server did not start after {n} restarts within {window}: the channel gave up"
                    ),
                };
                self.log(&why);
                self.give_up(why);
                return;
            }
            let until = self
                .recent
                .front()
                .map_or(now, |&at| at + self.config.restart_window);
            self.paused_until = Some(until);
            self.restarting = false;
            self.log(&format!(
                "the server crashed again after {} within {window}: restarts pause for {}",
                restarts(max),
                words(until.saturating_duration_since(now))
            ));
            self.refuse_waiting();
            self.restart_at = Some(until);
            return;
        }
        self.recent.push_back(now);
        self.restarting = true;
        if self.config.refuse_while_restarting {
            self.refuse_waiting();
        }
        self.restart_at = Some(now + wait);
    }

    /// The refusal of a call while the server restarts.
    fn restarting_error(&self) -> CallError {
        error(
            Code::Unavailable,
            format!(
                "the server is restarting (attempt {} of {}); new calls are refused until it is back",
                self.recent.len(),
                self.config.max_restarts
            ),
        )
    }

    /// The refusal of a call while the restarts pause (until `until`).
    fn paused_error(&self, until: Instant) -> CallError {
        error(
            Code::Unavailable,
            format!(
                "the server crashed again after {} within {}: restarts pause for {} more, and calls are refused until it is back",
                restarts(self.config.max_restarts),
                words(self.config.restart_window),
                words(until.saturating_duration_since(Instant::now()))
            ),
        )
    }

    /// Fails the calls that wait for a turn (none of them reached the
    /// child), with the restart's or the pause's refusal; a listen stream
    /// waits to be sent again.
    fn refuse_waiting(&mut self) {
        let refused: Vec<u64> = self
            .queued
            .iter()
            .copied()
            .filter(|k| self.calls.get(k).is_some_and(|e| !e.reopen))
            .collect();
        for key in refused {
            if let Some(e) = self.calls.remove(&key) {
                let why = match self.paused_until {
                    Some(until) => self.paused_error(until),
                    None => self.restarting_error(),
                };
                let _ = e.events.send(Msg::Error(why));
            }
        }
        let calls = &self.calls;
        self.queued.retain(|k| calls.contains_key(k));
    }

    /// Starts the fresh child at the end of the backoff.
    fn relaunch(&mut self) {
        self.log(&format!(
            "restarting the server (restart {} of {} within {})",
            self.recent.len(),
            self.config.max_restarts,
            words(self.config.restart_window)
        ));
        match self.launch() {
            Ok(r) => {
                self.child = Some(r);
                self.restarts.fetch_add(1, Ordering::Relaxed);
                self.ready = false;
                let now = self.now();
                self.core.restarted(now);
            }
            Err(e) => {
                self.log(&e);
                self.restart = Some(self.backoff());
            }
        }
    }

    fn give_up(&mut self, why: String) {
        self.failed = Some(why.clone());
        self.ready = false;
        self.restarting = false;
        self.restart_at = None;
        self.paused_until = None;
        if let Some(tx) = self.ready_tx.take() {
            let _ = tx.send(Err(error(Code::Unavailable, why.clone())));
        }
        self.fail_everything(&why);
    }

    fn fail_everything(&mut self, why: &str) {
        for (_, e) in self.calls.drain() {
            let _ = e.events.send(Msg::Error(error(Code::Unavailable, why)));
        }
        self.queued.clear();
        self.by_call.clear();
    }

    async fn stop(&mut self) -> Stopped {
        match self.child.take() {
            Some(r) => stop(r, self.config.close_wait, self.config.term_wait).await,
            None => Stopped::NotRunning,
        }
    }
}

/// `n` restarts, in words.
fn restarts(n: u32) -> String {
    match n {
        1 => "its one restart".to_owned(),
        n => format!("{n} restarts"),
    }
}

/// A duration as a diagnostic says it: whole seconds, else tenths of one,
/// else milliseconds.
fn words(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{ms} ms")
    }
}

/// Writes each line to the child's stdin (or the device); ends (closing
/// it) when the sender is dropped or the child stops reading for good.
async fn write_lines(mut stdin: impl AsyncWrite + Unpin, mut rx: LineReceiver) {
    while let Some(line) = rx.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

/// Closes the child's stdin, waits `close_wait`, then SIGTERM, waits
/// `term_wait`, then SIGKILL.
async fn stop(mut r: Running, close_wait: Duration, term_wait: Duration) -> Stopped {
    drop(r.stdin.take());
    if let Some(mut link) = r.link.take() {
        // The link ends its session (`DELETE`) once its lines end.
        if tokio::time::timeout(close_wait, &mut link.task)
            .await
            .is_err()
        {
            link.task.abort();
        }
        return Stopped::SessionClosed;
    }
    let Some(child) = r.child.as_mut() else {
        // Neither a link nor a child: a serial device, closed as `r` goes.
        return Stopped::DeviceClosed;
    };
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
