//! The typed binding of MCP over gRPC: the service `model_context_protocol.Mcp`
//! of the Google Cloud MCP proto files, release v0.2.0 (`proto/gcp/`, MIT,
//! vendored with their license).
//!
//! - [`schema`] and [`wkt`]: every message and enum of `mcp_messages.proto`,
//!   and the well-known types it uses (`Struct`, `Value`, `ListValue`,
//!   `Duration`), as static descriptor tables, generated from the compiled
//!   files and checked against them by the crate's tests;
//! - [`MessageRef`]: a view over an encoded message that
//!   [validates](MessageRef::validate) it against its descriptor and reads
//!   its fields without copying; encoding goes through
//!   [`Writer`](crate::wire::Writer);
//! - [`Rpc`]: the eight unary RPCs, their paths, MCP methods, messages and
//!   routing metadata.
//!
//! What the fields mean in JSON-RPC terms (the mapping of the binding) is the
//! core's business; this module only knows protobuf.

/// The `.proto` name of an [`EnumDesc`] value: the text with feature
/// `names`, else `""` (the wire never needs it; the `name` fields of the
/// descriptors exist only with the feature).
#[cfg(feature = "names")]
macro_rules! proto_name {
    ($name:literal) => {
        $name
    };
}
#[cfg(not(feature = "names"))]
macro_rules! proto_name {
    ($name:literal) => {
        ""
    };
}

mod desc;
pub mod schema;
mod view;
pub mod wkt;

pub use desc::{EnumDesc, FieldDesc, FieldType, Label, MessageDesc};
pub use view::{FieldValue, Limits, MessageRef, Messages, Occurrences, Scalars};

/// The proto package of the typed binding.
pub const PACKAGE: &str = "model_context_protocol";

/// The fully qualified service name.
pub const SERVICE: &str = "model_context_protocol.Mcp";

/// What every RPC's `:path` starts with; the RPC name follows.
pub const SERVICE_PREFIX: &str = "/model_context_protocol.Mcp/";

/// The vendored `.proto` files, `(file name, text)`, for peers that load
/// them at run time (grpc-js, grpcurl); `mcp.proto` imports
/// `mcp_messages.proto` from the same directory.
pub const PROTO_FILES: [(&str, &str); 2] = [
    ("mcp.proto", include_str!("../../proto/gcp/mcp.proto")),
    (
        "mcp_messages.proto",
        include_str!("../../proto/gcp/mcp_messages.proto"),
    ),
];

/// The license of the vendored files (MIT), to ship with any copy of them.
pub const PROTO_LICENSE: &str = include_str!("../../proto/gcp/LICENSE");

/// The eight RPCs of `model_context_protocol.Mcp`, all unary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rpc {
    /// `resources/list`.
    ListResources,
    /// `resources/read`.
    ReadResource,
    /// `resources/templates/list`.
    ListResourceTemplates,
    /// `prompts/list`.
    ListPrompts,
    /// `prompts/get`.
    GetPrompt,
    /// `tools/list`.
    ListTools,
    /// `tools/call`.
    CallTool,
    /// `completion/complete`.
    Complete,
}

impl Rpc {
    /// Every RPC, in the order `mcp.proto` declares them.
    pub const ALL: [Self; 8] = [
        Self::ListResources,
        Self::ReadResource,
        Self::ListResourceTemplates,
        Self::ListPrompts,
        Self::GetPrompt,
        Self::ListTools,
        Self::CallTool,
        Self::Complete,
    ];

    /// The RPC's name in the service: `CallTool`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ListResources => "ListResources",
            Self::ReadResource => "ReadResource",
            Self::ListResourceTemplates => "ListResourceTemplates",
            Self::ListPrompts => "ListPrompts",
            Self::GetPrompt => "GetPrompt",
            Self::ListTools => "ListTools",
            Self::CallTool => "CallTool",
            Self::Complete => "Complete",
        }
    }

    /// The HTTP/2 `:path`: `/model_context_protocol.Mcp/CallTool`.
    pub const fn path(self) -> &'static str {
        match self {
            Self::ListResources => "/model_context_protocol.Mcp/ListResources",
            Self::ReadResource => "/model_context_protocol.Mcp/ReadResource",
            Self::ListResourceTemplates => "/model_context_protocol.Mcp/ListResourceTemplates",
            Self::ListPrompts => "/model_context_protocol.Mcp/ListPrompts",
            Self::GetPrompt => "/model_context_protocol.Mcp/GetPrompt",
            Self::ListTools => "/model_context_protocol.Mcp/ListTools",
            Self::CallTool => "/model_context_protocol.Mcp/CallTool",
            Self::Complete => "/model_context_protocol.Mcp/Complete",
        }
    }

    /// The RPC whose `:path` is `path`, compared case-sensitively; `None`
    /// for any other path, under the service or not.
    pub fn from_path(path: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|rpc| rpc.path().as_bytes() == path)
    }

    /// The MCP method the RPC carries: `tools/call`.
    pub const fn method(self) -> &'static str {
        match self {
            Self::ListResources => "resources/list",
            Self::ReadResource => "resources/read",
            Self::ListResourceTemplates => "resources/templates/list",
            Self::ListPrompts => "prompts/list",
            Self::GetPrompt => "prompts/get",
            Self::ListTools => "tools/list",
            Self::CallTool => "tools/call",
            Self::Complete => "completion/complete",
        }
    }

    /// The RPC that carries the MCP method `method`; `None` for methods the
    /// typed binding has no RPC for (`server/discover`,
    /// `subscriptions/listen`, notifications, extensions, ...).
    pub fn for_method(method: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|rpc| rpc.method().as_bytes() == method)
    }

    /// The routing metadata key a client adds, as the comments of
    /// `mcp.proto` name it: `mcp_tool` (the tool's name) for `CallTool`,
    /// `mcp_prompt` (the prompt's name) for `GetPrompt`, `mcp_resource` (the
    /// resource's URI, or for `Complete` the URI or prompt name of its
    /// reference) for `ReadResource` and `Complete`; `None` for the lists.
    pub const fn routing_key(self) -> Option<&'static str> {
        match self {
            Self::CallTool => Some("mcp_tool"),
            Self::GetPrompt => Some("mcp_prompt"),
            Self::ReadResource | Self::Complete => Some("mcp_resource"),
            Self::ListResources
            | Self::ListResourceTemplates
            | Self::ListPrompts
            | Self::ListTools => None,
        }
    }

    /// The request message.
    pub fn request(self) -> &'static MessageDesc {
        match self {
            Self::ListResources => &schema::LIST_RESOURCES_REQUEST,
            Self::ReadResource => &schema::READ_RESOURCE_REQUEST,
            Self::ListResourceTemplates => &schema::LIST_RESOURCE_TEMPLATES_REQUEST,
            Self::ListPrompts => &schema::LIST_PROMPTS_REQUEST,
            Self::GetPrompt => &schema::GET_PROMPT_REQUEST,
            Self::ListTools => &schema::LIST_TOOLS_REQUEST,
            Self::CallTool => &schema::CALL_TOOL_REQUEST,
            Self::Complete => &schema::COMPLETION_REQUEST,
        }
    }

    /// The response message.
    pub fn response(self) -> &'static MessageDesc {
        match self {
            Self::ListResources => &schema::LIST_RESOURCES_RESPONSE,
            Self::ReadResource => &schema::READ_RESOURCE_RESPONSE,
            Self::ListResourceTemplates => &schema::LIST_RESOURCE_TEMPLATES_RESPONSE,
            Self::ListPrompts => &schema::LIST_PROMPTS_RESPONSE,
            Self::GetPrompt => &schema::GET_PROMPT_RESPONSE,
            Self::ListTools => &schema::LIST_TOOLS_RESPONSE,
            Self::CallTool => &schema::CALL_TOOL_RESPONSE,
            Self::Complete => &schema::COMPLETION_RESPONSE,
        }
    }
}

impl core::fmt::Display for Rpc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
