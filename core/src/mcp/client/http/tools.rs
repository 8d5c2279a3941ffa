//! The `x-mcp-header` rules of a `tools/call` over HTTP (MCP 2026-07-28
//! §5.5.4), the same as the gRPC client's (its annotation cache):
//! which tools of a `tools/list` result the client keeps (and whose schema
//! it mirrors from), and when a call is sent again after the server
//! refused its headers. The schema store itself is the driver's.

use crate::mcp::error::HEADER_MISMATCH;
use crate::mcp::json;
use crate::mcp::mirror::{AnnotationError, Annotations};
use crate::mcp::registry::MAX_CLIENT_ANNOTATIONS;

/// What the client does with one tool of a `tools/list` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSchema {
    /// Valid, with `x-mcp-header` annotations: keep its `inputSchema`
    /// to mirror the arguments of a call.
    Annotated,
    /// Valid, nothing to mirror.
    Plain,
    /// An invalid annotation: the tool is dropped from the result the
    /// application sees (with this reason in a warning).
    Invalid(AnnotationError),
}

/// Judges `schema`, a tool's `inputSchema` (raw JSON; `{}` when absent).
pub fn judge_schema(schema: &[u8]) -> ToolSchema {
    match Annotations::<'_, MAX_CLIENT_ANNOTATIONS>::collect(json::trim(schema)) {
        Ok(a) if a.is_empty() => ToolSchema::Plain,
        Ok(_) => ToolSchema::Annotated,
        Err(e) => ToolSchema::Invalid(e),
    }
}

/// Whether the answer to `request` (error `code`, none for a result)
/// calls for reading `tools/list` again and sending the call once more:
/// a `tools/call` refused with -32020 that was not sent again already.
pub fn relist_and_retry(request: &[u8], code: Option<i64>, already_retried: bool) -> bool {
    !already_retried
        && code == Some(i64::from(HEADER_MISMATCH))
        && json::get(request, b"method").is_some_and(|m| json::str_eq(m, b"tools/call"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_kept_mirrored_or_dropped_by_their_annotations() {
        let annotated =
            br#"{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}"#;
        assert_eq!(judge_schema(annotated), ToolSchema::Annotated);
        assert_eq!(judge_schema(b" {} "), ToolSchema::Plain);
        let number =
            br#"{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}"#;
        assert_eq!(
            judge_schema(number),
            ToolSchema::Invalid(AnnotationError::UnsupportedType)
        );
        let spaced =
            br#"{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"A B"}}}"#;
        assert_eq!(
            judge_schema(spaced),
            ToolSchema::Invalid(AnnotationError::NotAToken)
        );
    }

    #[test]
    fn a_tool_with_fourteen_annotations_is_mirrored() {
        let mut schema = std::string::String::from(r#"{"type":"object","properties":{"#);
        for i in 0..14 {
            if i > 0 {
                schema.push(',');
            }
            schema.push_str(&std::format!(
                r#""p{i}":{{"type":"string","x-mcp-header":"P{i}"}}"#
            ));
        }
        schema.push_str("}}");
        assert_eq!(judge_schema(schema.as_bytes()), ToolSchema::Annotated);
    }

    #[test]
    fn only_a_tools_call_refused_with_32020_is_sent_again_once() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(relist_and_retry(call, Some(-32020), false));
        assert!(!relist_and_retry(call, Some(-32020), true));
        assert!(!relist_and_retry(call, Some(-32602), false));
        assert!(!relist_and_retry(call, None, false));
        assert!(!relist_and_retry(list, Some(-32020), false));
    }
}
