//! The tool schemas of the server a forwarding app reaches
//! ([`LearntTools`]): learnt from its `tools/list`, read again when its list
//! changes, so that the engine holds a forwarded `tools/call`'s
//! `Mcp-Param-*` headers to the body as `mcpwire serve` holds a call to its
//! own tools ([`ForwardedTools`]: the check is the core's). A tool whose
//! schema is not known (the list could not be read, or did not name it, or
//! its annotations are invalid) may not carry an `Mcp-Param-*` header:
//! -32020, as it cannot be checked.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use mcpwire_core::mcp::client::http::{ToolSchema, judge_schema};
use mcpwire_core::mcp::error::RpcError;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::proxy::{List, TOOLS_LISTEN_PARAMS, ToolsListen, era, pages};
use mcpwire_core::mcp::registry::{ForwardedSchema, ForwardedTools};
use serde_json::Value;
use tokio::sync::watch;

#[cfg(doc)]
use crate::client::MAX_LIST_PAGES;
use crate::client::RawMessage;
use crate::client::typed::PageWalk;
use crate::{CallError, Client};

/// One tool as learnt.
#[derive(Debug)]
enum Learnt {
    /// Its input schema's JSON text, which has `x-mcp-header` annotations.
    Annotated(Box<[u8]>),
    Plain,
}

/// The first wait before a listen stream that failed or ended is opened
/// again; it doubles up to [`MAX_RELISTEN`].
const FIRST_RELISTEN: Duration = Duration::from_secs(1);
const MAX_RELISTEN: Duration = Duration::from_secs(60);
/// A listen stream that lasted this long was a healthy one: the next
/// wait starts at [`FIRST_RELISTEN`] again.
const HEALTHY_LISTEN: Duration = Duration::from_secs(60);

/// The tool schemas of the server a forwarding app reaches, by tool name.
/// [`follow`](Self::follow) keeps them; the lists a host reads through the
/// app teach them too ([`learn_answer`](Self::learn_answer)). Give it to
/// [`App::forward_tools`](super::App::forward_tools).
#[derive(Debug)]
pub struct LearntTools {
    tools: RwLock<HashMap<String, Learnt>>,
    /// Whether the first read of the list ended (learnt or failed).
    first_read: watch::Sender<bool>,
}

impl Default for LearntTools {
    fn default() -> Self {
        Self::new()
    }
}

impl LearntTools {
    /// None known yet: every tool is unknown.
    pub fn new() -> Self {
        Self {
            tools: RwLock::new(HashMap::new()),
            first_read: watch::Sender::new(false),
        }
    }

    /// The tools of a whole `tools/list` (the `tools` array of its pages):
    /// they replace what was known.
    pub fn learn_list(&self, tools: &[Value]) {
        let learnt = tools.iter().filter_map(learn).collect();
        if let Ok(mut known) = self.tools.write() {
            *known = learnt;
        }
    }

    /// The tools of one page of `tools/list`: each replaces what was known
    /// of its name (a page does not say which tools went away).
    pub fn learn_page(&self, tools: &[Value]) {
        let learnt: Vec<_> = tools.iter().filter_map(learn).collect();
        if let Ok(mut known) = self.tools.write() {
            known.extend(learnt);
        }
    }

    /// A `tools/list` answer that went to a host: `params` its request's,
    /// `result` the result. A first page without a next cursor is the
    /// whole list; any other page adds what it names.
    pub fn learn_answer(&self, params: &Value, result: &Value) {
        let Some(tools) = result.get(List::Tools.key()).and_then(Value::as_array) else {
            return;
        };
        let first = params.get("cursor").is_none_or(Value::is_null);
        let last = result.get("nextCursor").is_none_or(Value::is_null);
        if first && last {
            self.learn_list(tools);
        } else {
            self.learn_page(tools);
        }
    }

    /// [`learn_answer`](Self::learn_answer) of the JSON texts of a
    /// request's `params` and its result (only the `tools` array is
    /// parsed).
    pub fn learn_answer_raw(&self, params: &[u8], result: &[u8]) {
        let Some(Ok(tools)) = json::get(result, List::Tools.key().as_bytes())
            .map(serde_json::from_slice::<Vec<Value>>)
        else {
            return;
        };
        let last = json::get(result, b"nextCursor")
            .is_none_or(|c| json::kind(c) == Some(json::Kind::Null));
        if pages::first_page(params) && last {
            self.learn_list(&tools);
        } else {
            self.learn_page(&tools);
        }
    }

    /// Reads every page of the server's `tools/list` and learns it whole;
    /// the tools it names. A list of more than
    /// [`MAX_LIST_PAGES`](crate::client::MAX_LIST_PAGES) pages (or
    /// one whose `nextCursor` is not a cursor) is an error, its pages read
    /// learnt as pages.
    pub async fn read(&self, client: &Client) -> Result<usize, CallError> {
        let mut tools = Vec::new();
        let mut walk = PageWalk::default();
        let mut params: Value = serde_json::from_str(era::OWN_PARAMS).unwrap_or_default();
        loop {
            let answer = client.request(List::Tools.method(), params.clone()).await?;
            let mut result = crate::client::typed::result_of(answer)?;
            match result.get_mut(List::Tools.key()).map(Value::take) {
                Some(Value::Array(page)) => tools.extend(page),
                _ => {
                    return Err(CallError::new(
                        mcpwire_core::grpc::Code::Internal,
                        "a page of the server's tools/list has no tools array",
                    ));
                }
            }
            match walk.next("the server's tools/list", &params, &result) {
                Ok(Some(next)) => params = next,
                Ok(None) => break,
                Err(e) => {
                    // What was read is learnt as pages.
                    self.learn_page(&tools);
                    return Err(e);
                }
            }
        }
        self.learn_list(&tools);
        Ok(tools.len())
    }

    /// Keeps the schemas of `client`'s server: reads its list, then holds
    /// a `subscriptions/listen` stream for `toolsListChanged` and reads the
    /// list again at each change and each acknowledgement (a restarted
    /// stdio child acknowledges the stream again). A server that does not
    /// honour the subscription (no acknowledgement that names it, an error,
    /// a result) is read this once: the lists hosts read through the app
    /// teach the rest. A stream that fails or ends is opened again after a
    /// wait (1 s, doubling up to 60 s). Runs until dropped.
    pub async fn follow(&self, client: &Client) {
        self.refresh(client).await;
        let _ = self.first_read.send(true);
        let mut wait = FIRST_RELISTEN;
        loop {
            let opened = tokio::time::Instant::now();
            if !self.listen(client).await {
                return;
            }
            if opened.elapsed() >= HEALTHY_LISTEN {
                wait = FIRST_RELISTEN;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_RELISTEN);
            // Changes while no stream was open are not announced.
            self.refresh(client).await;
        }
    }

    /// Completes once [`follow`](Self::follow) read the list a first time
    /// (or failed to).
    pub async fn first_read(&self) {
        let mut rx = self.first_read.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// One listen stream, until it ends: `false` when the server does not
    /// offer the subscription (no point in asking again).
    async fn listen(&self, client: &Client) -> bool {
        let params: Value = serde_json::from_str(TOOLS_LISTEN_PARAMS).unwrap_or_default();
        let Ok(mut stream) = client.listen(params).await else {
            return true;
        };
        let mut acknowledged = false;
        loop {
            let message = match stream.next_raw().await {
                Ok(Some(RawMessage::Notification(n))) => n,
                // A response before the acknowledgement refuses the
                // subscription; after it, it ends the stream.
                Ok(Some(RawMessage::Response(_))) => return acknowledged,
                Ok(None) | Err(_) => return true,
            };
            match ToolsListen::of(&message) {
                ToolsListen::Acknowledged { honoured: false } => return false,
                ToolsListen::Acknowledged { honoured: true } => {
                    // The first acknowledgement follows the first read.
                    if acknowledged {
                        self.refresh(client).await;
                    }
                    acknowledged = true;
                }
                ToolsListen::Changed => self.refresh(client).await,
                ToolsListen::Other => {}
            }
        }
    }

    /// Reads the list; a failure is said on stderr, and what was known
    /// stays (a server that cannot answer cannot take the calls either).
    async fn refresh(&self, client: &Client) {
        if let Err(e) = self.read(client).await {
            eprintln!(
                "mcpwire: the server's tools/list failed ({e}): a tools/call with an Mcp-Param-* header for a tool not learnt yet is refused (-32020)"
            );
        }
    }
}

/// A tool of a list as learnt: its name, and its schema when it is valid
/// (a tool whose annotations are invalid stays unknown).
fn learn(tool: &Value) -> Option<(String, Learnt)> {
    let name = tool.get("name").and_then(Value::as_str)?.to_owned();
    let schema = tool
        .get("inputSchema")
        .map_or_else(|| b"{}".to_vec(), |s| s.to_string().into_bytes());
    match judge_schema(&schema) {
        ToolSchema::Annotated => Some((name, Learnt::Annotated(schema.into()))),
        ToolSchema::Plain => Some((name, Learnt::Plain)),
        ToolSchema::Invalid(_) => None,
    }
}

/// A raw JSON string's text.
fn unquoted(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

impl ForwardedTools for LearntTools {
    fn with_schema(
        &self,
        name: &[u8],
        check: &mut dyn FnMut(ForwardedSchema<'_>) -> Result<(), RpcError>,
    ) -> Result<(), RpcError> {
        let Ok(known) = self.tools.read() else {
            return check(ForwardedSchema::Unknown);
        };
        match unquoted(name).and_then(|n| known.get(n.as_ref())) {
            Some(Learnt::Annotated(schema)) => check(ForwardedSchema::Annotated(schema)),
            Some(Learnt::Plain) => check(ForwardedSchema::Plain),
            None => check(ForwardedSchema::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What `with_schema` hands the check for `name` (raw JSON).
    fn seen(tools: &LearntTools, name: &str) -> String {
        let mut out = String::new();
        let _ = tools.with_schema(name.as_bytes(), &mut |s| {
            out = match s {
                ForwardedSchema::Annotated(_) => "annotated".into(),
                ForwardedSchema::Plain => "plain".into(),
                ForwardedSchema::Unknown => "unknown".into(),
            };
            Ok(())
        });
        out
    }

    #[test]
    fn a_list_replaces_a_page_adds_and_invalid_tools_stay_unknown() {
        let tools = LearntTools::new();
        let annotated = json!({"name": "lookup", "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}});
        let plain = json!({"name": "echo", "inputSchema": {"type": "object"}});
        let invalid = json!({"name": "bad", "inputSchema": {"type": "object",
            "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}});
        assert_eq!(seen(&tools, r#""lookup""#), "unknown");
        tools.learn_list(&[annotated.clone(), plain.clone(), invalid]);
        assert_eq!(seen(&tools, r#""lookup""#), "annotated");
        assert_eq!(seen(&tools, r#""\u006cookup""#), "annotated");
        assert_eq!(seen(&tools, r#""echo""#), "plain");
        assert_eq!(seen(&tools, r#""bad""#), "unknown");
        assert_eq!(seen(&tools, "7"), "unknown");
        // A later page adds; a whole list replaces.
        let next = json!({"name": "next"});
        tools.learn_answer(
            &json!({"cursor": "c1"}),
            &json!({"tools": [next], "nextCursor": "c2"}),
        );
        assert_eq!(seen(&tools, r#""next""#), "plain");
        assert_eq!(seen(&tools, r#""lookup""#), "annotated");
        tools.learn_answer(&json!({}), &json!({"tools": [plain]}));
        assert_eq!(seen(&tools, r#""next""#), "unknown");
        assert_eq!(seen(&tools, r#""lookup""#), "unknown");
        assert_eq!(seen(&tools, r#""echo""#), "plain");
        // The first page of several only adds.
        tools.learn_answer(
            &json!({}),
            &json!({"tools": [annotated], "nextCursor": "c"}),
        );
        assert_eq!(seen(&tools, r#""lookup""#), "annotated");
        assert_eq!(seen(&tools, r#""echo""#), "plain");
    }
}
