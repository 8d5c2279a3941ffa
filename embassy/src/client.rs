//! The MCP client of the tunnel binding on embassy: the core's sans-IO
//! client engine ([`mcpwire_core::mcp::client::Client`]) driven over one
//! connection, with embassy-time.
//!
//! The connection is a [`Link`]: an embassy-net [`TcpSocket`] (read and
//! written in place, in the socket's own buffers: no staging RAM), or any
//! other `embedded-io-async` [`Read`] + [`Write`] wrapped in [`Staged`]
//! with a staging buffer the caller lends ([`Client::over`]).
//!
//! The application gives a connected link and a `&mut` engine
//! (a static: the engine holds its call store, a
//! [`SlabStore`](mcpwire_core::mcp::SlabStore) of two buffers per call, and
//! its HTTP/2 buffers inline), then starts calls
//! one at a time: [`Client::call`] sends the request and returns a
//! [`CallStream`], whose [`CallStream::next`] yields each notification of
//! the call as it arrives, then its outcome (a response or a JSON-RPC
//! error), then [`Step::Done`]. The engine's rules apply: metadata mirrored
//! from the body, `grpc-timeout` from the time left, re-list and retry once
//! after -32020, a refused stream sent once more, errors read from the
//! trailers. A call started with [`Client::call_with`] and
//! [`CallOptions::answers_input`](engine::CallOptions::answers_input)
//! whose server asks for input (MCP 2026-07-28 §9) yields
//! [`Step::InputRequired`] and waits for [`CallStream::answer_input`]; the
//! engine sends the next round.
//!
//! The run loop is the core's ([`mcpwire_core::drive`]): each turn writes
//! the engine's output while it wants to transmit, then sleeps until input
//! or the engine's deadline, and feeds one `recv` of what arrived (the
//! call's events are drained before the next). An engine that takes no
//! input and has nothing to send is stuck: [`ClientError::Stuck`].
//!
//! ```no_run
//! use embassy_net::{IpEndpoint, Ipv4Address, Stack};
//! use embassy_net::tcp::TcpSocket;
//! use mcpwire_core::mcp::SlabStore;
//! use mcpwire_core::h2::InlineStorage;
//! use mcpwire_core::mcp::client::ClientConfig;
//! use mcpwire_embassy::client::{Client, Step};
//! use static_cell::StaticCell;
//!
//! // 2 calls, two 4 KiB buffers each, a 4 KiB HPACK table, 4 KiB HTTP/2
//! // buffers, 1 KiB of annotation cache.
//! type Engine = mcpwire_core::mcp::client::Client<
//!     SlabStore<4096, 4>, 2, 4096, 4096, InlineStorage<4096>, 1024,
//! >;
//! static ENGINE: StaticCell<Engine> = StaticCell::new();
//!
//! async fn ask(stack: Stack<'static>) {
//!     let mut rx = [0u8; 4096];
//!     let mut tx = [0u8; 4096];
//!     let mut socket = TcpSocket::new(stack, &mut rx, &mut tx);
//!     let remote = IpEndpoint::new(Ipv4Address::new(10, 77, 0, 2).into(), 50051);
//!     if socket.connect(remote).await.is_err() {
//!         return;
//!     }
//!     let engine = ENGINE.init(Engine::new(
//!         ClientConfig::default(),
//!         SlabStore::new(),
//!         mcpwire_embassy::client::now(),
//!     ));
//!     let mut client = Client::new(socket, engine);
//!     let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
//!     let mut out = [0u8; 4096];
//!     if let Ok(mut call) = client.call(body, None).await {
//!         while let Ok(step) = call.next(&mut out).await {
//!             match step {
//!                 Step::Notification(_) => {}
//!                 Step::Response(_) | Step::Failed { .. } => {}
//!                 // Only for a call started with `answers_input`.
//!                 Step::InputRequired(_) => {}
//!                 Step::Done => break,
//!             }
//!         }
//!     }
//! }
//! # fn main() {}
//! ```

use core::future::pending;

use embassy_futures::select::{Either3, select3};
use embassy_net::tcp::TcpSocket;
use embassy_time::{Duration, Timer};
use embedded_io_async::{Read, Write};
use mcpwire_core::drive::{self, Endpoint, Feed};
use mcpwire_core::h2::Storage;
use mcpwire_core::mcp::CallStore;
use mcpwire_core::mcp::client::{self as engine, CallId, ClientEvent, Diagnostics, StartError};
use mcpwire_core::time::Instant;

/// The core's clock: embassy-time's, in microseconds since boot.
pub fn now() -> Instant {
    Instant::from_micros(embassy_time::Instant::now().as_micros())
}

fn to_embassy(at: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_micros(at.as_micros())
}

/// Why the client cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClientError {
    /// The engine refused the request before a byte went out
    /// (-32600 for an unsafe annotated integer, ...): `code`.
    Invalid { code: i32 },
    /// Every call slot of the engine is taken.
    Busy,
    /// The request is larger than the engine's call buffer.
    TooLarge,
    /// The connection is over.
    Closed,
    /// The socket failed.
    Socket,
    /// The output buffer given to [`CallStream::next`] is too small for a
    /// message (`needed` octets).
    BufferTooSmall { needed: usize },
    /// The engine took no input and had nothing to send, or wanted to send
    /// and wrote nothing (a bug): close the connection.
    Stuck,
}

impl From<StartError> for ClientError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Invalid(r) => Self::Invalid { code: r.code },
            StartError::Busy => Self::Busy,
            StartError::TooLarge { .. } => Self::TooLarge,
            // A limit of the engine's calls: free again after a call ends.
            StartError::Exhausted(_) => Self::Busy,
            // One connection's engine is never down: it is closed.
            StartError::Closed | StartError::Down => Self::Closed,
        }
    }
}

/// One step of a call, copied into the buffer given to
/// [`CallStream::next`].
#[derive(Debug, Clone, Copy)]
pub enum Step<'b> {
    /// A notification (progress, listen events).
    Notification(&'b [u8]),
    /// The JSON-RPC response with its `result`.
    Response(&'b [u8]),
    /// The server asks for input (a call started with
    /// [`CallOptions::answers_input`](engine::CallOptions::answers_input)):
    /// the result's `inputRequests` object. Answer with
    /// [`CallStream::answer_input`]; the call goes on.
    InputRequired(&'b [u8]),
    /// The JSON-RPC error response (from the server, or synthesized for a
    /// transport failure: see `diagnostics.transport`).
    Failed {
        code: i32,
        response: &'b [u8],
        diagnostics: Diagnostics,
    },
    /// The call is over.
    Done,
}

/// A client over one connection: an embassy-net [`TcpSocket`] by default
/// (`L`), or any [`Link`].
pub struct Client<
    's,
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link = TcpSocket<'s>,
> {
    link: L,
    engine: &'s mut engine::Client<S, CALLS, TABLE, BUF, B, CACHE>,
    eof: bool,
}

impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link,
> core::fmt::Debug for Client<'_, S, CALLS, TABLE, BUF, B, CACHE, L>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("engine", &self.engine)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

/// What an event meant for the call being read.
enum Seen {
    Other,
    Copied(u8, usize, i32, Diagnostics),
    TooSmall(usize),
    Ended,
}

const NOTE: u8 = 0;
const RESPONSE: u8 = 1;
const FAILED: u8 = 2;
const INPUT: u8 = 3;

impl<
    's,
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link,
> Client<'s, S, CALLS, TABLE, BUF, B, CACHE, L>
{
    /// A client over a connected link (a [`TcpSocket`], a [`Staged`]
    /// connection) and a fresh engine.
    pub fn new(link: L, engine: &'s mut engine::Client<S, CALLS, TABLE, BUF, B, CACHE>) -> Self {
        Self {
            link,
            engine,
            eof: false,
        }
    }

    /// The engine, for its state (its annotation cache).
    pub fn engine(&self) -> &engine::Client<S, CALLS, TABLE, BUF, B, CACHE> {
        self.engine
    }

    /// Starts a call of one JSON-RPC request (with its `id` and `_meta`);
    /// `timeout` replaces the engine's request timeout.
    pub async fn call(
        &mut self,
        body: &[u8],
        timeout: Option<core::time::Duration>,
    ) -> Result<CallStream<'_, 's, S, CALLS, TABLE, BUF, B, CACHE, L>, ClientError> {
        let options = engine::CallOptions {
            timeout,
            ..engine::CallOptions::default()
        };
        self.call_with(body, options).await
    }

    /// [`Client::call`] with all of a call's options: its timeout, and
    /// whether the application answers the server's requests for input
    /// ([`Step::InputRequired`]).
    pub async fn call_with(
        &mut self,
        body: &[u8],
        options: engine::CallOptions,
    ) -> Result<CallStream<'_, 's, S, CALLS, TABLE, BUF, B, CACHE, L>, ClientError> {
        let call = self.engine.call_with(body, options, now())?;
        self.transmit().await?;
        Ok(CallStream {
            client: self,
            call,
            done: false,
        })
    }

    /// Closes the connection: GOAWAY, then the link.
    pub async fn close(mut self) {
        self.engine.go_away();
        let _ = self.transmit().await;
        self.link.close().await;
    }

    /// Moves the engine's output into the link while it wants to transmit.
    async fn transmit(&mut self) -> Result<(), ClientError> {
        self.link.transmit(&mut *self.engine).await
    }

    /// Waits for input or a deadline, and hands it to the engine.
    async fn turn(&mut self) -> Result<(), ClientError> {
        self.transmit().await?;
        let deadline = self.engine.poll_timeout();
        let eof = self.eof;
        let closed = eof && self.engine.is_closed();
        let link = &mut self.link;
        let readable = async {
            if eof {
                pending::<()>().await;
            }
            link.readable().await
        };
        let timer = async {
            match deadline {
                Some(at) => Timer::at(to_embassy(at)).await,
                None => pending::<()>().await,
            }
        };
        let closed = async {
            if !closed {
                pending::<()>().await;
            }
        };
        match select3(readable, timer, closed).await {
            Either3::First(true) => {
                // One `recv` a turn: its notifications are taken before the
                // next. What it left stays in the link for the next turn.
                match self.link.feed(&mut *self.engine, now()).await {
                    // Owed frames go out at the start of the next turn,
                    // before more is read.
                    Some(drive::Step::Consumed | drive::Step::Done | drive::Step::Transmit) => {}
                    // The client never waits for the application to read.
                    Some(drive::Step::Wait | drive::Step::Stuck) => return Err(ClientError::Stuck),
                    None => {
                        self.eof = true;
                        self.engine.recv_eof();
                    }
                }
            }
            Either3::First(false) => {
                self.eof = true;
                self.engine.recv_eof();
            }
            Either3::Second(()) => self.engine.handle_timeout(now()),
            Either3::Third(()) => return Err(ClientError::Closed),
        }
        Ok(())
    }
}

impl<
    's,
    Io: Read + Write,
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
> Client<'s, S, CALLS, TABLE, BUF, B, CACHE, Staged<'s, Io>>
{
    /// A client over any connected `embedded-io-async` connection, through
    /// `staging` ([`Staged::new`]), and a fresh engine.
    pub fn over(
        io: Io,
        staging: &'s mut [u8],
        engine: &'s mut engine::Client<S, CALLS, TABLE, BUF, B, CACHE>,
    ) -> Self {
        Self::new(Staged::new(io, staging), engine)
    }
}

/// The connection under a [`Client`]: how the engine's octets reach it
/// and leave it. [`TcpSocket`] is one (in place, in its own buffers);
/// [`Staged`] makes any `embedded-io-async` [`Read`] + [`Write`] one.
// The futures need not be `Send`: embassy's executors run on one thread.
#[allow(async_fn_in_trait)]
pub trait Link {
    /// Moves `engine`'s output into the connection while it wants to
    /// transmit, waiting for room.
    async fn transmit<E: Endpoint>(&mut self, engine: &mut E) -> Result<(), ClientError>;
    /// Waits until input is there, without taking it; `false` when the
    /// input ended or the connection failed. Cancel-safe: the client races
    /// it with its deadline.
    async fn readable(&mut self) -> bool;
    /// Hands `engine` one `recv` of the input there; what it left stays for
    /// the next. `None` when the input ended.
    async fn feed<E: Endpoint>(&mut self, engine: &mut E, now: Instant) -> Option<drive::Step>;
    /// Ends the connection once what was written is sent (or a second
    /// passed).
    async fn close(&mut self);
}

impl Link for TcpSocket<'_> {
    async fn transmit<E: Endpoint>(&mut self, engine: &mut E) -> Result<(), ClientError> {
        while engine.wants_transmit() {
            if self.send_queue() >= self.send_capacity() {
                self.wait_write_ready().await;
                continue;
            }
            let n = self
                .write_with(|out| {
                    let n = drive::fill(engine, out);
                    (n, n)
                })
                .await
                .map_err(|_| ClientError::Socket)?;
            if n == 0 {
                // Room in the socket, output owed, nothing written.
                return Err(ClientError::Stuck);
            }
        }
        Ok(())
    }

    async fn readable(&mut self) -> bool {
        self.read_with(|_| (0, ())).await.is_ok()
    }

    async fn feed<E: Endpoint>(&mut self, engine: &mut E, now: Instant) -> Option<drive::Step> {
        self.read_with(|input| {
            let mut feed = Feed::new(input);
            let step = feed.step(engine, now);
            (input.len() - feed.rest().len(), step)
        })
        .await
        .ok()
    }

    async fn close(&mut self) {
        let _ = embassy_time::with_timeout(Duration::from_secs(1), TcpSocket::flush(self)).await;
        TcpSocket::close(self);
    }
}

/// Any `embedded-io-async` connection (a serial link, another network
/// stack's socket, an in-memory pipe) with a staging buffer the caller
/// lends: its first half holds what was read and not yet taken, its second
/// half the engine's output on its way to `write`. Each half must hold a
/// frame header at least (a few hundred octets are plenty; larger halves
/// mean fewer reads and writes).
///
/// The connection's `read` must be cancel-safe (a read dropped before it
/// completes loses nothing), as embassy-net's and embassy-sync's are.
pub struct Staged<'b, Io> {
    io: Io,
    input: &'b mut [u8],
    output: &'b mut [u8],
    /// Read but not yet taken: `input[start..end]`.
    start: usize,
    end: usize,
}

impl<'b, Io> Staged<'b, Io> {
    /// `io` through `staging`, split in halves.
    pub fn new(io: Io, staging: &'b mut [u8]) -> Self {
        let (input, output) = staging.split_at_mut(staging.len() / 2);
        Self {
            io,
            input,
            output,
            start: 0,
            end: 0,
        }
    }

    /// The connection.
    pub fn io(&mut self) -> &mut Io {
        &mut self.io
    }
}

impl<Io> core::fmt::Debug for Staged<'_, Io> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Staged")
            .field("staging", &(self.input.len() + self.output.len()))
            .field("unread", &(self.end - self.start))
            .finish_non_exhaustive()
    }
}

impl<Io: Read + Write> Link for Staged<'_, Io> {
    async fn transmit<E: Endpoint>(&mut self, engine: &mut E) -> Result<(), ClientError> {
        while engine.wants_transmit() {
            let n = drive::fill(engine, self.output);
            let out = self.output.get(..n).unwrap_or_default();
            if out.is_empty() {
                // Output owed, nothing written: the half is too small.
                return Err(ClientError::Stuck);
            }
            self.io
                .write_all(out)
                .await
                .map_err(|_| ClientError::Socket)?;
        }
        Ok(())
    }

    async fn readable(&mut self) -> bool {
        if self.start < self.end {
            return true;
        }
        match self.io.read(self.input).await {
            Ok(n) if n > 0 => {
                self.start = 0;
                self.end = n.min(self.input.len());
                true
            }
            _ => false,
        }
    }

    async fn feed<E: Endpoint>(&mut self, engine: &mut E, now: Instant) -> Option<drive::Step> {
        if !self.readable().await {
            return None;
        }
        let input = self.input.get(self.start..self.end).unwrap_or_default();
        let mut feed = Feed::new(input);
        let step = feed.step(engine, now);
        self.start = self.end - feed.rest().len();
        Some(step)
    }

    async fn close(&mut self) {
        let _ = embassy_time::with_timeout(Duration::from_secs(1), self.io.flush()).await;
    }
}

/// A call in progress: its notifications, then its outcome.
pub struct CallStream<
    'c,
    's,
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link = TcpSocket<'s>,
> {
    client: &'c mut Client<'s, S, CALLS, TABLE, BUF, B, CACHE, L>,
    call: CallId,
    done: bool,
}

impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link,
> core::fmt::Debug for CallStream<'_, '_, S, CALLS, TABLE, BUF, B, CACHE, L>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallStream")
            .field("call", &self.call)
            .field("done", &self.done)
            .finish()
    }
}

impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    L: Link,
> CallStream<'_, '_, S, CALLS, TABLE, BUF, B, CACHE, L>
{
    /// The next step of the call, copied into `out`.
    pub async fn next<'b>(&mut self, out: &'b mut [u8]) -> Result<Step<'b>, ClientError> {
        if self.done {
            return Ok(Step::Done);
        }
        loop {
            let mut seen = Seen::Other;
            while let Some(e) = self.client.engine.poll_event() {
                seen = look(self.client.engine, e, self.call, out);
                if !matches!(seen, Seen::Other) {
                    break;
                }
            }
            match seen {
                Seen::Other => {}
                Seen::Ended => {
                    self.done = true;
                    return Ok(Step::Done);
                }
                Seen::TooSmall(needed) => return Err(ClientError::BufferTooSmall { needed }),
                Seen::Copied(kind, n, code, diagnostics) => {
                    let json = &out[..n];
                    return Ok(match kind {
                        NOTE => Step::Notification(json),
                        RESPONSE => Step::Response(json),
                        INPUT => Step::InputRequired(json),
                        _ => Step::Failed {
                            code,
                            response: json,
                            diagnostics,
                        },
                    });
                }
            }
            if self.client.eof
                && self.client.engine.is_closed()
                && !self.client.engine.is_active(self.call)
            {
                self.done = true;
                return Ok(Step::Done);
            }
            self.client.turn().await?;
        }
    }

    /// Answers the call's [`Step::InputRequired`] with `responses` (one
    /// JSON object keyed as the `inputRequests`): the engine sends the
    /// call's next round. [`ClientError::Invalid`] when the call waits for
    /// no input or `responses` is not a JSON object.
    pub async fn answer_input(&mut self, responses: &[u8]) -> Result<(), ClientError> {
        self.client
            .engine
            .answer_input(self.call, responses, now())?;
        self.client.transmit().await
    }

    /// Stops the call: RST_STREAM(CANCEL).
    pub async fn cancel(mut self) -> Result<(), ClientError> {
        self.client.engine.cancel(self.call);
        self.done = true;
        self.client.transmit().await
    }
}

/// What event `e` of `engine` means for call `me`; its text is copied
/// into `out`.
fn look<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
>(
    engine: &engine::Client<S, CALLS, TABLE, BUF, B, CACHE>,
    e: ClientEvent,
    me: CallId,
    out: &mut [u8],
) -> Seen {
    let mut copy = |json: &[u8]| match out.get_mut(..json.len()) {
        Some(dst) => {
            dst.copy_from_slice(json);
            Ok(json.len())
        }
        None => Err(json.len()),
    };
    let text = |call| engine.message(call).unwrap_or_default();
    let (kind, r, code, diagnostics) = match e {
        ClientEvent::Notification { call } if call == me => {
            (NOTE, copy(text(call)), 0, Diagnostics::default())
        }
        ClientEvent::Response { call } if call == me => {
            (RESPONSE, copy(text(call)), 0, Diagnostics::default())
        }
        ClientEvent::InputRequired { call } if call == me => {
            let requests = engine.input_requests(call).unwrap_or(b"{}");
            (INPUT, copy(requests), 0, Diagnostics::default())
        }
        ClientEvent::Failed { call } if call == me => match engine.failure(call) {
            Some(f) => (FAILED, copy(f.response), f.code, f.diagnostics),
            None => (FAILED, copy(text(call)), 0, Diagnostics::default()),
        },
        ClientEvent::Ended { call } if call == me => return Seen::Ended,
        ClientEvent::Warning { call, reason } => {
            let _ = (engine.warning_tool(call), reason);
            warn!("mcpwire: a tool was left out of tools/list: {}", reason);
            return Seen::Other;
        }
        _ => return Seen::Other,
    };
    match r {
        Ok(n) => Seen::Copied(kind, n, code, diagnostics),
        Err(needed) => Seen::TooSmall(needed),
    }
}
