//! The tokio driver of the core's stdio binding (MCP 2026-07-28 §6):
//! serves an [`App`] over one byte stream in each direction (the process's
//! stdin and stdout, or any `AsyncRead` + `AsyncWrite` pair), one JSON-RPC
//! message a line.
//!
//! The core's [`StdioServer`](engine::StdioServer) makes every decision
//! (framing, bad lines, cancellation, timeouts, listen streams); this
//! module moves octets, time and answers, and runs the handlers with the
//! tunnel driver's handler code (one implementation for both bindings).
//! Only MCP messages are written to the output: the driver prints nothing,
//! anywhere.
//!
//! At the end of the input the listen streams end with their result, the
//! calls in progress get [`StdioConfig::shutdown_grace`] to finish, what is
//! left is cancelled, and [`serve`] returns `Ok` once the output is
//! flushed.

use std::future::pending;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::drive::{self, Feed, Step};
use mcpwire_core::mcp::server as engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Sleep;

use super::CALLS;
use super::calls::Calls;
use super::connection::{BUF_SLACK, ListenSource, QUEUE, READ_BUF, TRANSMIT_CHUNK, WRITE_HIGH};
use crate::app::App;
use crate::app::link::Outgoing;
use crate::clock::{Timer, now};
use crate::outbox;
use crate::store::HeapStore;

/// The engine: [`CALLS`] requests in progress (listen streams included),
/// each line in a heap buffer while its call lasts.
type StdioEngine = engine::StdioServer<'static, HeapStore, CALLS>;

/// How long the output may take to drain after the calls were cancelled
/// (a client that stopped reading must not hold the process).
const FLUSH_BOUND: Duration = Duration::from_secs(1);

/// The settings of a stdio server.
///
/// ```
/// use std::time::Duration;
/// use mcpwire_tokio::StdioConfig;
/// let config = StdioConfig {
///     shutdown_grace: Duration::from_secs(1),
///     ..StdioConfig::default()
/// };
/// # let _ = config;
/// ```
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// How long a request may run before it is cancelled and answered
    /// -32001 (not `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// The longest line accepted; a longer one is answered -32600 and
    /// skipped. Each call holds a buffer of about this size at most, and
    /// at most this much of a call's notifications wait for a client that
    /// does not read them: the handler's next one waits. Default 4 MiB.
    pub max_line_bytes: usize,
    /// How long the calls in progress at the end of the input get to
    /// finish before they are cancelled. Default 5 s.
    pub shutdown_grace: Duration,
    /// While no call is in progress, wait for the next line with one
    /// blocking read of stdin (two system calls a call instead of three)
    /// rather than through the runtime. The runtime's thread is blocked
    /// meanwhile: only for a runtime that runs nothing but this server
    /// (`mcpwire serve --stdio` builds a current-thread runtime for it).
    /// Used by [`App::serve_stdio_with`] when stdin is a pipe. Default
    /// `false`.
    pub idle_read_blocks: bool,
}

impl Default for StdioConfig {
    fn default() -> Self {
        let core = engine::StdioConfig::default();
        Self {
            request_timeout: core.request_timeout,
            max_line_bytes: core.max_line_bytes,
            shutdown_grace: Duration::from_secs(5),
            idle_read_blocks: false,
        }
    }
}

impl App {
    /// Serves this app on the process's stdin and stdout with the default
    /// [`StdioConfig`] (see [`serve`]); returns at the end of stdin.
    /// Nothing else may write to stdout meanwhile: log to stderr.
    pub async fn serve_stdio(self) -> io::Result<()> {
        self.serve_stdio_with(StdioConfig::default()).await
    }

    /// [`serve_stdio`](Self::serve_stdio) with `config`.
    pub async fn serve_stdio_with(self, config: StdioConfig) -> io::Result<()> {
        let (rd, wr, idle) = stdio_streams();
        let idle = idle.filter(|_| config.idle_read_blocks);
        // On a worker of the runtime, beside the I/O driver and the
        // handlers: a future the main thread blocks on is woken across
        // threads for every line (two futex calls a request).
        tokio::spawn(async move {
            let (mut stdio, rx) = Stdio::new(self, &config)?;
            stdio.drive(rd, wr, idle, rx, config.shutdown_grace).await
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
    }
}

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// The process's stdin and stdout, and stdin for blocking reads when it is
/// a pipe.
///
/// Pipes (what a host that launches the server gives it) are read and
/// written without blocking on the runtime's own threads, through a
/// description of the pipe of our own (opened again under
/// `/proc/self/fd`): the one the process inherited, which its parent and
/// siblings may share, keeps its flags, and stays blocking for
/// [`StdioConfig::idle_read_blocks`]. Without `/proc`, the inherited
/// description is made non-blocking (no blocking reads then). Anything
/// else (a terminal, a file) goes through tokio's blocking-thread stdin and
/// stdout, which hand every read and write to another thread.
fn stdio_streams() -> (Input, Output, Option<std::fs::File>) {
    #[cfg(unix)]
    {
        use std::os::fd::{AsFd, OwnedFd};
        use tokio::net::unix::pipe;

        let rd = reopen(0, libc::O_RDONLY);
        let idle = rd
            .as_ref()
            .ok()
            .and_then(|_| std::io::stdin().as_fd().try_clone_to_owned().ok())
            .map(std::fs::File::from);
        let rd: Input = rd
            .or_else(|_| std::io::stdin().as_fd().try_clone_to_owned())
            .and_then(pipe::Receiver::from_owned_fd)
            .map_or_else(|_| Box::new(tokio::io::stdin()) as Input, |p| Box::new(p));
        let wr: Output = reopen(1, libc::O_WRONLY)
            .or_else(|_| std::io::stdout().as_fd().try_clone_to_owned())
            .and_then(pipe::Sender::from_owned_fd)
            .map_or_else(|_| Box::new(tokio::io::stdout()) as Output, |p| Box::new(p));
        return (rd, wr, idle);

        /// A non-blocking description of our own of the pipe at `fd`.
        fn reopen(fd: i32, access: i32) -> io::Result<OwnedFd> {
            use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
            let path = format!("/proc/self/fd/{fd}");
            if !std::fs::metadata(&path)?.file_type().is_fifo() {
                return Err(io::ErrorKind::Unsupported.into());
            }
            // O_NONBLOCK: opening a pipe's end does not wait for its peer.
            std::fs::OpenOptions::new()
                .read(access == libc::O_RDONLY)
                .write(access == libc::O_WRONLY)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map(OwnedFd::from)
        }
    }
    #[cfg(not(unix))]
    {
        (
            Box::new(tokio::io::stdin()),
            Box::new(tokio::io::stdout()),
            None,
        )
    }
}

/// Serves `app` over `rd` (requests and notifications, a line each) and
/// `wr` (responses and notifications). Bad lines are answered and the
/// channel goes on. Returns `Ok` after the end of `rd`, once every call
/// finished (or was cancelled after [`StdioConfig::shutdown_grace`]) and
/// `wr` is flushed; `Err` on a read or write error.
pub async fn serve<R, W>(app: App, rd: R, wr: W, config: StdioConfig) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (mut stdio, rx) = Stdio::new(app, &config)?;
    stdio.drive(rd, wr, None, rx, config.shutdown_grace).await
}

struct Stdio {
    engine: Box<StdioEngine>,
    calls: Calls,
    /// Input the engine did not take yet: it waits for a handler's answer
    /// to free a call (`Step::Wait`); nothing more is read meanwhile.
    pending: Vec<u8>,
    /// Octets for the output, from its first unwritten one on.
    out: Vec<u8>,
    /// Where the engine writes its next octets, copied to `out` (growing
    /// `out` by a chunk of zeros for every answer costs more than the
    /// copy of the answer's octets).
    chunk: Box<[u8]>,
}

impl Stdio {
    fn new(app: App, config: &StdioConfig) -> io::Result<(Self, outbox::Receiver<Outgoing>)> {
        let registry = app
            .registry()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
        let core = engine::StdioConfig {
            max_line_bytes: config.max_line_bytes,
            request_timeout: config.request_timeout,
        };
        // A call's buffer holds its line, then each message of its answer.
        let store = HeapStore::new(config.max_line_bytes.saturating_add(BUF_SLACK));
        let (tx, rx) = outbox::channel(QUEUE);
        let stdio = Stdio {
            engine: Box::new(StdioEngine::new(registry, core, store, now())),
            calls: Calls::new(Arc::new(app), tx, config.max_line_bytes),
            pending: Vec::new(),
            out: Vec::new(),
            chunk: vec![0; TRANSMIT_CHUNK].into_boxed_slice(),
        };
        Ok((stdio, rx))
    }

    /// `idle`: the input again, blocking, read instead of `rd` while
    /// nothing is in progress (see [`StdioConfig::idle_read_blocks`]).
    async fn drive<R, W>(
        &mut self,
        mut rd: R,
        mut wr: W,
        mut idle: Option<std::fs::File>,
        mut rx: outbox::Receiver<Outgoing>,
        grace: Duration,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut buf = vec![0; READ_BUF];
        let mut written = 0;
        let mut unflushed = false;
        // The input ended; the engine was told (only once all of the
        // input was fed).
        let mut input_ended = false;
        let mut eof_told = false;
        let mut grace_timer: Option<Pin<Box<Sleep>>> = None;
        let mut timer = Timer::new();
        let mut listen = ListenSource::default();
        let mut turn_over = false;
        loop {
            // The output is written: room for what the engine holds (a
            // call told Busy hears Writable when its message goes in).
            if written > 0 && written == self.out.len() {
                self.out.clear();
                written = 0;
            }
            // After a turn that ended for the handlers it started in tasks,
            // they run (this task yields once) before the next lines.
            if !turn_over {
                turn_over = self.pump()?;
            }
            if input_ended && !eof_told && self.pending.is_empty() {
                eof_told = true;
                self.engine.recv_eof();
                self.drain_events();
                self.pump()?;
            }
            // All of it written (and cleared at the top of the turn).
            if self.out.is_empty() {
                if unflushed {
                    wr.flush().await?;
                    unflushed = false;
                }
                if self.engine.is_finished() {
                    return Ok(());
                }
            }
            timer.set(self.engine.poll_timeout());
            listen.follow(self.engine.is_listening(), || self.calls.subscribe());
            // Nothing to wait for but the next line: one blocking read
            // instead of the runtime's readiness wait and a read.
            if let Some(file) = idle.as_mut().filter(|_| {
                !input_ended
                    && self.pending.is_empty()
                    && self.out.is_empty()
                    && !timer.is_set()
                    && !self.engine.is_listening()
                    && !listen.is_active()
                    && self.calls.is_empty()
                    && rx.is_empty()
            }) {
                match std::io::Read::read(file, &mut buf) {
                    Ok(0) => {
                        input_ended = true;
                        grace_timer = Some(Box::pin(tokio::time::sleep(grace)));
                    }
                    Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The inherited description is non-blocking (set so by
                    // the parent): read through the runtime only.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => idle = None,
                    Err(e) => return Err(e),
                }
                continue;
            }
            tokio::select! {
                // Lines wait in the pipe (and the host's writes block)
                // while the output is at its high-water mark.
                r = rd.read(&mut buf), if !input_ended && self.pending.is_empty()
                    && self.out.len() < WRITE_HIGH => match r? {
                    0 => {
                        input_ended = true;
                        grace_timer = Some(Box::pin(tokio::time::sleep(grace)));
                    }
                    // Fed at the top of the loop.
                    n => self.pending.extend_from_slice(&buf[..n]),
                },
                r = wr.write(&self.out[written..]), if written < self.out.len() => {
                    written += r?;
                    unflushed = true;
                }
                msg = rx.recv() => {
                    self.calls.outgoing_queued(&mut *self.engine, msg, &mut rx);
                    self.drain_events();
                }
                event = listen.next(), if listen.is_active() => {
                    self.engine.publish(event.change());
                    self.drain_events();
                }
                () = timer.fired(), if timer.is_set() => {
                    self.engine.handle_timeout(now());
                    self.drain_events();
                }
                () = tokio::task::yield_now(), if turn_over => turn_over = false,
                () = expired(&mut grace_timer) => break,
            }
        }
        // The grace period is over: cancel what is left (its handlers are
        // aborted) and write what already went to the output, whole lines
        // only, for a bounded time.
        self.engine.close();
        self.drain_events();
        self.calls.stop_all();
        let rest = &self.out[written..];
        let whole = rest.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let rest = &rest[..whole];
        let _ = tokio::time::timeout(FLUSH_BOUND, async {
            wr.write_all(rest).await?;
            wr.flush().await
        })
        .await;
        Ok(())
    }

    /// Feeds the pending input and transmits, as long as either goes on
    /// (an answer written frees a call, which lets more input in); `true`
    /// when it stopped with input left for the handlers it started in
    /// tasks to run first.
    fn pump(&mut self) -> io::Result<bool> {
        loop {
            // At the high-water mark the input waits for the host to read.
            if self.out.len() >= WRITE_HIGH {
                return Ok(false);
            }
            let (fed, turn_over) = self.feed()?;
            let sent = self.transmit(WRITE_HIGH);
            if turn_over {
                return Ok(true);
            }
            if self.pending.is_empty() || !(fed || sent > 0) {
                return Ok(false);
            }
        }
    }

    /// Feeds the pending input, [`LINES_PER_TURN`] lines at a time, until
    /// it is consumed, the engine waits, the output reaches its high-water
    /// mark ([`WRITE_HIGH`]), or some of the lines fed started
    /// a handler that waits (its task runs before more lines are taken: a
    /// forwarding handler's request leaves while the next ones are read).
    /// Returns whether any input was consumed, and whether the turn ended
    /// for the handlers' sake.
    fn feed(&mut self) -> io::Result<(bool, bool)> {
        let input = std::mem::take(&mut self.pending);
        let mut at = 0;
        let mut turn_over = false;
        let mut result = Ok(());
        while at < input.len() {
            let rest = &input[at..];
            let turn = memchr::memchr_iter(b'\n', rest)
                .nth(LINES_PER_TURN - 1)
                .map_or(rest.len(), |end| end + 1);
            let mut feed = Feed::new(&rest[..turn]);
            let stop = loop {
                let step = feed.step(&mut *self.engine, now());
                self.drain_events();
                match step {
                    Step::Consumed => {}
                    // At the high-water mark the rest waits for the
                    // output to be written.
                    Step::Transmit => {
                        self.transmit(WRITE_HIGH);
                        if self.out.len() >= WRITE_HIGH {
                            break true;
                        }
                    }
                    Step::Done => break false,
                    Step::Wait => break true,
                    Step::Stuck => {
                        result = Err(io::Error::other(format!(
                            "the stdio engine takes no input ({} octets left)",
                            feed.rest().len()
                        )));
                        break true;
                    }
                }
            };
            at += turn - feed.rest().len();
            if stop {
                break;
            }
            if self.calls.take_started_tasks() > 0 && at < input.len() {
                turn_over = true;
                break;
            }
        }
        self.pending = input;
        self.pending.drain(..at);
        result.map(|()| (at > 0, turn_over))
    }

    /// Appends what the engine has to send to the output, up to `limit`
    /// octets waiting; returns how many.
    fn transmit(&mut self, limit: usize) -> usize {
        let mut sent = 0;
        while self.out.len() < limit && self.engine.wants_transmit() {
            let n = drive::fill(&mut *self.engine, &mut self.chunk);
            self.out
                .extend_from_slice(self.chunk.get(..n).unwrap_or_default());
            // A line written ends its call: a handler's queued message or
            // the pending input may go on.
            self.drain_events();
            sent += n;
            if n == 0 {
                break;
            }
        }
        sent
    }

    /// Handles every queued engine event.
    fn drain_events(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            // No Authorize event on stdio: the process boundary is the
            // trust boundary.
            let _ = self.calls.on_event(&mut *self.engine, event);
        }
    }
}

/// Lines fed to the engine before the handlers they started in tasks run.
const LINES_PER_TURN: usize = 4;

/// Completes when the grace timer, once set, expires.
async fn expired(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(sleep) => sleep.as_mut().await,
        None => pending().await,
    }
}
