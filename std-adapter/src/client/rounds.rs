//! A tool call that may ask for input (MCP 2026-07-28 §9) on a client
//! engine's task: the rounds are the core engine's
//! ([`CallOptions::answers_input`]: each `input_required` result reaches
//! the call as its input requests, the answers go back, the engine sends
//! the next round with a new id, `inputResponses` and the result's
//! `requestState`); this side only asks the application.

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::CallOptions;
use serde_json::{Map, Value};

use super::Engine;
use super::call::{EngineCall, Event};
use super::error::{CallError, RawMessage};
use super::typed::{CallToolResult, call_tool_result, result_of};

/// The application's answer to one round: its input requests in, the
/// answers (keyed as the requests) out.
type OnInput<'a> = dyn FnMut(&Map<String, Value>) -> Result<Map<String, Value>, CallError> + 'a;

impl Engine {
    /// `tools/call` with `params` (the tool's name and arguments, the
    /// client capabilities the answers need in `_meta`): each round's
    /// input requests go to `on_input`, its answers back to the engine,
    /// until the tool's result (within one request timeout, and the
    /// engine's round limit).
    pub(super) async fn call_tool_with_input(
        &self,
        params: Value,
        on_input: &mut OnInput<'_>,
    ) -> Result<CallToolResult, CallError> {
        let mut request =
            serde_json::json!({"jsonrpc": "2.0", "method": "tools/call", "params": params});
        self.complete(&mut request)?;
        let body =
            serde_json::to_vec(&request).map_err(|e| CallError::invalid_request(&e.to_string()))?;
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let options = CallOptions {
            binding: self.grpc.unwrap_or_default().binding(),
            answers_input: true,
            ..CallOptions::default()
        };
        let deadline = Some(tokio::time::Instant::now() + self.request_timeout);
        let mut call = EngineCall::start(
            self.handle.clone(),
            id,
            body.into(),
            options,
            deadline,
            self.max_message,
            true,
        )
        .await?;
        loop {
            match call.next_event().await? {
                Some(Event::InputRequired(requests)) => {
                    let requests: Map<String, Value> = serde_json::from_slice(&requests)
                        .map_err(|_| CallError::new(Code::Internal, "inputRequests is not JSON"))?;
                    let answers = serde_json::to_vec(&on_input(&requests)?)
                        .map_err(|e| CallError::new(Code::Internal, e.to_string()))?;
                    call.answer_input(answers).await?;
                }
                Some(Event::Message(RawMessage::Notification(_))) => {}
                Some(Event::Message(RawMessage::Response(response))) => {
                    let response: Value = serde_json::from_slice(response.text())
                        .map_err(|_| CallError::new(Code::Internal, "a message is not JSON"))?;
                    return call_tool_result(&result_of(response)?);
                }
                None => {
                    return Err(CallError::new(
                        Code::Internal,
                        "the call ended without a response",
                    ));
                }
            }
        }
    }
}
