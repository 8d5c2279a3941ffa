//! Handler slots: the meeting point of connection tasks and handler tasks.
//!
//! A slot belongs to one handler task (it attaches at start). A connection
//! task that receives a `tools/call` picks an idle slot, writes the call's
//! arguments into the slot's buffers and marks it assigned; the handler task
//! runs the tool on those buffers, posts progress notifications one at a
//! time, and marks the slot done with the result's length. The connection
//! hands the notification and the result to its engine, then frees the
//! slot. A cancelled call (client reset, deadline, connection end) marks
//! the slot cancelled: the handler drops the tool's future at its next
//! await and frees the slot itself.
//!
//! The small state sits behind a blocking mutex (never held across an
//! await); the two buffers sit behind an async mutex, which the handler
//! holds while the tool runs, so the tool borrows them directly.

use core::cell::RefCell;
use core::future::poll_fn;
use core::task::Poll;

use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::Mutex as BlockingMutex;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::mutex::Mutex;
use embassy_sync::waitqueue::WakerRegistration;
use mcpwire_core::mcp::RpcError;
use mcpwire_core::mcp::error::INTERNAL_ERROR;
use mcpwire_core::mcp::server::{CallId, Failure};
use mcpwire_core::mcp::tool::{Arguments, OutputError, ToolContext, ToolOutput, Tools};
use mcpwire_core::mcp::writer::JsonWriter;

/// Longest `progressToken` kept (raw JSON); a request with a longer one
/// gets no progress notifications.
pub const MAX_PROGRESS_TOKEN: usize = 128;
/// Room for one progress notification's `params` (token, numbers and
/// message); a larger one is dropped.
pub const NOTE: usize = MAX_PROGRESS_TOKEN + 192;
/// What became of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The result's JSON, this long, is in the slot's result buffer.
    Result(usize),
    /// The tool's JSON-RPC error.
    Error(RpcError),
    /// A failure the engine words (the result did not fit).
    Failed(Failure),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Free.
    Idle,
    /// A connection wrote a call; the handler has not started it.
    Assigned,
    /// The handler runs the tool.
    Running,
    /// The tool ended; the connection takes the outcome.
    Done(Outcome),
    /// The call is over; the handler frees the slot.
    Cancelled,
}

pub(crate) struct State {
    /// A handler task serves this slot.
    pub(crate) attached: bool,
    pub(crate) phase: Phase,
    /// The connection that owns the call (0: none).
    pub(crate) owner: u32,
    pub(crate) call: Option<CallId>,
    pub(crate) tool: usize,
    pub(crate) args_len: usize,
    token: [u8; MAX_PROGRESS_TOKEN],
    token_len: Option<usize>,
    /// A progress notification's `params`, waiting for the connection.
    pub(crate) note: [u8; NOTE],
    pub(crate) note_len: usize,
    pub(crate) note_pending: bool,
    /// The engine said Busy: wait for its Writable event.
    pub(crate) blocked: bool,
    handler: WakerRegistration,
    connection: WakerRegistration,
}

impl State {
    const fn new() -> Self {
        Self {
            attached: false,
            phase: Phase::Idle,
            owner: 0,
            call: None,
            tool: 0,
            args_len: 0,
            token: [0; MAX_PROGRESS_TOKEN],
            token_len: None,
            note: [0; NOTE],
            note_len: 0,
            note_pending: false,
            blocked: false,
            handler: WakerRegistration::new(),
            connection: WakerRegistration::new(),
        }
    }

    /// Whether the owning connection has something to take.
    fn has_output(&self) -> bool {
        !self.blocked && (self.note_pending || matches!(self.phase, Phase::Done(_)))
    }

    /// Frees the slot for the next call.
    pub(crate) fn release(&mut self) {
        self.phase = Phase::Idle;
        self.owner = 0;
        self.call = None;
        self.note_pending = false;
        self.blocked = false;
        self.handler.wake();
    }

    /// Ends the call: the handler stops (or the outcome is forgotten).
    pub(crate) fn cancel(&mut self) {
        match self.phase {
            Phase::Assigned | Phase::Running => {
                self.phase = Phase::Cancelled;
                self.note_pending = false;
                self.blocked = false;
                self.handler.wake();
            }
            Phase::Done(_) => self.release(),
            Phase::Idle | Phase::Cancelled => {}
        }
    }

    /// Lets the handler go on (its notification was taken).
    pub(crate) fn wake_handler(&mut self) {
        self.handler.wake();
    }
}

/// The buffers of a call: its arguments in, its result out.
pub(crate) struct Io<const ARGS: usize, const RESULT: usize> {
    pub(crate) args: [u8; ARGS],
    pub(crate) result: [u8; RESULT],
}

/// One handler slot.
pub(crate) struct Slot<const ARGS: usize, const RESULT: usize> {
    pub(crate) state: BlockingMutex<CriticalSectionRawMutex, RefCell<State>>,
    pub(crate) io: Mutex<CriticalSectionRawMutex, Io<ARGS, RESULT>>,
}

impl<const ARGS: usize, const RESULT: usize> Slot<ARGS, RESULT> {
    pub(crate) const fn new() -> Self {
        Self {
            state: BlockingMutex::new(RefCell::new(State::new())),
            io: Mutex::new(Io {
                args: [0; ARGS],
                result: [0; RESULT],
            }),
        }
    }

    /// Runs `f` on the state.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.state.lock(|s| f(&mut s.borrow_mut()))
    }

    /// Hands a call to the slot's handler, if the slot is free. `args` is
    /// the raw `arguments` object.
    pub(crate) fn assign(
        &self,
        owner: u32,
        call: CallId,
        tool: usize,
        args: &[u8],
        token: Option<&[u8]>,
    ) -> Assign {
        let free = self.with(|s| s.attached && s.phase == Phase::Idle);
        if !free {
            return Assign::Busy;
        }
        if args.len() > ARGS {
            return Assign::TooLarge;
        }
        // Idle: no handler holds the buffers.
        let Ok(mut io) = self.io.try_lock() else {
            return Assign::Busy;
        };
        io.args[..args.len()].copy_from_slice(args);
        drop(io);
        self.with(|s| {
            s.phase = Phase::Assigned;
            s.owner = owner;
            s.call = Some(call);
            s.tool = tool;
            s.args_len = args.len();
            s.token_len = None;
            if let Some(t) = token.filter(|t| t.len() <= MAX_PROGRESS_TOKEN) {
                s.token[..t.len()].copy_from_slice(t);
                s.token_len = Some(t.len());
            }
            s.note_pending = false;
            s.blocked = false;
            s.handler.wake();
        });
        Assign::Started
    }

    /// Registers the connection's waker on the slot if it owns it; whether
    /// the slot has output for it.
    pub(crate) fn poll_output(&self, owner: u32, waker: &core::task::Waker) -> bool {
        self.with(|s| {
            if s.owner != owner || s.call.is_none() {
                return false;
            }
            s.connection.register(waker);
            s.has_output()
        })
    }
}

/// What [`Slot::assign`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assign {
    Started,
    /// Not free (or no handler task serves it).
    Busy,
    /// The arguments do not fit the slot.
    TooLarge,
}

/// The handler task's loop on `slot`: wait for a call, run the tool,
/// report, again.
pub(crate) async fn serve<T: Tools, const ARGS: usize, const RESULT: usize>(
    tools: &T,
    slot: &Slot<ARGS, RESULT>,
) -> ! {
    loop {
        // The next call; a call cancelled before it started is dropped.
        let (tool, args_len) = poll_fn(|cx| {
            slot.with(|s| match s.phase {
                Phase::Assigned => {
                    s.phase = Phase::Running;
                    Poll::Ready((s.tool, s.args_len))
                }
                Phase::Cancelled => {
                    s.release();
                    s.handler.register(cx.waker());
                    Poll::Pending
                }
                _ => {
                    s.handler.register(cx.waker());
                    Poll::Pending
                }
            })
        })
        .await;
        let outcome = {
            let mut io = slot.io.lock().await;
            let io = &mut *io;
            let cx = SlotContext { slot };
            let mut out = ToolOutput::new(&mut io.result);
            let ended = select(
                tools.call(tool, Arguments::new(&io.args[..args_len]), &cx, &mut out),
                cancelled(slot),
            )
            .await;
            match ended {
                Either::First(Ok(())) => Some(match out.finish() {
                    Ok(text) => Outcome::Result(text.len()),
                    Err(OutputError::Overflow(_)) => Outcome::Failed(Failure::ResultTooLarge),
                    Err(OutputError::Order) => Outcome::Error(RpcError::new(
                        INTERNAL_ERROR,
                        "the tool wrote content after structuredContent",
                    )),
                }),
                Either::First(Err(e)) => Some(Outcome::Error(e)),
                Either::Second(()) => None,
            }
        };
        // The buffers are free again: report.
        slot.with(|s| match (s.phase, outcome) {
            (Phase::Running, Some(outcome)) => {
                s.phase = Phase::Done(outcome);
                s.connection.wake();
            }
            _ => s.release(),
        });
    }
}

/// Completes when the slot's call is no longer running.
async fn cancelled<const ARGS: usize, const RESULT: usize>(slot: &Slot<ARGS, RESULT>) {
    poll_fn(|cx| {
        slot.with(|s| {
            if s.phase == Phase::Running {
                s.handler.register(cx.waker());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    })
    .await;
}

/// What a tool sees of its slot.
struct SlotContext<'s, const ARGS: usize, const RESULT: usize> {
    slot: &'s Slot<ARGS, RESULT>,
}

impl<const ARGS: usize, const RESULT: usize> ToolContext for SlotContext<'_, ARGS, RESULT> {
    async fn progress(&self, progress: u64, total: Option<u64>, message: Option<&str>) {
        // One notification waits at a time: wait for the last to be taken.
        let free = poll_fn(|cx| {
            self.slot.with(|s| {
                if s.phase != Phase::Running || s.token_len.is_none() {
                    Poll::Ready(false)
                } else if !s.note_pending {
                    Poll::Ready(true)
                } else {
                    s.handler.register(cx.waker());
                    Poll::Pending
                }
            })
        })
        .await;
        if !free {
            return;
        }
        self.slot.with(|s| {
            let Some(token_len) = s.token_len else {
                return;
            };
            let mut w = JsonWriter::new(&mut s.note);
            mcpwire_core::mcp::tool::write_progress(
                &mut w,
                &s.token[..token_len],
                progress,
                total,
                message,
            );
            // Too large for the outbox: dropped, as the trait says.
            if let Ok(text) = w.finish() {
                s.note_len = text.len();
                s.note_pending = true;
                s.connection.wake();
            }
        });
    }

    async fn sleep(&self, duration: core::time::Duration) {
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        embassy_time::Timer::after(embassy_time::Duration::from_micros(micros)).await;
    }

    fn is_cancelled(&self) -> bool {
        self.slot.with(|s| s.phase != Phase::Running)
    }
}
