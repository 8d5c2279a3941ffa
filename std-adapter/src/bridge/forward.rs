//! One forwarded request: the downstream call (the bridge's progress token
//! on it, the host's deadline), the server's notifications to the host
//! (its token and id on them), the answer, and a list's pages merged for a
//! host that cannot page. The rules are the core's
//! ([`mcpwire_core::mcp::proxy`]); this is the async wiring.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpwire_core::mcp::proxy::pages::{self, Cursor, MergeError};
use mcpwire_core::mcp::proxy::rewrite::{self, Notification};
use mcpwire_core::mcp::proxy::{self, List, Method};
use mcpwire_core::mcp::server::Failure;
use mcpwire_core::mcp::writer::Overflow;
use serde_json::{Value, json};

use super::{Options, refusal_of};
use crate::client::MAX_LIST_PAGES;
use crate::{CallError, Client, ForwardRequest, RawMessage, RawResponse, ToolError};

/// What a core writer writes, in a buffer of `hint` octets, or of as many
/// as it said it needed.
pub(crate) fn written(
    hint: usize,
    write: impl Fn(&mut [u8]) -> Result<usize, Overflow>,
) -> Vec<u8> {
    let mut out = vec![0; hint];
    let n = match write(&mut out) {
        Ok(n) => n,
        Err(Overflow { needed }) => {
            out.resize(needed, 0);
            write(&mut out).unwrap_or(0)
        }
    };
    out.truncate(n);
    out
}

/// The request forwarded (with `params` in place of the host's, when
/// given): its result's JSON text. A list's pages are followed and merged
/// when the host cannot page ([`ForwardRequest::whole_list`]).
pub(super) async fn request(
    client: &Client,
    request: &ForwardRequest,
    params: Option<&[u8]>,
    options: &Options,
) -> Result<Vec<u8>, ToolError> {
    let first = call(client, request, params, options).await?;
    match Method::of(request.method()) {
        // Boxed: the usual call's future stays small.
        Method::List(list) if request.whole_list() => {
            Box::pin(merge_pages(client, request, params, first, list, options)).await
        }
        _ => Ok(first),
    }
}

/// Follows the first page's cursor with the same request carrying it, up
/// to [`MAX_LIST_PAGES`] pages in all (typed binding §7 step 7), the
/// pages' text at most [`Options::max_bytes`]; then the pages merged.
async fn merge_pages(
    client: &Client,
    request: &ForwardRequest,
    params: Option<&[u8]>,
    first: Vec<u8>,
    list: List,
    options: &Options,
) -> Result<Vec<u8>, ToolError> {
    let base = params.unwrap_or(request.raw_params());
    let mut bytes = first.len();
    let mut cursor = match pages::next_cursor(&first) {
        Cursor::Next(c) => Some(c.to_vec()),
        Cursor::End => None,
    };
    let mut read: Vec<Vec<u8>> = Vec::new();
    while let Some(c) = cursor.take() {
        if read.len() + 1 >= MAX_LIST_PAGES {
            break;
        }
        let params = written(base.len() + c.len() + 12, |out| {
            pages::with_cursor(base, &c, out)
        });
        let page = call(client, request, Some(&params), options).await?;
        bytes = bytes.saturating_add(page.len());
        if bytes > options.max_bytes {
            return Err(ToolError::internal(format!(
                "the server's list is larger than the {} octets the bridge gathers ({} pages read)",
                options.max_bytes,
                read.len() + 2
            )));
        }
        if let Cursor::Next(c) = pages::next_cursor(&page) {
            cursor = Some(c.to_vec());
        }
        read.push(page);
    }
    let mut out = vec![0; pages::merged_len_bound(&first, &read)];
    let key = list.key();
    match pages::merge(&first, key, &read, &mut out) {
        Ok(n) => {
            out.truncate(n);
            Ok(out)
        }
        // A single page that is not a list goes on as it came.
        Err(_) if read.is_empty() => Ok(first),
        Err(MergeError::NoArray { page: 0 }) => Err(ToolError::internal(format!(
            "the server's list has no `{key}` array"
        ))),
        Err(_) => Err(ToolError::internal(format!(
            "a page of the server's list has no `{key}` array"
        ))),
    }
}

/// A progress token of the bridge's own (a JSON string): unique among the
/// calls of this process.
fn next_progress_token() -> Vec<u8> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "\"mcpwire-bridge-{}\"",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
    .into_bytes()
}

/// One downstream call: its notifications go to the host (under the host's
/// id and progress token); its result (JSON text, as the client engine
/// validated it, unless a subscription id in it is to be the host's) or
/// error is the answer. The call is the host's request as it came (its
/// `params` text sent on as it is), or with `params` instead.
async fn call(
    client: &Client,
    request: &ForwardRequest,
    params: Option<&[u8]>,
    options: &Options,
) -> Result<Vec<u8>, ToolError> {
    let transport = client.transport_name();
    let left = request
        .deadline()
        .map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
    let timeout = proxy::downstream_timeout(Method::of(request.method()), left, options.timeout);
    let params = params.unwrap_or(request.raw_params());
    // The host's progress token is the host's: downstream the call carries
    // one of the bridge's (a stdio child or a session routes progress by
    // it), and the host's goes back on each `notifications/progress`.
    let own;
    let params = match request.raw_progress_token() {
        Some(_) => {
            let token = next_progress_token();
            own = written(params.len() + token.len(), |out| {
                rewrite::with_progress_token(params, &token, out)
            });
            &own
        }
        None => params,
    };
    let mut call = client
        .call_raw(request.method(), params, request.meta_complete(), timeout)
        .await
        .map_err(|e| downstream_error(transport, &e))?;
    // The server's notifications the host has not taken yet (each with its
    // size): the host's side gives room for the largest message, and this
    // queue holds as much again; a host that leaves more than that
    // untaken while the server goes on is not reading, and the call fails
    // rather than the bridge growing. A stdio child cannot be held back
    // for one call: its lines are read for all of them.
    let mut waiting: VecDeque<(String, Vec<u8>)> = VecDeque::new();
    let mut waiting_bytes = 0;
    loop {
        let next = match waiting.front() {
            None => call.next_raw().await,
            // The front one goes to the host once there is room; the
            // server is read meanwhile. (A call's `next_raw` only waits
            // for its queue once it has given a message, so dropping it
            // for the host's turn loses nothing.)
            Some((method, params)) => {
                let sent = tokio::select! {
                    () = request.notify_raw(method, params.clone()) => None,
                    next = call.next_raw() => Some(next),
                };
                match sent {
                    Some(next) => next,
                    None => {
                        if let Some((_, params)) = waiting.pop_front() {
                            waiting_bytes -= params.len();
                        }
                        continue;
                    }
                }
            }
        };
        let message = match next {
            Ok(Some(RawMessage::Notification(text))) => {
                let Some((method, params)) = host_notification(request, &text) else {
                    continue;
                };
                waiting_bytes += params.len();
                waiting.push_back((method, params));
                if waiting_bytes > options.max_bytes {
                    let e = Failure::ClientNotReading.error();
                    return Err(ToolError::new(e.code, e.message));
                }
                continue;
            }
            other => other,
        };
        // The call's end comes after the notifications before it.
        for (method, params) in waiting.drain(..) {
            request.notify_raw(&method, params).await;
        }
        return match message {
            Ok(Some(RawMessage::Response(response))) => answer(request, response, transport),
            Ok(Some(RawMessage::Notification(_)) | None) => Err(ToolError::internal(format!(
                "the bridge's call to the server ({transport}) ended without a response"
            ))),
            Err(e) => Err(downstream_error(transport, &e)),
        };
    }
}

/// The answer of a response: its result's text (with the host's id as
/// the subscription id it names), or the server's error as it came.
fn answer(
    request: &ForwardRequest,
    response: RawResponse,
    transport: &str,
) -> Result<Vec<u8>, ToolError> {
    let response = match response.into_result() {
        Ok(result) if rewrite::names_subscription(&result) => {
            let id = request.raw_id();
            return Ok(written(result.len() + id.len(), |out| {
                rewrite::result_for_host(&result, id, out)
            }));
        }
        Ok(result) => return Ok(result),
        Err(response) => response,
    };
    let Ok(mut r) = serde_json::from_slice::<Value>(response.text()) else {
        return Err(ToolError::internal(format!(
            "the bridge's call to the server ({transport}) got a response that is not JSON"
        )));
    };
    let error = r.get_mut("error").map(Value::take).unwrap_or_default();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the server's error has no message");
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok());
    let mut e = match code {
        Some(code) => ToolError::new(code, message),
        None => ToolError::internal(message),
    };
    e.data = error.get("data").cloned();
    Err(e)
}

/// A notification of the downstream call as the host is to see it: its
/// method and params (the host's progress token and id in them), or
/// `None` when it is not for the host.
fn host_notification(request: &ForwardRequest, text: &[u8]) -> Option<(String, Vec<u8>)> {
    let n = Notification::parse(text)?;
    let token = request.raw_progress_token();
    if !n.for_host(token) {
        return None;
    }
    let method = match n.method() {
        Some(m) => m.to_owned(),
        None => serde_json::from_slice(n.raw_method()).ok()?,
    };
    let id = request.raw_id();
    let hint = n.params().len() + id.len() + token.map_or(0, <[u8]>::len) + 20;
    let params = written(hint, |out| n.write_params(id, token, out));
    Some((method, params))
}

/// A failure of the downstream call, as the host sees it: the server's
/// JSON-RPC code when it gave one, else the one of the client's status
/// (the core's map); `data.grpcStatus` (and `data.httpStatus`) say what
/// the client saw, and a refusal of the bridge's credentials (a token
/// that expired) says so, as the refusal at the start does.
pub(super) fn downstream_error(transport: &str, e: &CallError) -> ToolError {
    let code = proxy::downstream_code(e.diagnostics.rpc_code, e.status);
    let mut data = json!({"grpcStatus": format!("{:?}", e.status)});
    if let Some(status) = e.diagnostics.http_status {
        data["httpStatus"] = json!(status);
    }
    let why = match refusal_of(e) {
        Some(r) if r.of_credentials() => crate::server_refusal(e).map(|r| r.message),
        _ => None,
    }
    .unwrap_or_else(|| e.message.clone());
    let mut out = ToolError::new(
        code,
        format!("the bridge's call to the server ({transport}) failed: {why}"),
    );
    out.data = Some(data);
    out
}
