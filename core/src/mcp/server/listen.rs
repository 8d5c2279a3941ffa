//! `subscriptions/listen` (MCP 2026-07-28 §7), transport-free: the filter a
//! server honours, the acknowledgement, which published changes a stream
//! wants, the events tagged with their subscription id, and the final
//! result.
//!
//! The subscription id of a stream is the listen request's JSON-RPC id; it
//! is carried as `_meta["io.modelcontextprotocol/subscriptionId"]` on the
//! acknowledgement, on every event and on the final result.

use super::super::envelope;
use super::super::error::{INVALID_PARAMS, RpcError};
use super::super::json;
use super::super::meta::{KEY_SERVER_INFO, KEY_SUBSCRIPTION_ID};
use super::super::registry::Registry;
use super::super::writer::JsonWriter;

/// How many listen streams a server keeps at once, counted across its
/// connections by the driver (a listen stream holds a call, its buffer and
/// a connection for as long as the client keeps it). A listen request over
/// a cap is answered in-band -32603, as the MCP SDKs answer too many
/// subscriptions.
pub trait ListenQuota: Sync {
    /// Takes room for one more stream of `principal` (`None`: the request
    /// was not authenticated); `false` when a cap is reached.
    fn acquire(&self, principal: Option<&str>) -> bool;
    /// Gives back what [`ListenQuota::acquire`] took.
    fn release(&self, principal: Option<&str>);
}

/// What an engine keeps of listen streams: set on every binding's engine
/// with `set_listen_limits`.
#[derive(Clone, Copy)]
pub struct ListenLimits<'r> {
    /// The server-wide count, when the driver keeps one.
    pub quota: Option<&'r dyn ListenQuota>,
    /// The longest listen request (its `params`, raw JSON: the filter, a
    /// `resourceSubscriptions` array of many URIs) a stream may have: the
    /// request is kept, and its filter echoed in the acknowledgement, for
    /// the stream's life. A longer one is answered -32602. Default 16 KiB.
    pub max_request_bytes: usize,
}

impl Default for ListenLimits<'_> {
    fn default() -> Self {
        Self {
            quota: None,
            max_request_bytes: 16 << 10,
        }
    }
}

impl core::fmt::Debug for ListenLimits<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ListenLimits")
            .field("quota", &self.quota.is_some())
            .field("max_request_bytes", &self.max_request_bytes)
            .finish()
    }
}

/// The answer to a listen request longer than
/// [`ListenLimits::max_request_bytes`].
pub(crate) const REQUEST_TOO_LARGE: RpcError = RpcError::new(
    INVALID_PARAMS,
    "the listen request (its filter) is longer than the server keeps for a stream",
);

/// The answer to a listen request over a [`ListenQuota`] cap.
pub(crate) const TOO_MANY_LISTENS: RpcError = RpcError::new(
    super::super::error::INTERNAL_ERROR,
    "too many listen streams: the server keeps no more of them",
);

/// A change the server announces to the listen streams that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChange<'a> {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    /// A resource changed; streams whose `resourceSubscriptions` hold a
    /// prefix of `uri` hear of it.
    ResourceUpdated {
        uri: &'a str,
    },
}

impl ListChange<'_> {
    /// The notification's method.
    pub fn method(&self) -> &'static str {
        match self {
            Self::ToolsListChanged => "notifications/tools/list_changed",
            Self::PromptsListChanged => "notifications/prompts/list_changed",
            Self::ResourcesListChanged => "notifications/resources/list_changed",
            Self::ResourceUpdated { .. } => "notifications/resources/updated",
        }
    }
}

/// What a stream asked for and the server honours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// The honoured `resourceSubscriptions` array is non-empty.
    pub subscriptions: bool,
}

impl Filter {
    /// The filter honoured for `params` of a listen request: what the client
    /// asked (`params.notifications`), limited to what the server offers
    /// (a listen source, and tools, prompts or resources to change). The
    /// returned slice is the raw `resourceSubscriptions` array, when
    /// honoured. A request without a `notifications` object is -32602.
    pub fn honour<'p>(
        registry: &Registry<'_>,
        params: Option<&'p [u8]>,
    ) -> Result<(Self, Option<&'p [u8]>), RpcError> {
        let filter = params
            .and_then(|p| json::get(p, b"notifications"))
            .filter(|f| json::kind(f) == Some(json::Kind::Object))
            .ok_or(RpcError::new(
                INVALID_PARAMS,
                "params.notifications is required",
            ))?;
        let [tools, prompts, resources, subs] = json::get_all(
            filter,
            [
                b"toolsListChanged",
                b"promptsListChanged",
                b"resourcesListChanged",
                b"resourceSubscriptions",
            ],
        );
        let asked = |v: Option<&[u8]>| v.is_some_and(|v| json::trim(v) == b"true");
        let source = registry.listen;
        let offers_resources = !registry.resources.is_empty() || !registry.templates.is_empty();
        let subs = subs
            .filter(|_| source && offers_resources)
            .filter(|s| json::kind(s) == Some(json::Kind::Array))
            .filter(|s| json::elements(s).any(|e| json::kind(e) == Some(json::Kind::String)));
        Ok((
            Self {
                tools: source && !registry.tools.is_empty() && asked(tools),
                prompts: source && !registry.prompts.is_empty() && asked(prompts),
                resources: source && offers_resources && asked(resources),
                subscriptions: subs.is_some(),
            },
            subs,
        ))
    }

    /// Whether a stream with this filter (and `subscriptions`, its raw
    /// honoured array) wants `change`.
    pub fn wants(&self, subscriptions: &[u8], change: &ListChange<'_>) -> bool {
        match change {
            ListChange::ToolsListChanged => self.tools,
            ListChange::PromptsListChanged => self.prompts,
            ListChange::ResourcesListChanged => self.resources,
            ListChange::ResourceUpdated { uri } => {
                self.subscriptions
                    && json::elements(subscriptions).any(|e| {
                        let mut buf = [0u8; 512];
                        json::kind(e) == Some(json::Kind::String)
                            && json::unescape(e, &mut buf)
                                .is_some_and(|prefix| uri.as_bytes().starts_with(prefix))
                    })
            }
        }
    }
}

/// Writes the `_meta` member carrying the subscription id (no leading comma).
fn write_meta(w: &mut JsonWriter<'_>, id: &[u8]) {
    w.raw(b"\"_meta\":{")
        .string(KEY_SUBSCRIPTION_ID.as_bytes())
        .raw(b":")
        .raw(id)
        .raw(b"}");
}

/// Writes the acknowledgement notification with the honoured filter.
pub fn write_acknowledgement(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    filter: &Filter,
    subscriptions: &[u8],
) {
    let method = b"notifications/subscriptions/acknowledged";
    envelope::write_notification_with(w, method, |w| {
        w.raw(b"{");
        write_meta(w, id);
        w.raw(b",\"notifications\":{");
        let mut first = true;
        for (on, key) in [
            (filter.tools, &b"toolsListChanged"[..]),
            (filter.prompts, b"promptsListChanged"),
            (filter.resources, b"resourcesListChanged"),
        ] {
            if on {
                if !first {
                    w.raw(b",");
                }
                first = false;
                w.string(key).raw(b":true");
            }
        }
        if filter.subscriptions {
            if !first {
                w.raw(b",");
            }
            w.raw(b"\"resourceSubscriptions\":[");
            let strings =
                json::elements(subscriptions).filter(|e| json::kind(e) == Some(json::Kind::String));
            for (i, e) in strings.enumerate() {
                if i > 0 {
                    w.raw(b",");
                }
                w.raw(json::trim(e));
            }
            w.raw(b"]");
        }
        w.raw(b"}}");
    });
}

/// Writes the event notification of `change` for the stream `id`.
pub fn write_event(w: &mut JsonWriter<'_>, id: &[u8], change: &ListChange<'_>) {
    envelope::write_notification_with(w, change.method().as_bytes(), |w| {
        w.raw(b"{");
        write_meta(w, id);
        if let ListChange::ResourceUpdated { uri } = change {
            w.raw(b",\"uri\":").string(uri.as_bytes());
        }
        w.raw(b"}");
    });
}

/// Writes the final result of the stream `id` (the server ends it).
pub fn write_final_result(w: &mut JsonWriter<'_>, id: &[u8], registry: &Registry<'_>) {
    envelope::write_result(w, id, |w| {
        w.raw(b"{\"resultType\":\"complete\",\"_meta\":{")
            .string(KEY_SUBSCRIPTION_ID.as_bytes())
            .raw(b":")
            .raw(id)
            .raw(b",")
            .string(KEY_SERVER_INFO.as_bytes())
            .raw(b":{\"name\":")
            .string(registry.info.name.as_bytes())
            .raw(b",\"version\":")
            .string(registry.info.version.as_bytes())
            .raw(b"}}}");
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::Message;
    use crate::mcp::registry::{ResourceInfo, ServerInfo, ToolInfo};

    const TOOLS: &[ToolInfo<'static>] = &[ToolInfo {
        name: "t",
        title: None,
        description: "",
        input_schema: "{}",
    }];
    const RESOURCES: &[ResourceInfo<'static>] = &[ResourceInfo {
        uri: "file:///a",
        name: "a",
        description: None,
        mime_type: None,
    }];

    fn registry(listen: bool) -> Registry<'static> {
        let info = ServerInfo {
            name: "s",
            version: "1",
            instructions: None,
        };
        Registry {
            resources: RESOURCES,
            listen,
            ..Registry::new(info, TOOLS)
        }
    }

    #[test]
    fn honours_what_is_offered_and_asked() {
        let params = br#"{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":false,"resourceSubscriptions":["file:///a",3]}}"#;
        let (f, subs) = Filter::honour(&registry(true), Some(params)).unwrap();
        assert!(f.tools && !f.prompts && !f.resources && f.subscriptions);
        let subs = subs.unwrap();
        assert!(f.wants(subs, &ListChange::ToolsListChanged));
        assert!(!f.wants(subs, &ListChange::PromptsListChanged));
        assert!(f.wants(subs, &ListChange::ResourceUpdated { uri: "file:///a/b" }));
        assert!(!f.wants(subs, &ListChange::ResourceUpdated { uri: "file:///b" }));
        let mut buf = [0u8; 512];
        let mut w = JsonWriter::new(&mut buf);
        write_acknowledgement(&mut w, b"7", &f, subs);
        let text = w.finish().unwrap();
        assert!(matches!(
            Message::parse(text, 16),
            Ok(Message::Notification { .. })
        ));
        assert!(contains(
            text,
            br#""notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}"#
        ));
        assert!(contains(
            text,
            br#""io.modelcontextprotocol/subscriptionId":7"#
        ));
    }

    #[test]
    fn nothing_is_honoured_without_a_source() {
        let params =
            br#"{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["x"]}}"#;
        let (f, subs) = Filter::honour(&registry(false), Some(params)).unwrap();
        assert_eq!((f, subs), (Filter::default(), None));
        assert_eq!(
            Filter::honour(&registry(true), Some(b"{}"))
                .unwrap_err()
                .code,
            INVALID_PARAMS
        );
    }

    #[test]
    fn events_and_the_result_carry_the_subscription_id() {
        let mut buf = [0u8; 512];
        let mut w = JsonWriter::new(&mut buf);
        write_event(
            &mut w,
            b"\"l1\"",
            &ListChange::ResourceUpdated { uri: "file:///a" },
        );
        let text = w.finish().unwrap();
        assert!(contains(
            text,
            br#"{"_meta":{"io.modelcontextprotocol/subscriptionId":"l1"},"uri":"file:///a"}"#
        ));
        let mut buf = [0u8; 512];
        let mut w = JsonWriter::new(&mut buf);
        write_final_result(&mut w, b"\"l1\"", &registry(true));
        let text = w.finish().unwrap();
        assert!(matches!(
            Message::parse(text, 16),
            Ok(Message::Response { .. })
        ));
        assert!(contains(text, br#""resultType":"complete""#));
    }

    fn contains(h: &[u8], n: &[u8]) -> bool {
        h.windows(n.len()).any(|w| w == n)
    }
}
