//! What each JSON key of an MCP object becomes in the typed binding's
//! messages (digest §6): one static table per message, read by the encoder
//! and the decoder alike. The test at the end checks every entry against
//! the descriptor tables of `mcpwire-proto` (field number and type).

use mcpwire_proto::gcp::{MessageDesc, Rpc, schema};

/// How a JSON member and a field map onto each other.
#[derive(Debug, Clone, Copy)]
pub(super) enum Conv {
    /// `string`; decoded when non-empty (or [`ALWAYS`]).
    Str,
    /// proto3 `optional string`: written even when empty; decoded when present.
    StrOpt,
    /// `bool`: written and decoded only when true.
    Bool,
    /// `uint64`, a non-negative safe integer; decoded when above 0.
    Uint64,
    /// `optional int64`, a safe integer; decoded when present.
    Int64Opt,
    /// `int32`; a larger integer is unexpressible; always decoded.
    Int32,
    /// `optional double`.
    F64Opt,
    /// `optional uint64` / `optional uint32`: a non-negative integer up to
    /// the bound; decoded when present. (Behind a reference: no 8-octet
    /// payload makes every table entry 8-aligned.)
    UintOpt(&'static u64),
    /// `optional float`: a finite number; decoded as the shortest text of
    /// the `f32`.
    F32Opt,
    /// `bytes` holding the base64 text of MCP (§6.9), checked both ways.
    Base64,
    /// `google.protobuf.Struct` from a JSON object only (else invalid).
    Object,
    /// `Struct` where anything but an object is unexpressible
    /// (`structuredContent`).
    ObjectOnly,
    /// `Struct` holding a JSON Schema; absent decodes to `{"type":"object"}`.
    Schema,
    /// A sub-message.
    Msg(&'static Mapping),
    /// The members of a JSON object written into the current message (no
    /// sub-message of its own): `completion` of a completion result.
    Inline(&'static Mapping),
    /// A repeated sub-message ↔ an array of objects.
    List(&'static Mapping),
    /// `repeated string` ↔ an array of strings; decoded when non-empty.
    StrList,
    /// An enum ↔ one of the names; 0 is never decoded (absent), an unknown
    /// number is invalid.
    Enum(&'static Names),
    /// A packed `repeated` enum ↔ an array of names.
    EnumList(&'static Names),
    /// `map<string, string>` ↔ an object of strings; decoded when non-empty.
    StrMap,
    /// A repeated message of content members ↔ an array of content blocks.
    Blocks(&'static Union),
    /// One content block whose members sit in the current message
    /// (`PromptMessage`, `SamplingMessage`).
    Block(&'static Union),
    /// `ref` of a completion request: `resource_reference` (2) or
    /// `prompt_reference` (3).
    Ref,
    /// `ttlMs` ↔ `google.protobuf.Duration`.
    Ttl,
    /// A request's `cursor`: non-empty is unexpressible; never decoded.
    Cursor,
    /// `common.input_responses` ↔ `inputResponses`.
    InputResponses,
    /// `_meta` and `resultType` of a result, which the result's own code
    /// writes and reads (`common.metadata`, `common.result_type`).
    Common,
}

/// An enum's MCP names and numbers (a thin reference to it keeps [`Conv`]
/// at two words).
pub(super) type Names = &'static [(&'static str, i32)];

/// The entry is required: absent (or `null`) is [`Missing`](super::TypedError::Missing).
pub(super) const REQ: u8 = 1;
/// Decoded even when empty: `""`, `[]`.
pub(super) const ALWAYS: u8 = 2;

/// One JSON key and its field.
#[derive(Debug)]
pub(super) struct Entry {
    /// The JSON key.
    pub key: &'static str,
    /// The field number, in the message of `group` (0: the message itself);
    /// one octet, as `group`: the tables are flash.
    pub field: u8,
    pub conv: Conv,
    pub flags: u8,
    /// The sub-message of the mapped message that holds the field (`common`,
    /// `request`), or 0.
    pub group: u8,
    /// When decoding finds the field empty or absent: this error text
    /// (invalid), e.g. "Missing tool name".
    pub missing: &'static str,
}

/// A sub-message of the mapped message that some entries write into.
#[derive(Debug)]
pub(super) struct Group {
    pub field: u32,
    /// Written even when none of its keys is present.
    pub always: bool,
}

/// A JSON object type and its message.
#[derive(Debug)]
pub(super) struct Mapping {
    /// The message (read by the tests, which check the table against it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub desc: &'static MessageDesc,
    pub entries: &'static [Entry],
    pub groups: &'static [Group],
    /// JSON keys of which exactly one must be present (`text`/`blob`).
    pub one_of: &'static [&'static str],
}

/// Content blocks: the JSON `type` of each member and its field.
#[derive(Debug)]
pub(super) struct Union {
    pub members: &'static [(&'static str, u32, &'static Mapping)],
}

/// A field number of the tables (all below 256; checked at compile time).
const fn small(n: u32) -> u8 {
    assert!(n < 256, "a field number above 255");
    n as u8
}

pub(super) const fn e(key: &'static str, field: u32, conv: Conv) -> Entry {
    Entry {
        key,
        field: small(field),
        conv,
        flags: 0,
        group: 0,
        missing: "",
    }
}

pub(super) const fn req(key: &'static str, field: u32, conv: Conv) -> Entry {
    Entry {
        key,
        field: small(field),
        conv,
        flags: REQ | ALWAYS,
        group: 0,
        missing: "",
    }
}

pub(super) const fn grouped(group: u32, entry: Entry) -> Entry {
    Entry {
        group: small(group),
        ..entry
    }
}

const fn missing(text: &'static str, entry: Entry) -> Entry {
    Entry {
        missing: text,
        ..entry
    }
}

pub(super) const fn mapping(desc: &'static MessageDesc, entries: &'static [Entry]) -> Mapping {
    Mapping {
        desc,
        entries,
        groups: &[],
        one_of: &[],
    }
}

pub(super) const ROLES: &[(&str, i32)] = &[("user", 1), ("assistant", 2)];
const THEMES: &[(&str, i32)] = &[("light", 1), ("dark", 2)];
const CACHE_SCOPES: &[(&str, i32)] = &[("public", 1), ("private", 2)];
const INCLUDE_CONTEXT: &[(&str, i32)] = &[("none", 0), ("thisServer", 1), ("allServers", 2)];
const ACTIONS: &[(&str, i32)] = &[("accept", 1), ("decline", 2), ("cancel", 3)];

pub(super) static ANNOTATIONS: Mapping = mapping(
    &schema::ANNOTATIONS,
    &[
        e("audience", 1, Conv::EnumList(&ROLES)),
        e("priority", 2, Conv::F32Opt),
        e("lastModified", 3, Conv::StrOpt),
    ],
);

static ICON: Mapping = mapping(
    &schema::ICON,
    &[
        req("src", 1, Conv::Str),
        e("mimeType", 2, Conv::Str),
        e("sizes", 3, Conv::StrList),
        e("theme", 4, Conv::Enum(&THEMES)),
    ],
);

static TEXT: Mapping = mapping(
    &schema::TEXT_CONTENT,
    &[
        req("text", 1, Conv::Str),
        e("annotations", 2, Conv::Msg(&ANNOTATIONS)),
        e("_meta", 3, Conv::Object),
    ],
);

static IMAGE: Mapping = mapping(
    &schema::IMAGE_CONTENT,
    &[
        req("data", 1, Conv::Base64),
        req("mimeType", 2, Conv::Str),
        e("annotations", 3, Conv::Msg(&ANNOTATIONS)),
        e("_meta", 4, Conv::Object),
    ],
);

static AUDIO: Mapping = mapping(
    &schema::AUDIO_CONTENT,
    &[
        req("data", 1, Conv::Base64),
        req("mimeType", 2, Conv::Str),
        e("annotations", 3, Conv::Msg(&ANNOTATIONS)),
        e("_meta", 4, Conv::Object),
    ],
);

/// `text` and `blob`: exactly one on encode; on decode a non-empty `blob`
/// wins, else `text` (always emitted).
pub(super) static RESOURCE_CONTENTS: Mapping = Mapping {
    desc: &schema::RESOURCE_CONTENTS,
    entries: &[
        req("uri", 1, Conv::Str),
        e("mimeType", 2, Conv::Str),
        e("text", 3, Conv::Str),
        e("blob", 4, Conv::Base64),
        e("_meta", 5, Conv::Object),
    ],
    groups: &[],
    one_of: &["text", "blob"],
};

static EMBEDDED: Mapping = mapping(
    &schema::EMBEDDED_RESOURCE,
    &[
        req("resource", 1, Conv::Msg(&RESOURCE_CONTENTS)),
        e("annotations", 2, Conv::Msg(&ANNOTATIONS)),
        e("_meta", 3, Conv::Object),
    ],
);

static RESOURCE: Mapping = mapping(
    &schema::RESOURCE,
    &[
        req("uri", 1, Conv::Str),
        req("name", 2, Conv::Str),
        e("title", 7, Conv::Str),
        e("description", 3, Conv::Str),
        e("mimeType", 4, Conv::Str),
        e("annotations", 5, Conv::Msg(&ANNOTATIONS)),
        e("size", 6, Conv::Uint64),
        e("icons", 8, Conv::List(&ICON)),
        e("_meta", 9, Conv::Object),
    ],
);

static RESOURCE_TEMPLATE: Mapping = mapping(
    &schema::RESOURCE_TEMPLATE,
    &[
        req("uriTemplate", 1, Conv::Str),
        req("name", 2, Conv::Str),
        e("title", 6, Conv::Str),
        e("description", 3, Conv::Str),
        e("mimeType", 4, Conv::Str),
        e("annotations", 5, Conv::Msg(&ANNOTATIONS)),
        e("icons", 7, Conv::List(&ICON)),
        e("_meta", 8, Conv::Object),
    ],
);

static PROMPT_ARGUMENT: Mapping = mapping(
    &schema::PROMPT_ARGUMENT,
    &[
        req("name", 1, Conv::Str),
        e("title", 4, Conv::Str),
        e("description", 2, Conv::Str),
        e("required", 3, Conv::Bool),
    ],
);

static PROMPT: Mapping = mapping(
    &schema::PROMPT,
    &[
        req("name", 1, Conv::Str),
        e("title", 4, Conv::Str),
        e("description", 2, Conv::Str),
        e("arguments", 3, Conv::List(&PROMPT_ARGUMENT)),
        e("icons", 5, Conv::List(&ICON)),
        e("_meta", 6, Conv::Object),
    ],
);

static TOOL_ANNOTATIONS: Mapping = mapping(
    &schema::TOOL_ANNOTATIONS,
    &[
        e("title", 1, Conv::Str),
        e("readOnlyHint", 2, Conv::Bool),
        e("destructiveHint", 3, Conv::Bool),
        e("idempotentHint", 4, Conv::Bool),
        e("openWorldHint", 5, Conv::Bool),
    ],
);

static TOOL: Mapping = mapping(
    &schema::TOOL,
    &[
        req("name", 1, Conv::Str),
        e("title", 6, Conv::Str),
        e("description", 2, Conv::Str),
        req("inputSchema", 3, Conv::Schema),
        e("outputSchema", 5, Conv::Object),
        e("annotations", 4, Conv::Msg(&TOOL_ANNOTATIONS)),
        e("icons", 7, Conv::List(&ICON)),
        e("_meta", 8, Conv::Object),
    ],
);

/// `CallToolResponse.Content`.
pub(super) static CONTENT: Union = Union {
    members: &[
        ("text", 1, &TEXT),
        ("image", 2, &IMAGE),
        ("audio", 3, &AUDIO),
        ("resource", 4, &EMBEDDED),
        ("resource_link", 7, &RESOURCE),
    ],
};

/// The content members of `PromptMessage`.
static PROMPT_CONTENT: Union = Union {
    members: &[
        ("text", 2, &TEXT),
        ("image", 3, &IMAGE),
        ("audio", 4, &AUDIO),
        ("resource", 5, &EMBEDDED),
        ("resource_link", 6, &RESOURCE),
    ],
};

/// The content members of `SamplingMessage`.
static SAMPLING_CONTENT: Union = Union {
    members: &[
        ("text", 2, &TEXT),
        ("image", 3, &IMAGE),
        ("audio", 4, &AUDIO),
    ],
};

static PROMPT_MESSAGE: Mapping = mapping(
    &schema::PROMPT_MESSAGE,
    &[
        req("role", 1, Conv::Enum(&ROLES)),
        req("content", 0, Conv::Block(&PROMPT_CONTENT)),
    ],
);

static SAMPLING_MESSAGE: Mapping = mapping(
    &schema::SAMPLING_MESSAGE,
    &[
        req("role", 1, Conv::Enum(&ROLES)),
        req("content", 0, Conv::Block(&SAMPLING_CONTENT)),
    ],
);

static MODEL_HINT: Mapping = mapping(
    &schema::SAMPLING_CREATE_MESSAGE_REQUEST_MODEL_PREFERENCES_MODEL_HINT,
    &[e("name", 1, Conv::Str)],
);

static MODEL_PREFERENCES: Mapping = mapping(
    &schema::SAMPLING_CREATE_MESSAGE_REQUEST_MODEL_PREFERENCES,
    &[
        e("hints", 1, Conv::List(&MODEL_HINT)),
        e("costPriority", 4, Conv::F32Opt),
        e("speedPriority", 3, Conv::F32Opt),
        e("intelligencePriority", 2, Conv::F32Opt),
    ],
);

/// `sampling/createMessage` params.
pub(super) static SAMPLING_REQUEST: Mapping = mapping(
    &schema::SAMPLING_CREATE_MESSAGE_REQUEST,
    &[
        req("messages", 1, Conv::List(&SAMPLING_MESSAGE)),
        e("modelPreferences", 2, Conv::Msg(&MODEL_PREFERENCES)),
        e("systemPrompt", 3, Conv::Str),
        e("includeContext", 4, Conv::Enum(&INCLUDE_CONTEXT)),
        e("temperature", 5, Conv::F32Opt),
        req("maxTokens", 6, Conv::Int32),
        e("stopSequences", 7, Conv::StrList),
    ],
);

/// The answer to a sampling request: `role` and `content` travel in
/// `message` (field 1).
pub(super) static SAMPLING_RESULT: Mapping = Mapping {
    desc: &schema::SAMPLING_CREATE_MESSAGE_RESULT,
    entries: &[
        grouped(1, req("role", 1, Conv::Enum(&ROLES))),
        grouped(1, req("content", 0, Conv::Block(&SAMPLING_CONTENT))),
        req("model", 2, Conv::Str),
        e("stopReason", 3, Conv::Str),
    ],
    groups: &[Group {
        field: 1,
        always: true,
    }],
    one_of: &[],
};

static ROOT: Mapping = mapping(
    &schema::LIST_ROOTS_RESULT_ROOT,
    &[req("uri", 1, Conv::Str), e("name", 2, Conv::Str)],
);

/// The answer to a `roots/list` request.
pub(super) static ROOTS_RESULT: Mapping = mapping(
    &schema::LIST_ROOTS_RESULT,
    &[req("roots", 1, Conv::List(&ROOT))],
);

/// The answer to an elicitation.
pub(super) static ELICIT_RESULT: Mapping = mapping(
    &schema::ELICIT_RESULT,
    &[
        req("action", 1, Conv::Enum(&ACTIONS)),
        e("content", 2, Conv::Object),
    ],
);

// Requests. `common` (field 1, `RequestFields`) is written only when one of
// its keys is present.

const COMMON: &[Group] = &[Group {
    field: 1,
    always: false,
}];

const META: Entry = grouped(1, e("_meta", 1, Conv::Object));
const INPUT_RESPONSES: Entry = grouped(1, e("inputResponses", 6, Conv::InputResponses));
const REQUEST_STATE: Entry = grouped(1, e("requestState", 8, Conv::StrOpt));
const CURSOR: Entry = e("cursor", 0, Conv::Cursor);

const fn list_request(desc: &'static MessageDesc) -> Mapping {
    Mapping {
        desc,
        entries: &[META, INPUT_RESPONSES, REQUEST_STATE, CURSOR],
        groups: COMMON,
        one_of: &[],
    }
}

static LIST_RESOURCES_REQUEST: Mapping = list_request(&schema::LIST_RESOURCES_REQUEST);
static LIST_RESOURCE_TEMPLATES_REQUEST: Mapping =
    list_request(&schema::LIST_RESOURCE_TEMPLATES_REQUEST);
static LIST_PROMPTS_REQUEST: Mapping = list_request(&schema::LIST_PROMPTS_REQUEST);
static LIST_TOOLS_REQUEST: Mapping = list_request(&schema::LIST_TOOLS_REQUEST);

static READ_RESOURCE_REQUEST: Mapping = Mapping {
    desc: &schema::READ_RESOURCE_REQUEST,
    entries: &[
        META,
        INPUT_RESPONSES,
        REQUEST_STATE,
        missing("Missing resource URI", req("uri", 2, Conv::Str)),
    ],
    groups: COMMON,
    one_of: &[],
};

static GET_PROMPT_REQUEST: Mapping = Mapping {
    desc: &schema::GET_PROMPT_REQUEST,
    entries: &[
        META,
        INPUT_RESPONSES,
        REQUEST_STATE,
        missing("Missing prompt name", req("name", 2, Conv::Str)),
        e("arguments", 3, Conv::StrMap),
    ],
    groups: COMMON,
    one_of: &[],
};

/// `name` and `arguments` travel in `request` (field 2), always written.
static CALL_TOOL_REQUEST: Mapping = Mapping {
    desc: &schema::CALL_TOOL_REQUEST,
    entries: &[
        META,
        INPUT_RESPONSES,
        REQUEST_STATE,
        grouped(2, missing("Missing tool name", req("name", 1, Conv::Str))),
        grouped(2, e("arguments", 2, Conv::Object)),
    ],
    groups: &[
        Group {
            field: 1,
            always: false,
        },
        Group {
            field: 2,
            always: true,
        },
    ],
    one_of: &[],
};

/// `ref/prompt` references.
pub(super) static PROMPT_REFERENCE: Mapping = mapping(
    &schema::PROMPT_REFERENCE,
    &[req("name", 1, Conv::Str), e("title", 2, Conv::Str)],
);

/// `ref/resource` references.
pub(super) static RESOURCE_REFERENCE: Mapping =
    mapping(&schema::RESOURCE_REFERENCE, &[req("uri", 1, Conv::Str)]);

static COMPLETION_ARGUMENT: Mapping = mapping(
    &schema::COMPLETION_REQUEST_ARGUMENT,
    &[req("name", 1, Conv::Str), req("value", 2, Conv::Str)],
);

static COMPLETION_CONTEXT: Mapping = mapping(
    &schema::COMPLETION_REQUEST_CONTEXT,
    &[e("arguments", 1, Conv::StrMap)],
);

static COMPLETION_REQUEST: Mapping = Mapping {
    desc: &schema::COMPLETION_REQUEST,
    entries: &[
        META,
        INPUT_RESPONSES,
        REQUEST_STATE,
        req("ref", 0, Conv::Ref),
        req("argument", 4, Conv::Msg(&COMPLETION_ARGUMENT)),
        e("context", 5, Conv::Msg(&COMPLETION_CONTEXT)),
    ],
    groups: COMMON,
    one_of: &[],
};

/// The request mapping of `rpc` (its `params`).
pub(super) fn request(rpc: Rpc) -> &'static Mapping {
    match rpc {
        Rpc::ListResources => &LIST_RESOURCES_REQUEST,
        Rpc::ReadResource => &READ_RESOURCE_REQUEST,
        Rpc::ListResourceTemplates => &LIST_RESOURCE_TEMPLATES_REQUEST,
        Rpc::ListPrompts => &LIST_PROMPTS_REQUEST,
        Rpc::GetPrompt => &GET_PROMPT_REQUEST,
        Rpc::ListTools => &LIST_TOOLS_REQUEST,
        Rpc::CallTool => &CALL_TOOL_REQUEST,
        Rpc::Complete => &COMPLETION_REQUEST,
    }
}

// Results: the RPC fields of a complete result. `_meta` and `resultType`
// (in `common`) are the encoder's and decoder's own business.

const TTL: Entry = e("ttlMs", 3, Conv::Ttl);
const RESULT_META: Entry = e("_meta", 0, Conv::Common);
const RESULT_TYPE: Entry = e("resultType", 0, Conv::Common);
const CACHE_SCOPE: Entry = e("cacheScope", 4, Conv::Enum(&CACHE_SCOPES));

static LIST_TOOLS_RESULT: Mapping = mapping(
    &schema::LIST_TOOLS_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("tools", 2, Conv::List(&TOOL)),
        TTL,
        CACHE_SCOPE,
    ],
);

static LIST_RESOURCES_RESULT: Mapping = mapping(
    &schema::LIST_RESOURCES_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("resources", 2, Conv::List(&RESOURCE)),
        TTL,
        CACHE_SCOPE,
    ],
);

static LIST_RESOURCE_TEMPLATES_RESULT: Mapping = mapping(
    &schema::LIST_RESOURCE_TEMPLATES_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("resourceTemplates", 2, Conv::List(&RESOURCE_TEMPLATE)),
        TTL,
        CACHE_SCOPE,
    ],
);

static LIST_PROMPTS_RESULT: Mapping = mapping(
    &schema::LIST_PROMPTS_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("prompts", 2, Conv::List(&PROMPT)),
        TTL,
        CACHE_SCOPE,
    ],
);

static READ_RESOURCE_RESULT: Mapping = mapping(
    &schema::READ_RESOURCE_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("contents", 2, Conv::List(&RESOURCE_CONTENTS)),
        TTL,
        CACHE_SCOPE,
    ],
);

static GET_PROMPT_RESULT: Mapping = mapping(
    &schema::GET_PROMPT_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        e("description", 2, Conv::Str),
        req("messages", 3, Conv::List(&PROMPT_MESSAGE)),
    ],
);

static CALL_TOOL_RESULT: Mapping = mapping(
    &schema::CALL_TOOL_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("content", 2, Conv::Blocks(&CONTENT)),
        e("structuredContent", 3, Conv::ObjectOnly),
        e("isError", 4, Conv::Bool),
    ],
);

static COMPLETION: Mapping = mapping(
    &schema::COMPLETION_RESPONSE,
    &[
        req("values", 2, Conv::StrList),
        e("total", 3, Conv::Int64Opt),
        e("hasMore", 4, Conv::Bool),
    ],
);

static COMPLETION_RESULT: Mapping = mapping(
    &schema::COMPLETION_RESPONSE,
    &[
        RESULT_META,
        RESULT_TYPE,
        req("completion", 0, Conv::Inline(&COMPLETION)),
    ],
);

/// The result mapping of `rpc` (the fields of a complete result).
pub(super) fn result(rpc: Rpc) -> &'static Mapping {
    match rpc {
        Rpc::ListResources => &LIST_RESOURCES_RESULT,
        Rpc::ReadResource => &READ_RESOURCE_RESULT,
        Rpc::ListResourceTemplates => &LIST_RESOURCE_TEMPLATES_RESULT,
        Rpc::ListPrompts => &LIST_PROMPTS_RESULT,
        Rpc::GetPrompt => &GET_PROMPT_RESULT,
        Rpc::ListTools => &LIST_TOOLS_RESULT,
        Rpc::CallTool => &CALL_TOOL_RESULT,
        Rpc::Complete => &COMPLETION_RESULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire_proto::gcp::{FieldType, wkt};

    /// The message a group's or entry's fields live in.
    fn holder(m: &Mapping, group: u32) -> &'static MessageDesc {
        if group == 0 {
            return m.desc;
        }
        m.desc
            .field(group)
            .and_then(|f| f.ty.message())
            .unwrap_or_else(|| panic!("{}: no group field {group}", m.desc.name))
    }

    pub(super) fn check(m: &'static Mapping, seen: &mut std::vec::Vec<*const Mapping>) {
        if seen.contains(&(m as *const _)) {
            return;
        }
        seen.push(m);
        for entry in m.entries {
            let desc = holder(m, u32::from(entry.group));
            let field = desc.field(u32::from(entry.field));
            let name = desc.name;
            let key = entry.key;
            let ty = field.map(|f| f.ty);
            match entry.conv {
                Conv::Str | Conv::StrOpt | Conv::StrList => {
                    assert!(matches!(ty, Some(FieldType::String)), "{name}.{key}")
                }
                Conv::Bool => assert!(matches!(ty, Some(FieldType::Bool)), "{name}.{key}"),
                Conv::Uint64 => assert!(matches!(ty, Some(FieldType::Uint64)), "{name}.{key}"),
                Conv::Int64Opt => assert!(matches!(ty, Some(FieldType::Int64)), "{name}.{key}"),
                Conv::Int32 => assert!(matches!(ty, Some(FieldType::Int32)), "{name}.{key}"),
                Conv::F32Opt => assert!(matches!(ty, Some(FieldType::Float)), "{name}.{key}"),
                Conv::F64Opt => assert!(matches!(ty, Some(FieldType::Double)), "{name}.{key}"),
                Conv::UintOpt(max) => assert!(
                    matches!(
                        (ty, *max),
                        (Some(FieldType::Uint64), 0x20_0000_0000_0000)
                            | (Some(FieldType::Uint32), 0xffff_ffff)
                    ),
                    "{name}.{key}"
                ),
                Conv::Base64 => assert!(matches!(ty, Some(FieldType::Bytes)), "{name}.{key}"),
                Conv::Object | Conv::ObjectOnly | Conv::Schema => assert!(
                    matches!(ty, Some(FieldType::Message(s)) if core::ptr::eq(s, &wkt::STRUCT)),
                    "{name}.{key}"
                ),
                Conv::Ttl => assert!(
                    matches!(ty, Some(FieldType::Message(s)) if core::ptr::eq(s, &wkt::DURATION)),
                    "{name}.{key}"
                ),
                Conv::Msg(sub) | Conv::List(sub) => {
                    assert!(
                        matches!(ty, Some(FieldType::Message(s)) if core::ptr::eq(s, sub.desc)),
                        "{name}.{key}"
                    );
                    check(sub, seen);
                }
                Conv::Inline(sub) => {
                    assert!(core::ptr::eq(sub.desc, desc), "{name}.{key}");
                    check(sub, seen);
                }
                Conv::Enum(values) | Conv::EnumList(values) => {
                    let Some(FieldType::Enum(en)) = ty else {
                        panic!("{name}.{key}: not an enum");
                    };
                    for (_, n) in values.iter() {
                        assert!(en.name_of(*n).is_some(), "{name}.{key} = {n}");
                    }
                }
                Conv::StrMap => assert!(matches!(ty, Some(FieldType::Map(_))), "{name}.{key}"),
                Conv::InputResponses => {
                    assert!(matches!(ty, Some(FieldType::Map(_))), "{name}.{key}")
                }
                Conv::Blocks(u) => {
                    let Some(FieldType::Message(content)) = ty else {
                        panic!("{name}.{key}");
                    };
                    for (_, n, sub) in u.members {
                        let f = content.field(*n).map(|f| f.ty);
                        assert!(
                            matches!(f, Some(FieldType::Message(s)) if core::ptr::eq(s, sub.desc)),
                            "{name}.{key} member {n}"
                        );
                        check(sub, seen);
                    }
                }
                Conv::Block(u) => {
                    for (_, n, sub) in u.members {
                        let f = desc.field(*n).map(|f| f.ty);
                        assert!(
                            matches!(f, Some(FieldType::Message(s)) if core::ptr::eq(s, sub.desc)),
                            "{name}.{key} member {n}"
                        );
                        check(sub, seen);
                    }
                }
                Conv::Ref => {
                    assert!(core::ptr::eq(desc, &schema::COMPLETION_REQUEST));
                    check(&PROMPT_REFERENCE, seen);
                    check(&RESOURCE_REFERENCE, seen);
                }
                Conv::Cursor | Conv::Common => {}
            }
        }
    }

    #[test]
    fn every_entry_names_a_field_of_its_type() {
        let mut seen = std::vec::Vec::new();
        for rpc in Rpc::ALL {
            assert!(core::ptr::eq(request(rpc).desc, rpc.request()));
            assert!(core::ptr::eq(result(rpc).desc, rpc.response()));
            check(request(rpc), &mut seen);
            check(result(rpc), &mut seen);
        }
        for m in [
            &SAMPLING_REQUEST,
            &SAMPLING_RESULT,
            &ROOTS_RESULT,
            &ELICIT_RESULT,
            &super::super::elicit::STRING_SCHEMA,
            &super::super::elicit::BOOLEAN_SCHEMA,
            &super::super::elicit::INTEGER_SCHEMA,
            &super::super::elicit::NUMBER_SCHEMA,
        ] {
            check(m, &mut seen);
        }
    }
}
