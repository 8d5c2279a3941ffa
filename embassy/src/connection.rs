//! One connection: the engine's run loop over an embassy-net TCP socket.
//!
//! The loop mirrors the tokio driver's: hand the engine's output to the
//! socket ([`Engine::poll_transmit`] straight into the socket's transmit
//! buffer with `write_with`) until it has none or the socket is full, feed
//! what the socket received ([`Engine::recv`] straight from its receive
//! buffer with `read_with`) until it is consumed, drain
//! [`Engine::poll_event`] after every call, and otherwise sleep until the
//! socket is readable (or writable, when output waits), a handler has
//! output, or [`Engine::poll_timeout`] passes (then
//! [`Engine::handle_timeout`]).

use core::future::{pending, poll_fn};
use core::task::Poll;

use embassy_futures::select::{Either4, select4};
use embassy_net::tcp::{TcpReader, TcpWriter};
use embassy_time::Timer;
use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::meta::KEY_SUBSCRIPTION_ID;
use mcpwire_core::mcp::server::{CallId, Engine, SendError, ServerEvent};
use mcpwire_core::mcp::store::CallStore;
use mcpwire_core::mcp::tool::Tools;
use mcpwire_core::mcp::writer::JsonWriter;
use mcpwire_core::time::Instant;

use crate::Server;
use crate::handler::{Assign, Outcome, Phase, Slot};

/// Longest JSON-RPC id the engine keeps (raw JSON).
const MAX_ID: usize = 128;

/// Why a connection ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnError {
    /// The socket failed or was reset.
    Socket,
    /// The engine took no input while it had no output to send.
    Stalled,
}

/// The core's clock: embassy-time's, in microseconds since boot.
pub(crate) fn now() -> Instant {
    Instant::from_micros(embassy_time::Instant::now().as_micros())
}

fn to_embassy(at: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_micros(at.as_micros())
}

/// What the connection does once an event's borrow of the engine ends.
enum Action {
    None,
    /// Answer with a JSON-RPC error.
    Error {
        call: CallId,
        code: i32,
        message: &'static str,
    },
    /// Acknowledge a `subscriptions/listen` whose id is `id[..len]`.
    Listen {
        call: CallId,
        id: [u8; MAX_ID],
        len: usize,
    },
    Refuse(CallId),
    Cancelled(CallId),
    Writable(CallId),
    Closed,
}

pub(crate) struct Conn<
    'a,
    T: Tools,
    S: CallStore,
    const HANDLERS: usize,
    const ARGS: usize,
    const RESULT: usize,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
> {
    pub(crate) server: &'a Server<'a, T, HANDLERS, ARGS, RESULT>,
    pub(crate) engine: Engine<'a, S, STREAMS, TABLE, BUF>,
    /// This connection's mark on the handler slots it uses.
    pub(crate) token: u32,
}

impl<
    'a,
    T: Tools,
    S: CallStore,
    const HANDLERS: usize,
    const ARGS: usize,
    const RESULT: usize,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
> Conn<'a, T, S, HANDLERS, ARGS, RESULT, STREAMS, TABLE, BUF>
{
    /// Runs the connection until the peer closes it, the engine closes it,
    /// or the socket fails.
    pub(crate) async fn drive(
        &mut self,
        reader: &mut TcpReader<'_>,
        writer: &mut TcpWriter<'_>,
    ) -> Result<(), ConnError> {
        let mut eof = false;
        // The engine refused input until its output drains.
        let mut input_blocked = false;
        let mut stalls = 0u32;
        loop {
            let (more, wrote) = self.transmit(writer).await?;
            if wrote || !more {
                input_blocked = false;
            }
            // Once the engine is closed, or the peer sent its EOF, and the
            // output went to the socket: done (the caller closes it).
            if !more && (self.engine.is_closed() || eof) {
                return Ok(());
            }
            let deadline = self.engine.poll_timeout();
            let readable = async {
                if eof || input_blocked {
                    pending::<()>().await;
                }
                // Resolves when data is there (taking none of it), or with
                // an error once the peer closed or reset the connection.
                reader.read_with(|_| (0, ())).await
            };
            let writable = async {
                if more {
                    writer.wait_write_ready().await;
                } else {
                    pending::<()>().await;
                }
            };
            let handlers = self.server.outputs(self.token);
            let timer = async {
                match deadline {
                    Some(at) => Timer::at(to_embassy(at)).await,
                    None => pending::<()>().await,
                }
            };
            match select4(readable, writable, handlers, timer).await {
                Either4::First(Ok(())) => {
                    let fed = reader
                        .read_with(|input| {
                            let n = self.feed(input);
                            (n, n)
                        })
                        .await;
                    match fed {
                        Ok(0) => {
                            // The engine waits for its control frames to go
                            // out first.
                            stalls += 1;
                            if stalls > 3 {
                                warn!("mcpwire: the engine consumes no input");
                                return Err(ConnError::Stalled);
                            }
                            input_blocked = true;
                        }
                        Ok(_) => stalls = 0,
                        Err(_) => self.end_of_input(&mut eof),
                    }
                }
                Either4::First(Err(_)) => self.end_of_input(&mut eof),
                Either4::Second(()) => input_blocked = false,
                Either4::Third(()) => self.flush_handlers(),
                Either4::Fourth(()) => {
                    self.engine.handle_timeout(now());
                    self.drain_events();
                }
            }
        }
    }

    fn end_of_input(&mut self, eof: &mut bool) {
        *eof = true;
        self.engine.recv_eof();
        self.drain_events();
    }

    /// Feeds `input` to the engine until it is consumed or the engine
    /// takes no more; how much it took.
    fn feed(&mut self, input: &[u8]) -> usize {
        let mut used = 0;
        while used < input.len() {
            let n = self.engine.recv(&input[used..], now());
            self.drain_events();
            if n == 0 {
                break;
            }
            used += n;
        }
        used
    }

    /// Moves the engine's output into the socket's transmit buffer until
    /// the engine has none (`more` false) or the buffer is full (`more`
    /// true); `wrote`: whether anything moved.
    async fn transmit(&mut self, writer: &mut TcpWriter<'_>) -> Result<(bool, bool), ConnError> {
        let mut idle = 0;
        let mut wrote = false;
        loop {
            if writer.send_queue() >= writer.send_capacity() {
                return Ok((true, wrote));
            }
            let n = writer
                .write_with(|out| {
                    let n = self.engine.poll_transmit(out);
                    (n, n)
                })
                .await
                .map_err(|_| ConnError::Socket)?;
            // An emptied transmit buffer lets blocked calls go on
            // (Writable): they may queue more.
            let moved = self.drain_events();
            if n > 0 || moved {
                wrote |= n > 0;
                idle = 0;
            } else {
                idle += 1;
                if idle > 1 {
                    return Ok((false, wrote));
                }
            }
        }
    }

    /// Handles every queued engine event; whether there was any.
    fn drain_events(&mut self) -> bool {
        let mut any = false;
        loop {
            let action = match self.engine.poll_event() {
                None => break,
                Some(event) => {
                    any = true;
                    classify(self.server, self.token, event)
                }
            };
            match action {
                Action::None => {}
                Action::Error {
                    call,
                    code,
                    message,
                } => {
                    let _ = self.engine.respond_error(call, code, message, None);
                }
                Action::Listen { call, id, len } => self.acknowledge_listen(call, &id[..len]),
                Action::Refuse(call) => self.engine.unauthorized(
                    call,
                    Code::Unauthenticated,
                    "this server authenticates no one",
                    "Bearer",
                ),
                Action::Cancelled(call) => {
                    if let Some(slot) = self.slot_of(call) {
                        slot.with(|s| s.cancel());
                    }
                }
                Action::Writable(call) => {
                    if let Some(slot) = self.slot_of(call) {
                        slot.with(|s| s.blocked = false);
                        self.flush_slot(slot);
                    }
                }
                Action::Closed => self.release_all(),
            }
        }
        any
    }

    /// The built-in `subscriptions/listen` of a server without a listen
    /// source (as the tokio driver's): the acknowledgement with an empty
    /// filter; the stream stays open until the client ends it.
    fn acknowledge_listen(&mut self, call: CallId, id: &[u8]) {
        let mut buf = [0u8; MAX_ID + 96];
        let mut w = JsonWriter::new(&mut buf);
        w.raw(b"{\"_meta\":{")
            .string(KEY_SUBSCRIPTION_ID.as_bytes())
            .raw(b":")
            .raw(id)
            .raw(b"},\"notifications\":{}}");
        if let Ok(params) = w.finish() {
            let _ = self
                .engine
                .notify(call, "notifications/subscriptions/acknowledged", params);
        }
    }

    /// The slot running `call` for this connection.
    fn slot_of(&self, call: CallId) -> Option<&'a Slot<ARGS, RESULT>> {
        let server: &'a Server<'a, T, HANDLERS, ARGS, RESULT> = self.server;
        server
            .slots
            .iter()
            .find(|slot| slot.with(|s| s.owner == self.token && s.call == Some(call)))
    }

    /// Takes what the handlers of this connection's calls have for it.
    fn flush_handlers(&mut self) {
        let server: &'a Server<'a, T, HANDLERS, ARGS, RESULT> = self.server;
        for slot in &server.slots {
            if slot.with(|s| s.owner == self.token) {
                self.flush_slot(slot);
            }
        }
        self.drain_events();
    }

    /// Hands the slot's progress notification, then its outcome, to the
    /// engine, until the engine is busy (mirrors the tokio driver's
    /// per-call queue: a notification first, the answer last).
    fn flush_slot(&mut self, slot: &Slot<ARGS, RESULT>) {
        let engine = &mut self.engine;
        let token = self.token;
        slot.with(|s| {
            let Some(call) = s.call.filter(|_| s.owner == token && !s.blocked) else {
                return;
            };
            if s.note_pending {
                match engine.notify(call, "notifications/progress", &s.note[..s.note_len]) {
                    // A notification that cannot fit is dropped.
                    Ok(()) | Err(SendError::TooLarge { .. }) => {
                        s.note_pending = false;
                        s.wake_handler();
                    }
                    Err(SendError::Busy) => {
                        s.blocked = true;
                        return;
                    }
                    Err(SendError::Gone) => {
                        s.cancel();
                        return;
                    }
                }
            }
            let Phase::Done(mut outcome) = s.phase else {
                return;
            };
            // At most twice: a result too large for the call becomes an
            // error answer.
            for _ in 0..2 {
                let sent = match outcome {
                    Outcome::Result(len) => match slot.io.try_lock() {
                        Ok(io) => engine.respond(call, &io.result[..len]),
                        // The handler lets go of the buffers before it
                        // reports; try again at the next wake.
                        Err(_) => return,
                    },
                    Outcome::Error(e) => engine.respond_error(call, e.code, e.message, None),
                    Outcome::TooLarge(needed) => {
                        let mut data = [0u8; 32];
                        let mut w = JsonWriter::new(&mut data);
                        w.raw(b"{\"needed\":")
                            .int(i64::try_from(needed).unwrap_or(i64::MAX))
                            .raw(b"}");
                        let data = w.finish().ok();
                        engine.respond_error(call, INTERNAL_ERROR, "result too large", data)
                    }
                };
                match sent {
                    Ok(()) | Err(SendError::Gone) => {
                        s.release();
                        return;
                    }
                    Err(SendError::Busy) => {
                        s.blocked = true;
                        return;
                    }
                    Err(SendError::TooLarge { needed }) => outcome = Outcome::TooLarge(needed),
                }
            }
            // Even the short error did not fit the call's buffer.
            s.release();
        });
    }

    /// Ends every call of this connection (it is closing).
    pub(crate) fn release_all(&self) {
        for slot in &self.server.slots {
            slot.with(|s| {
                if s.owner == self.token {
                    s.cancel();
                }
            });
        }
    }
}

/// Copies what an engine event asks for (into a handler slot, or an
/// [`Action`]), so the engine can be called once the event is dropped.
fn classify<T: Tools, const HANDLERS: usize, const ARGS: usize, const RESULT: usize>(
    server: &Server<'_, T, HANDLERS, ARGS, RESULT>,
    token: u32,
    event: ServerEvent<'_>,
) -> Action {
    match event {
        ServerEvent::Request { call, request } => {
            let error = |code, message| Action::Error {
                call,
                code,
                message,
            };
            match request.method {
                b"tools/call" => {
                    let params = request.params;
                    // The engine checked that the tool exists.
                    let Some(tool) = json::get(params, b"name").and_then(T::find) else {
                        return error(INVALID_PARAMS, "Unknown tool");
                    };
                    let args = json::get(params, b"arguments").unwrap_or(b"{}");
                    let token_json = request.meta.progress_token;
                    for slot in &server.slots {
                        match slot.assign(token, call, tool, args, token_json) {
                            Assign::Started => {
                                debug!("mcpwire: tool {} started", tool);
                                return Action::None;
                            }
                            Assign::TooLarge => {
                                return error(
                                    INTERNAL_ERROR,
                                    "arguments larger than the handler's buffer",
                                );
                            }
                            Assign::Busy => {}
                        }
                    }
                    warn!("mcpwire: every handler is busy");
                    error(INTERNAL_ERROR, "server busy: every handler is running")
                }
                b"subscriptions/listen" => {
                    let filter = json::get(request.params, b"notifications");
                    if filter.and_then(json::kind) != Some(json::Kind::Object) {
                        return error(INVALID_PARAMS, "params.notifications is required");
                    }
                    let mut id = [0u8; MAX_ID];
                    let len = request.id.len().min(MAX_ID);
                    id[..len].copy_from_slice(&request.id[..len]);
                    Action::Listen { call, id, len }
                }
                _ => error(METHOD_NOT_FOUND, "Method not found"),
            }
        }
        // Authorization is off in this driver's engine config; a call that
        // still asks is refused, as the tokio driver does without an Auth.
        ServerEvent::Authorize { call, .. } => Action::Refuse(call),
        ServerEvent::Cancelled { call, .. } => Action::Cancelled(call),
        ServerEvent::Writable { call } => Action::Writable(call),
        ServerEvent::ConnectionClosed { .. } => Action::Closed,
    }
}

impl<T: Tools, const HANDLERS: usize, const ARGS: usize, const RESULT: usize>
    Server<'_, T, HANDLERS, ARGS, RESULT>
{
    /// Completes when a handler slot owned by connection `token` has
    /// output for it.
    fn outputs(&self, token: u32) -> impl core::future::Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut ready = false;
            for slot in &self.slots {
                ready |= slot.poll_output(token, cx.waker());
            }
            if ready {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}
