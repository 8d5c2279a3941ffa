//! A call in flight on an engine's task: [`EngineCall::next`] gives its
//! notifications as they arrive, then the response. Dropping it before the
//! end cancels it (the engine resets its stream, closes its exchange or
//! sends `notifications/cancelled`, as its binding says).
//!
//! A call that the engine could not send (a connection going away before
//! its request left: the core's
//! [`Diagnostics::retry_elsewhere`](mcpwire_core::mcp::client::Diagnostics::retry_elsewhere))
//! is handed to the engine once more: it goes on the engine's next
//! connection.
//!
//! A call started with `answers_input` ([`EngineCall::next_event`]) also
//! gives the server's requests for input ([`Event::InputRequired`]); its
//! answers go back with [`EngineCall::answer_input`], and the engine sends
//! the next round (the core's loop).

use std::sync::Arc;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::{CallOptions, Diagnostics};
use serde_json::Value;

use tokio::sync::oneshot;

use super::dispatch::{CallMsg, Command, Handle, Refusal};
use super::error::{CallError, RawMessage, RawResponse, StreamMessage};
use super::mailbox;

/// The next thing a call gives.
#[derive(Debug)]
pub(crate) enum Event {
    Message(RawMessage),
    /// The server asks for input: the `inputRequests` (JSON text).
    InputRequired(Vec<u8>),
}

/// The running attempt of a call: its key on the engine's task.
#[derive(Debug)]
struct Attempt {
    key: u64,
    events: mailbox::Receiver<CallMsg>,
    /// The engine ended the call: nothing to cancel.
    done: bool,
}

/// A call in flight on an engine's task.
#[derive(Debug)]
pub(crate) struct EngineCall {
    handle: Handle,
    id: Value,
    /// The request's JSON text (shared with the engine's task).
    body: Arc<[u8]>,
    options: CallOptions,
    deadline: Option<tokio::time::Instant>,
    max_message: usize,
    /// The call was handed to the engine again (once).
    resent: bool,
    attempt: Option<Attempt>,
    finished: bool,
    /// What the engine reported of the exchange, and the failure's
    /// `WWW-Authenticate`.
    diagnostics: Option<(Diagnostics, Option<String>)>,
}

impl EngineCall {
    /// Hands a call of `body` (a JSON-RPC message with its `id` and
    /// `_meta`) to the engine of `handle`; with `confirm`, waits for the
    /// engine to take it (or queue it), so that a refusal is this
    /// function's error rather than the call's first event.
    pub(crate) async fn start(
        handle: Handle,
        id: Value,
        body: Arc<[u8]>,
        options: CallOptions,
        deadline: Option<tokio::time::Instant>,
        max_message: usize,
        confirm: bool,
    ) -> Result<Self, CallError> {
        let mut call = Self {
            handle,
            id,
            body,
            options,
            deadline,
            max_message,
            resent: false,
            attempt: None,
            finished: false,
            diagnostics: None,
        };
        call.send(confirm).await?;
        Ok(call)
    }

    /// The request's id.
    pub(crate) fn id(&self) -> &Value {
        &self.id
    }

    /// What the engine reported of the call's exchange with its outcome
    /// (status, HTTP version...), and a failure's `WWW-Authenticate`.
    pub(crate) fn diagnostics(&self) -> Option<(&Diagnostics, Option<&str>)> {
        let (d, auth) = self.diagnostics.as_ref()?;
        Some((d, auth.as_deref()))
    }

    /// Hands the call to the engine's task; with `confirm` its refusal is
    /// the error, else it comes as its first event.
    async fn send(&mut self, confirm: bool) -> Result<(), CallError> {
        if self
            .deadline
            .is_some_and(|d| d <= tokio::time::Instant::now())
        {
            return Err(deadline_exceeded());
        }
        // What is left of the deadline, for the engine.
        let mut options = self.options;
        if let Some(d) = self.deadline {
            options.timeout = Some(d.saturating_duration_since(tokio::time::Instant::now()));
        }
        let key = self.handle.key();
        let (etx, erx) = mailbox::mailbox();
        let (atx, arx) = match confirm {
            true => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        let sent = self.handle.send(Command::Start {
            key,
            body: Arc::clone(&self.body),
            options,
            events: etx,
            accepted: atx,
        });
        if !sent {
            return Err(CallError::new(Code::Unavailable, "the client is closed"));
        }
        if let Some(arx) = arx {
            arx.await
                .unwrap_or(Err(Refusal::Gone))
                .map_err(refusal_error)?;
        }
        self.attempt = Some(Attempt {
            key,
            events: erx,
            done: false,
        });
        Ok(())
    }

    /// The next message: notifications as they arrive, then the response;
    /// `Ok(None)` after the response (or at the end of a notification's
    /// empty stream).
    pub(crate) async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        let r = match self.next_raw().await? {
            None => return Ok(None),
            Some(RawMessage::Notification(json)) => self
                .parse(&json)
                .map(|v| Some(StreamMessage::Notification(v))),
            Some(RawMessage::Response(response)) => self
                .parse(response.text())
                .map(|v| Some(StreamMessage::Response(v))),
        };
        if r.is_err() {
            self.finished = true;
        }
        r
    }

    /// [`EngineCall::next`] as the JSON text of each message, as the
    /// client engine validated it (not parsed here).
    pub(crate) async fn next_raw(&mut self) -> Result<Option<RawMessage>, CallError> {
        let r = self.next_inner().await;
        if r.is_err() {
            self.finished = true;
        }
        r
    }

    async fn next_inner(&mut self) -> Result<Option<RawMessage>, CallError> {
        match self.next_event_inner().await? {
            Some(Event::Message(m)) => Ok(Some(m)),
            Some(Event::InputRequired(_)) => {
                self.cancel();
                Err(CallError::new(
                    Code::Internal,
                    "the server asks for input, and this call answers none",
                ))
            }
            None => Ok(None),
        }
    }

    /// [`EngineCall::next_raw`], and the server's requests for input of a
    /// call started with `answers_input`.
    pub(crate) async fn next_event(&mut self) -> Result<Option<Event>, CallError> {
        let r = self.next_event_inner().await;
        if r.is_err() {
            self.finished = true;
        }
        r
    }

    /// Answers the call's [`Event::InputRequired`] with `responses` (a
    /// JSON object keyed as the requests): the engine sends its next round.
    pub(crate) async fn answer_input(&mut self, responses: Vec<u8>) -> Result<(), CallError> {
        let Some(attempt) = self.attempt.as_ref().filter(|a| !a.done) else {
            return Err(CallError::new(Code::Internal, "the call is over"));
        };
        let (reply, answered) = oneshot::channel();
        let sent = self.handle.send(Command::AnswerInput {
            key: attempt.key,
            responses,
            reply,
        });
        if !sent {
            return Err(CallError::new(Code::Unavailable, "the client is closed"));
        }
        answered
            .await
            .unwrap_or(Err(Refusal::Gone))
            .map_err(refusal_error)
    }

    async fn next_event_inner(&mut self) -> Result<Option<Event>, CallError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            let Some(attempt) = self.attempt.as_mut() else {
                return Ok(None);
            };
            let msg = match self.deadline {
                Some(d) => match tokio::time::timeout_at(d, attempt.events.recv()).await {
                    Ok(m) => m,
                    Err(_) => {
                        self.cancel();
                        return Err(deadline_exceeded());
                    }
                },
                None => attempt.events.recv().await,
            };
            let Some(msg) = msg else {
                attempt.done = true;
                return Err(CallError::new(Code::Unavailable, "the client closed"));
            };
            match msg {
                CallMsg::Notification(json) => {
                    self.check_size(&json)?;
                    return Ok(Some(Event::Message(RawMessage::Notification(json))));
                }
                CallMsg::InputRequired(requests) => {
                    return Ok(Some(Event::InputRequired(requests)));
                }
                CallMsg::Response(json, result) => {
                    attempt.done = true;
                    self.check_size(&json)?;
                    self.finished = true;
                    return Ok(Some(Event::Message(RawMessage::Response(
                        RawResponse::located(json, result),
                    ))));
                }
                CallMsg::Diagnostics(d) => self.diagnostics = Some((d, None)),
                CallMsg::Failed {
                    response,
                    message,
                    diagnostics,
                    www_authenticate,
                } => {
                    attempt.done = true;
                    self.diagnostics = Some((diagnostics, www_authenticate.clone()));
                    if !diagnostics.transport {
                        // The server's JSON-RPC error: the response.
                        self.check_size(&response)?;
                        self.finished = true;
                        return Ok(Some(Event::Message(RawMessage::Response(
                            RawResponse::located(response, None),
                        ))));
                    }
                    if diagnostics.retry_elsewhere() && !self.resent {
                        // Never processed, and its connection could not
                        // send it again: the one retry goes to the
                        // engine's next connection.
                        self.resent = true;
                        self.attempt = None;
                        Box::pin(self.send(false)).await?;
                        continue;
                    }
                    let text = serde_json::from_slice::<String>(&message)
                        .unwrap_or_else(|_| String::from_utf8_lossy(&message).into_owned());
                    let status = diagnostics.grpc_status.unwrap_or(Code::Unknown);
                    let mut e = CallError::new(status, text.clone());
                    e.diagnostics.http_status = diagnostics.http_status;
                    e.diagnostics.grpc_message = Some(text);
                    e.diagnostics.www_authenticate = www_authenticate;
                    return Err(e);
                }
                CallMsg::Ended => {
                    attempt.done = true;
                    self.finished = true;
                    return Ok(None);
                }
                CallMsg::Refused(r) => {
                    attempt.done = true;
                    return Err(refusal_error(r));
                }
            }
        }
    }

    /// A message over the configured maximum ends the call with
    /// RESOURCE_EXHAUSTED.
    fn check_size(&mut self, json: &[u8]) -> Result<(), CallError> {
        let max = self.max_message;
        if json.len() > max {
            self.cancel();
            return Err(CallError::new(
                Code::ResourceExhausted,
                format!("a message of {} octets is over {max}", json.len()),
            ));
        }
        Ok(())
    }

    /// A message of the call as JSON.
    fn parse(&mut self, json: &[u8]) -> Result<Value, CallError> {
        self.check_size(json)?;
        serde_json::from_slice(json).map_err(|_| {
            self.cancel();
            CallError::new(Code::Internal, "a message is not JSON")
        })
    }

    fn cancel(&mut self) {
        if let Some(a) = self.attempt.take()
            && !a.done
        {
            self.handle.send(Command::Cancel { key: a.key });
        }
    }
}

impl Drop for EngineCall {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The error of a call the engine did not take.
pub(super) fn refusal_error(r: Refusal) -> CallError {
    match r {
        Refusal::Gone => CallError::new(Code::Unavailable, "the client is closed"),
        Refusal::Down(why) => CallError::new(Code::Unavailable, why),
        Refusal::Exhausted(why) => CallError::new(Code::ResourceExhausted, why),
        Refusal::Invalid { code, message } => {
            let mut e = CallError::invalid_request(message);
            e.diagnostics.rpc_code = Some(code);
            e
        }
        Refusal::TooLarge { needed } => CallError::new(
            Code::ResourceExhausted,
            format!("the framed request needs {needed} octets, more than max_message_bytes"),
        ),
    }
}

fn deadline_exceeded() -> CallError {
    CallError::new(Code::DeadlineExceeded, "the request timeout passed")
}
