//! The one type the handlers and the connection share: a running
//! handler's link to its call (the messages it sends, and whether the call
//! was cancelled). The `server` module reads these messages and hands them
//! to the engine; the handler side never sees the engine.

use std::borrow::Cow;

use mcpwire_core::mcp::server::{CallId, Failure};
use tokio::sync::watch;

use super::result::{ToolError, json_bytes};
use crate::outbox;

/// A message of a handler for its call.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) call: CallId,
    pub(crate) message: Message,
}

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
    /// Its octets, about (what it holds of memory while it waits).
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Notify { method, params } => method.len() + params.len(),
            Self::Result(result) => result.len(),
            Self::Error { message, data, .. } => message.len() + data.as_ref().map_or(0, Vec::len),
            Self::Failed(_) => 0,
        }
    }

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
}

impl Link {
    pub(crate) fn new(
        call: CallId,
        out: outbox::Sender<Outgoing>,
        cancelled: watch::Receiver<bool>,
    ) -> Self {
        Self {
            call,
            out,
            cancelled,
        }
    }

    /// Sends a notification whose params are JSON text already.
    pub(crate) async fn notify_raw(&self, method: impl Into<Cow<'static, str>>, params: Vec<u8>) {
        let message = Message::Notify {
            method: method.into(),
            params,
        };
        let _ = self
            .out
            .send(Outgoing {
                call: self.call,
                message,
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
