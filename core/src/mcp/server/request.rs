//! What the application is asked to handle: a typed request, already
//! checked and routed by the engine, so a driver never re-parses or
//! re-routes it.

use super::super::meta::{ParamsIndex, RequestMeta, Span};
use super::super::registry::Registry;
use super::super::tool::Arguments;
use crate::h2::HeaderList;
use crate::time::Instant;

/// What a request asks the application for.
#[derive(Debug, Clone, Copy)]
pub enum RequestKind<'a> {
    /// `tools/call` of a tool the registry has.
    CallTool {
        /// The tool's index in [`Registry::tools`].
        tool: usize,
        /// Its name, as registered.
        name: &'a str,
        /// `params.arguments` (`{}` when absent).
        arguments: Arguments<'a>,
    },
    /// `resources/read`.
    ReadResource {
        /// `params.uri`, a raw JSON string (unescape it with
        /// [`json::unescape`](crate::mcp::json::unescape), or read it with [`json::str_plain`](crate::mcp::json::str_plain)).
        uri: &'a [u8],
    },
    /// `prompts/get` of a prompt the registry has.
    GetPrompt {
        /// The prompt's index in [`Registry::prompts`].
        prompt: usize,
        /// Its name, as registered.
        name: &'a str,
        /// `params.arguments`, a raw JSON object, when present.
        arguments: Option<&'a [u8]>,
    },
    /// `completion/complete`: read `params`.
    Complete,
    /// Any request of a forwarding registry
    /// ([`Registry::forward`](super::super::registry::Registry::forward)),
    /// checked but not routed: the application answers it as the server it
    /// forwards to does.
    Forward {
        /// The JSON-RPC method (its text, unescaped when it had no escape;
        /// a method with an escape is given raw, without its quotes).
        method: &'a str,
        /// The caller cannot page: a typed binding's list RPC (its
        /// messages have no cursor). The answer is to be the whole list,
        /// its pages merged, without `nextCursor` (typed binding §8).
        whole_list: bool,
    },
}

/// A request for the application. Its slices are borrowed from the engine
/// until the next `&mut` call on it: copy what the handler needs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// What is asked.
    pub kind: RequestKind<'a>,
    /// The raw JSON id.
    pub id: &'a [u8],
    /// The raw JSON `params` object (`{}` when absent).
    pub params: &'a [u8],
    /// The request's `_meta` (protocol version, client capabilities,
    /// `progressToken`).
    pub meta: RequestMeta<'a>,
    /// Where `params`'s members lie (found by the walk that validated the
    /// request): read them with [`ParamsIndex::get`] instead of walking
    /// `params` again.
    pub index: ParamsIndex,
    /// The call's request headers (custom metadata).
    pub headers: HeaderList<'a>,
    /// When the call must end.
    pub deadline: Option<Instant>,
    /// Whether the client set [`deadline`](Self::deadline) (gRPC
    /// `grpc-timeout`), rather than the server's request timeout: a proxy
    /// passes it on.
    pub client_deadline: bool,
    /// What the application's authorization named, when authorization is on.
    pub principal: Option<&'a str>,
}

impl<'a> Request<'a> {
    /// The JSON-RPC method of the request.
    pub fn method(&self) -> &'a str {
        match self.kind {
            RequestKind::CallTool { .. } => "tools/call",
            RequestKind::ReadResource { .. } => "resources/read",
            RequestKind::GetPrompt { .. } => "prompts/get",
            RequestKind::Complete => "completion/complete",
            RequestKind::Forward { method, .. } => method,
        }
    }

    /// The raw JSON `progressToken`, when the client asked for progress.
    pub fn progress_token(&self) -> Option<&[u8]> {
        self.meta.progress_token
    }
}

/// Which handler a routed request goes to, as a call record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handler {
    Tool(u16),
    Resource,
    Prompt(u16),
    Complete,
    /// Forwarded: the method's text lies at this range of the call's
    /// buffer; `whole_list` as in [`RequestKind::Forward`].
    Forward {
        method: (usize, usize),
        whole_list: bool,
    },
}

impl Handler {
    /// The typed request, from the request's `params`.
    pub(crate) fn kind<'a>(
        self,
        registry: &Registry<'a>,
        bytes: &'a [u8],
        params: &'a [u8],
        index: &ParamsIndex,
    ) -> RequestKind<'a> {
        let at = |s: &Option<Span>| ParamsIndex::get(params, s);
        match self {
            Self::Tool(i) => {
                let i = usize::from(i);
                RequestKind::CallTool {
                    tool: i,
                    name: registry.tools.get(i).map_or("", |t| t.name),
                    arguments: Arguments::new(at(&index.arguments).unwrap_or(b"{}")),
                }
            }
            Self::Resource => RequestKind::ReadResource {
                uri: at(&index.uri).unwrap_or(b"\"\""),
            },
            Self::Prompt(i) => {
                let i = usize::from(i);
                RequestKind::GetPrompt {
                    prompt: i,
                    name: registry.prompts.get(i).map_or("", |p| p.name),
                    arguments: at(&index.arguments),
                }
            }
            Self::Complete => RequestKind::Complete,
            Self::Forward {
                method: (a, b),
                whole_list,
            } => RequestKind::Forward {
                method: bytes
                    .get(a..b)
                    .and_then(|m| core::str::from_utf8(m).ok())
                    .unwrap_or(""),
                whole_list,
            },
        }
    }
}
