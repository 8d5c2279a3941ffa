//! The one type the handlers and the connection share: a running
//! handler's link to its call (the messages it sends, and whether the call
//! was cancelled). The `server` module reads these messages and hands them
//! to the engine; the handler side never sees the engine.

use std::borrow::Cow;

use std::sync::Arc;

use mcpwire_core::mcp::server::{CallId, Failure};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::result::{ToolError, json_bytes};
use crate::outbox;

/// A message of a handler for its call.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) call: CallId,
    pub(crate) message: Message,
    /// The room it takes of its call's credit, given back when it goes
    /// to the engine (a notification's; an answer needs none).
    pub(crate) credit: Option<Credit>,
}

/// Room a notification takes of its call's credit while it waits.
pub(crate) type Credit = OwnedSemaphorePermit;

/// What a handler sends: notifications, then one final answer.
#[derive(Debug)]
pub(crate) enum Message {
    Notify {
        method: Cow<'static, str>,
        params: Vec<u8>,
    },
    Result(Vec<u8>),
    Error {
        code: i32,
        message: String,
        data: Option<Vec<u8>>,
    },
    /// The handler could not answer; the engine says why in its words.
    Failed(Failure),
}

impl Message {
    /// Whether the message ends the call.
    pub(crate) fn is_final(&self) -> bool {
        !matches!(self, Self::Notify { .. })
    }

    /// A handler's answer: its result's JSON text, or its error.
    pub(crate) fn answer(result: Result<Vec<u8>, ToolError>) -> Self {
        match result {
            Ok(result) => Self::Result(result),
            Err(e) => Self::Error {
                code: e.code,
                message: e.message,
                data: e.data.as_ref().map(json_bytes),
            },
        }
    }
}

/// The link of a running handler to its call: notifications and
/// cancellation.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    call: CallId,
    out: outbox::Sender<Outgoing>,
    cancelled: watch::Receiver<bool>,
    /// The call's credit: octets of notifications that may wait for the
    /// client at once.
    credit: Arc<Semaphore>,
    /// Its size.
    credit_total: u32,
}

impl Link {
    /// `max_waiting`: the call's credit in octets.
    pub(crate) fn new(
        call: CallId,
        out: outbox::Sender<Outgoing>,
        cancelled: watch::Receiver<bool>,
        max_waiting: usize,
    ) -> Self {
        let credit_total = u32::try_from(max_waiting.max(1)).unwrap_or(u32::MAX);
        Self {
            call,
            out,
            cancelled,
            credit: Arc::new(Semaphore::new(credit_total as usize)),
            credit_total,
        }
    }

    /// Sends a notification whose params are JSON text already; waits
    /// while the call's earlier notifications fill its credit (the client
    /// has not taken them yet).
    pub(crate) async fn notify_raw(&self, method: impl Into<Cow<'static, str>>, params: Vec<u8>) {
        let method = method.into();
        let len = method.len() + params.len();
        let room = u32::try_from(len).map_or(self.credit_total, |n| n.clamp(1, self.credit_total));
        // Never closed: the semaphore lives as long as the link.
        let credit = Arc::clone(&self.credit).acquire_many_owned(room).await.ok();
        let message = Message::Notify { method, params };
        let _ = self
            .out
            .send(Outgoing {
                call: self.call,
                message,
                credit,
            })
            .await;
    }

    /// Completes when the call is cancelled or the connection is gone.
    pub(crate) async fn cancelled(&self) {
        let mut rx = self.cancelled.clone();
        // An error means the connection task is gone: cancelled as well.
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Whether the call is cancelled or the connection is gone.
    pub(crate) fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow() || self.out.is_closed()
    }
}
