//! The handlers a connection runs: started from the engine's requests,
//! their messages handed to the engine in order, aborted when the engine
//! cancels their call. Generic over the core's [`ServerEngine`], so the
//! same handlers serve the gRPC tunnel and stdio.
//!
//! Handlers run as tokio tasks (a handler that finishes without waiting
//! runs on the connection's task, once). They talk back through one queue
//! per connection ([`Outgoing`]); each running call keeps its task's
//! [`AbortHandle`] and the messages the engine refused as busy.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use mcpwire_core::mcp::server::{CallId, Failure, SendError, ServerEngine, ServerEvent};
use tokio::task::AbortHandle;

use crate::app::App;
use crate::app::link::{CallState, Link, Message, Outgoing};
use crate::outbox;
use crate::storage::grow_doubling;

/// A call whose handler runs; dropping it (the call ended, or its
/// connection) tells the handler and aborts its task.
struct Running {
    task: Option<AbortHandle>,
    state: Arc<CallState>,
    /// Messages the engine refused as busy, in order, each with the
    /// credit it holds (given back as it goes to the engine).
    pending: VecDeque<(Message, u32)>,
}

impl Running {
    fn new(state: Arc<CallState>) -> Self {
        Self {
            task: None,
            state,
            pending: VecDeque::new(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.state.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The running calls of a connection, at their engine record's index (so
/// the set grows to the most calls a connection had at once, like the
/// engine's records, and a call's start and end allocate nothing);
/// dropping them (the connection task ends or is aborted) aborts their
/// handlers.
pub(super) struct Calls {
    slots: Vec<Option<(CallId, Running)>>,
    app: Arc<App>,
    /// The most octets of one call's notifications that may wait for
    /// its client: a handler's next one waits for room (the call's
    /// credit), as a gRPC server's send waits for the client's window.
    max_pending: usize,
    tx: outbox::Sender<Outgoing>,
    /// Handlers started in a task since the connection last asked.
    started_tasks: usize,
}

impl Calls {
    /// The app's listen source, when it has one.
    pub(super) fn subscribe(
        &self,
    ) -> Option<tokio::sync::broadcast::Receiver<crate::app::ListenEvent>> {
        self.app.subscribe()
    }

    /// `max_pending`: the most octets of one call's notifications that
    /// may wait for its client (the binding's largest message).
    pub(super) fn new(app: Arc<App>, tx: outbox::Sender<Outgoing>, max_pending: usize) -> Self {
        Self {
            slots: Vec::new(),
            app,
            max_pending,
            tx,
            started_tasks: 0,
        }
    }

    /// How many handlers went on in a task (they did not answer when
    /// first run) since the last time this was asked: a connection lets
    /// them run before it takes more requests.
    pub(super) fn take_started_tasks(&mut self) -> usize {
        std::mem::take(&mut self.started_tasks)
    }

    /// Acts on an engine event: starts, cancels or flushes a call's
    /// handler. An `Authorize` event is the driver's (it checks the
    /// credentials): its call comes back.
    pub(super) fn on_event<E: ServerEngine + ?Sized>(
        &mut self,
        engine: &mut E,
        event: ServerEvent,
    ) -> Option<CallId> {
        match event {
            ServerEvent::Authorize { call } => return Some(call),
            ServerEvent::Request { call } => self.start(engine, call),
            ServerEvent::Cancelled { call, .. } => self.cancel(call),
            ServerEvent::Writable { call } => self.flush(engine, call),
            ServerEvent::ConnectionClosed { .. } => self.stop_all(),
        }
        None
    }

    /// Starts the handler of a request.
    pub(super) fn start<E: ServerEngine + ?Sized>(&mut self, engine: &mut E, call: CallId) {
        let state = CallState::new(self.max_pending);
        let link = Link::new(call, self.tx.clone(), Arc::clone(&state));
        let Some(request) = engine.request(call) else {
            return;
        };
        let Some(mut work) = self.app.handle(&request, link) else {
            let _ = engine.fail(call, Failure::HandlerFailed);
            return;
        };
        let mut running = Running::new(state);
        // Most handlers finish without waiting: run the handler once here,
        // and spawn a task only for one that waits. Its answer takes the
        // queue like every other message of the call, after the
        // notifications it may have sent.
        if let Poll::Ready(answer) = poll_once(work.as_mut()) {
            let message = answer.map_or(Message::Failed(Failure::HandlerFailed), Message::answer);
            let msg = Outgoing {
                call,
                message,
                credit: 0,
            };
            // Nothing of this call waits in the queue (it is empty): the
            // answer goes to the engine at once.
            if self.tx.is_empty() {
                self.insert(call, running);
                self.outgoing(engine, msg);
                return;
            }
            match self.tx.try_send(msg) {
                Ok(()) => {}
                Err(outbox::TrySendError::Full(msg)) => {
                    let out = self.tx.clone();
                    tokio::spawn(async move {
                        let _ = out.send(msg).await;
                    });
                }
                // The connection is going away.
                Err(outbox::TrySendError::Closed(_)) => return,
            }
            self.insert(call, running);
            return;
        }
        // One task runs the handler and sends its answer (or, when it
        // panicked, the engine's words); an aborted handler answers nothing
        // (the engine already ended the call).
        let out = self.tx.clone();
        let handle = tokio::spawn(async move {
            let message = match CatchUnwind(work).await {
                Ok(answer) => Message::answer(answer),
                Err(_) => Message::Failed(Failure::HandlerFailed),
            };
            let _ = out
                .send(Outgoing {
                    call,
                    message,
                    credit: 0,
                })
                .await;
        });
        running.task = Some(handle.abort_handle());
        self.started_tasks += 1;
        self.insert(call, running);
    }

    /// A handler's message: queue it behind the call's earlier ones.
    pub(super) fn outgoing<E: ServerEngine + ?Sized>(&mut self, engine: &mut E, msg: Outgoing) {
        // Unknown: the call was cancelled meanwhile.
        let Some(r) = self.get_mut(msg.call) else {
            return;
        };
        if !r.pending.is_empty() {
            r.pending.push_back((msg.message, msg.credit));
            self.flush(engine, msg.call);
            return;
        }
        // Nothing queued before it (the usual answer): straight to the
        // engine, queued only when it is busy.
        let mut message = msg.message;
        match send(engine, msg.call, &mut message) {
            Sent::Next => r.state.give_back(msg.credit),
            Sent::Ended => self.cancel(msg.call),
            Sent::Busy => r.pending.push_back((message, msg.credit)),
        }
    }

    /// A handler's message, then every other one queued meanwhile (taken
    /// before the driver writes).
    pub(super) fn outgoing_queued<E: ServerEngine + ?Sized>(
        &mut self,
        engine: &mut E,
        first: Outgoing,
        rx: &mut outbox::Receiver<Outgoing>,
    ) {
        self.outgoing(engine, first);
        while let Some(msg) = rx.try_recv() {
            self.outgoing(engine, msg);
        }
    }

    /// Hands the call's queued messages to the engine, in order, until it
    /// is busy.
    pub(super) fn flush<E: ServerEngine + ?Sized>(&mut self, engine: &mut E, call: CallId) {
        let Some(r) = self.get_mut(call) else {
            return;
        };
        let ended = loop {
            let Some((msg, credit)) = r.pending.front_mut() else {
                break false;
            };
            match send(engine, call, msg) {
                Sent::Next => {
                    let credit = *credit;
                    r.pending.pop_front();
                    r.state.give_back(credit);
                }
                Sent::Busy => break false,
                Sent::Ended => break true,
            }
        };
        if ended {
            self.cancel(call);
        }
    }

    /// The engine ended the call: stop its handler.
    pub(super) fn cancel(&mut self, call: CallId) {
        drop(self.remove(call));
    }

    /// Whether no call is running.
    pub(super) fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// Stops every running call.
    pub(super) fn stop_all(&mut self) {
        for slot in &mut self.slots {
            drop(slot.take());
        }
    }

    fn insert(&mut self, call: CallId, running: Running) {
        let i = call.index();
        grow_doubling(&mut self.slots, i + 1, usize::MAX, || None);
        // The engine reuses an index only after that call ended; a record
        // still here lost its end: stop its handler.
        drop(self.slots[i].replace((call, running)));
    }

    fn get_mut(&mut self, call: CallId) -> Option<&mut Running> {
        match self.slots.get_mut(call.index()) {
            Some(Some((c, r))) if *c == call => Some(r),
            _ => None,
        }
    }

    fn remove(&mut self, call: CallId) -> Option<Running> {
        let slot = self.slots.get_mut(call.index())?;
        if slot.as_ref().is_some_and(|(c, _)| *c == call) {
            slot.take().map(|(_, r)| r)
        } else {
            None
        }
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// What became of a message handed to the engine.
enum Sent {
    /// Taken (or dropped): the call's next message may follow.
    Next,
    /// The engine is busy: the message waits.
    Busy,
    /// The call is over.
    Ended,
}

/// Hands one message of `call` to the engine.
fn send<E: ServerEngine + ?Sized>(engine: &mut E, call: CallId, msg: &mut Message) -> Sent {
    let sent = match msg {
        Message::Notify { method, params } => engine.notify(call, method, params),
        Message::Result(result) => engine.respond(call, result),
        Message::Error {
            code,
            message,
            data,
        } => engine.respond_error(call, *code, message, data.as_deref()),
        Message::Failed(failure) => engine.fail(call, *failure),
    };
    match sent {
        // The handler is done; the engine ends the call.
        Ok(()) if msg.is_final() => Sent::Ended,
        Ok(()) => Sent::Next,
        Err(SendError::Busy) => Sent::Busy,
        Err(SendError::Gone) => Sent::Ended,
        Err(SendError::TooLarge { .. }) => match msg {
            // A notification that cannot fit is dropped.
            Message::Notify { .. } => Sent::Next,
            // An error too large for the call: the core's words instead.
            Message::Error { .. } => {
                *msg = Message::Failed(Failure::ResultTooLarge);
                send(engine, call, msg)
            }
            // A result too large: the engine answered it itself.
            Message::Result(_) | Message::Failed(_) => Sent::Ended,
        },
    }
}

/// A future whose panic is its output (`Err`), as a task's `JoinError`
/// would say it, without a second task to watch the first.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = Pin::new(&mut self.0);
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

/// Polls `fut` once, with a waker that does nothing (a future that waits
/// registers the real one when its task polls it again); a panic is caught.
fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<std::thread::Result<F::Output>> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(&mut cx))) {
        Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(panic) => Poll::Ready(Err(panic)),
    }
}
