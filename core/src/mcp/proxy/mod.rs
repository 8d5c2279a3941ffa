//! The forwarding rules of a proxy between an MCP host and a server (a
//! bridge, a gateway), transport-free: what the proxy judges about the
//! messages it carries, and the few changes it makes to them, over JSON
//! text, written into the caller's buffers (feature `forward`).
//!
//! - [`Method`]: which requests a proxy treats apart (discovery, the list
//!   methods and the array their result carries, listen streams, reads);
//! - [`pages`]: the cursor rule, a page request, and the pages of a list
//!   merged into one result for a caller that cannot page (typed binding
//!   §7, §8);
//! - [`rewrite`]: the proxy's own progress token on a forwarded request,
//!   and the host's id and progress token back on what the server sends
//!   (MCP 2026-07-28 §3.5, §10);
//! - [`era`]: an older-era server served as the current era: its results
//!   completed and its `server/discover` answered by the proxy (§8.3);
//! - here: the downstream call's timeout, the JSON-RPC code of a failed
//!   downstream call, a server's refusal of the proxy, and the proxy's own
//!   listen for changes of the tool list ([`ToolsListen`]).
//!
//! Nothing here moves bytes: a driver (`mcpwire_tokio::bridge`) reads and
//! writes the connections and calls these functions between.

pub mod era;
pub mod pages;
pub mod rewrite;

use core::time::Duration;

use crate::grpc::Code;
use crate::mcp::error::{INTERNAL_ERROR, UNSUPPORTED_PROTOCOL_VERSION, code_for_status};
use crate::mcp::json;

/// A list method (§7): the array its result carries, and the capability
/// a server that answers it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Tools,
    Resources,
    ResourceTemplates,
    Prompts,
}

impl List {
    /// The JSON-RPC method.
    pub const fn method(self) -> &'static str {
        match self {
            Self::Tools => "tools/list",
            Self::Resources => "resources/list",
            Self::ResourceTemplates => "resources/templates/list",
            Self::Prompts => "prompts/list",
        }
    }

    /// The member of the result that holds the list.
    pub const fn key(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::ResourceTemplates => "resourceTemplates",
            Self::Prompts => "prompts",
        }
    }

    /// The server capability (`server/discover`) that offers the list.
    pub const fn capability(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources | Self::ResourceTemplates => "resources",
            Self::Prompts => "prompts",
        }
    }
}

/// A forwarded request as a proxy sees it: the few methods it treats
/// apart, and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `server/discover`: an older-era server's is the proxy's.
    Discover,
    /// A list method: pages a caller that cannot page gets merged; a
    /// `tools/list` teaches the proxy the tools' schemas.
    List(List),
    /// `resources/read`: cacheable, as the lists are.
    Read,
    /// `subscriptions/listen`: lasts as long as the host keeps it (no
    /// timeout of the proxy's); its result and events name the host's id.
    Listen,
    /// Any other request, forwarded as it is.
    Other,
}

impl Method {
    /// The method named `method`.
    pub fn of(method: &str) -> Self {
        match method {
            "server/discover" => Self::Discover,
            "tools/list" => Self::List(List::Tools),
            "resources/list" => Self::List(List::Resources),
            "resources/templates/list" => Self::List(List::ResourceTemplates),
            "prompts/list" => Self::List(List::Prompts),
            "resources/read" => Self::Read,
            "subscriptions/listen" => Self::Listen,
            _ => Self::Other,
        }
    }

    /// Whether the current era's result carries caching hints (`ttlMs`,
    /// `cacheScope`, §7.3).
    pub const fn cacheable(self) -> bool {
        matches!(self, Self::List(_) | Self::Read)
    }
}

/// How long the downstream call of a request of `method` may last: what is
/// left of the host's deadline (`host_left`, a gRPC host's `grpc-timeout`)
/// bounded by the proxy's own (`bound`); a listen stream has the host's
/// alone. `None`: the client's default (a listen: none).
pub fn downstream_timeout(
    method: Method,
    host_left: Option<Duration>,
    bound: Option<Duration>,
) -> Option<Duration> {
    match (host_left, method) {
        (left, Method::Listen) => left,
        (Some(left), _) => Some(bound.map_or(left, |b| b.min(left))),
        (None, _) => bound,
    }
}

/// The JSON-RPC code a host gets for a downstream call that failed: the
/// server's own when it gave one, else the one the client's status maps
/// to ([`code_for_status`]).
pub const fn downstream_code(server_code: Option<i32>, status: Code) -> i32 {
    match server_code {
        Some(code) => code,
        None => code_for_status(status),
    }
}

/// A server that will not serve the proxy: each host request is answered
/// with the refusal, and the server is tried again at the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The proxy's credentials (HTTP 401, gRPC UNAUTHENTICATED): the host
    /// gets [`Refusal::code`] naming [`Refusal::status`].
    Unauthorized,
    /// HTTP 403, gRPC PERMISSION_DENIED.
    Forbidden,
    /// -32022 naming only versions the proxy does not speak: the host
    /// gets the server's error as it came.
    Version,
}

impl Refusal {
    /// The refusal in a failed call: its HTTP status, gRPC status and
    /// JSON-RPC code; `None` for any other failure.
    pub const fn of(http_status: Option<u16>, status: Code, rpc_code: Option<i64>) -> Option<Self> {
        if let Some(code) = rpc_code
            && code == UNSUPPORTED_PROTOCOL_VERSION as i64
        {
            return Some(Self::Version);
        }
        match (http_status, status) {
            (Some(401), _) | (_, Code::Unauthenticated) => Some(Self::Unauthorized),
            (Some(403), _) | (_, Code::PermissionDenied) => Some(Self::Forbidden),
            _ => None,
        }
    }

    /// The JSON-RPC code the host gets.
    pub const fn code(self) -> i32 {
        match self {
            Self::Version => UNSUPPORTED_PROTOCOL_VERSION,
            Self::Unauthorized | Self::Forbidden => INTERNAL_ERROR,
        }
    }

    /// The HTTP status in words, for a refusal of the credentials.
    pub const fn status(self) -> Option<&'static str> {
        match self {
            Self::Unauthorized => Some("401 Unauthorized"),
            Self::Forbidden => Some("403 Forbidden"),
            Self::Version => None,
        }
    }

    /// Whether the refusal is of the credentials: a host's
    /// `server/discover` is then answered by the proxy
    /// ([`era::write_discover`] with the refusal as its instructions), as
    /// an error there sends an SDK host to the legacy `initialize`.
    pub const fn of_credentials(self) -> bool {
        matches!(self, Self::Unauthorized | Self::Forbidden)
    }
}

/// The `params` of the proxy's own `subscriptions/listen` for changes of the
/// server's tool list (its schemas learnt again at each), with
/// [`era::OWN_PARAMS`]' `_meta`.
pub const TOOLS_LISTEN_PARAMS: &str = concat!(
    r#"{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":""#,
    "2026-07-28",
    r#"","io.modelcontextprotocol/clientCapabilities":{}}}"#
);

/// What a notification of that listen stream says (§10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsListen {
    /// The acknowledgement: whether the server honours `toolsListChanged`.
    Acknowledged { honoured: bool },
    /// `notifications/tools/list_changed`: read the list again.
    Changed,
    /// Anything else.
    Other,
}

impl ToolsListen {
    /// The notification `text` (a JSON-RPC message).
    pub fn of(text: &[u8]) -> Self {
        let [method, params] = json::get_all(text, [b"method", b"params"]);
        let method = method.unwrap_or_default();
        if json::str_eq(method, b"notifications/subscriptions/acknowledged") {
            let honoured = params
                .and_then(|p| json::get(p, b"notifications"))
                .and_then(|n| json::get(n, b"toolsListChanged"))
                .is_some_and(|v| json::trim(v) == b"true");
            Self::Acknowledged { honoured }
        } else if json::str_eq(method, b"notifications/tools/list_changed") {
            Self::Changed
        } else {
            Self::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::error::{INVALID_PARAMS, METHOD_NOT_FOUND};

    #[test]
    fn the_methods_a_proxy_treats_apart() {
        assert_eq!(Method::of("server/discover"), Method::Discover);
        assert_eq!(Method::of("subscriptions/listen"), Method::Listen);
        assert_eq!(Method::of("tools/call"), Method::Other);
        for list in [
            List::Tools,
            List::Resources,
            List::ResourceTemplates,
            List::Prompts,
        ] {
            assert_eq!(Method::of(list.method()), Method::List(list));
            assert!(Method::List(list).cacheable());
        }
        assert_eq!(List::ResourceTemplates.key(), "resourceTemplates");
        assert_eq!(List::ResourceTemplates.capability(), "resources");
        assert!(Method::Read.cacheable());
        assert!(!Method::of("tools/call").cacheable());
        assert!(!Method::Discover.cacheable());
    }

    #[test]
    fn the_host_deadline_bounds_the_call_and_alone_bounds_a_listen() {
        let s = Duration::from_secs;
        let call = Method::Other;
        assert_eq!(downstream_timeout(call, Some(s(3)), Some(s(5))), Some(s(3)));
        assert_eq!(downstream_timeout(call, Some(s(9)), Some(s(5))), Some(s(5)));
        assert_eq!(downstream_timeout(call, None, Some(s(5))), Some(s(5)));
        assert_eq!(downstream_timeout(call, Some(s(9)), None), Some(s(9)));
        assert_eq!(downstream_timeout(call, None, None), None);
        let listen = Method::Listen;
        assert_eq!(downstream_timeout(listen, None, Some(s(5))), None);
        assert_eq!(
            downstream_timeout(listen, Some(s(9)), Some(s(5))),
            Some(s(9))
        );
    }

    #[test]
    fn a_failed_call_keeps_the_servers_code_else_the_status_maps() {
        assert_eq!(downstream_code(Some(-32042), Code::Internal), -32042);
        assert_eq!(
            downstream_code(None, Code::DeadlineExceeded),
            code_for_status(Code::DeadlineExceeded)
        );
        assert_eq!(downstream_code(None, Code::Unimplemented), METHOD_NOT_FOUND);
        assert_eq!(downstream_code(None, Code::InvalidArgument), INVALID_PARAMS);
        assert_eq!(downstream_code(None, Code::Unavailable), INTERNAL_ERROR);
    }

    #[test]
    fn the_proxys_own_listen_for_tool_changes() {
        let params = TOOLS_LISTEN_PARAMS.as_bytes();
        let meta = json::get(params, b"_meta").unwrap();
        assert_eq!(
            meta,
            json::get(era::OWN_PARAMS.as_bytes(), b"_meta").unwrap()
        );
        let ack = |v: &str| {
            let text = std::format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{{"toolsListChanged":{v}}}}}}}"#
            );
            ToolsListen::of(text.as_bytes())
        };
        assert_eq!(ack("true"), ToolsListen::Acknowledged { honoured: true });
        assert_eq!(ack("false"), ToolsListen::Acknowledged { honoured: false });
        let changed = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert_eq!(ToolsListen::of(changed), ToolsListen::Changed);
        let other = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        assert_eq!(ToolsListen::of(other), ToolsListen::Other);
    }

    #[test]
    fn refusals_of_credentials_and_of_versions() {
        let unauthorized = Refusal::of(Some(401), Code::Unauthenticated, None);
        assert_eq!(unauthorized, Some(Refusal::Unauthorized));
        assert_eq!(
            Refusal::of(None, Code::Unauthenticated, None),
            Some(Refusal::Unauthorized)
        );
        let forbidden = Refusal::of(Some(403), Code::Internal, None).unwrap();
        assert_eq!(forbidden.status(), Some("403 Forbidden"));
        assert_eq!(forbidden.code(), INTERNAL_ERROR);
        assert!(forbidden.of_credentials());
        let version = Refusal::of(None, Code::InvalidArgument, Some(-32022)).unwrap();
        assert_eq!(version.code(), UNSUPPORTED_PROTOCOL_VERSION);
        assert!(!version.of_credentials());
        assert_eq!(Refusal::of(Some(500), Code::Unavailable, None), None);
        assert_eq!(Refusal::of(None, Code::Internal, Some(-32603)), None);
    }
}
