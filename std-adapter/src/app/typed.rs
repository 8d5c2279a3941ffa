//! Typed tools (feature `schemars`): a tool's input schema generated from
//! its argument type, its arguments deserialized before the handler runs,
//! and results that may be a serializable value ([`Structured`]).
//!
//! The schema is shaped for the engine's checks (`Registry::check`, MCP
//! §5.5.1 `x-mcp-header` annotations): no `$schema`, subschemas inlined so
//! an annotated property is reachable through `properties` alone, and an
//! annotated `Option<T>` property typed as `T`'s plain type.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde_json::{Map, Value};

use super::result::{ToolError, ToolResult};

/// What a typed tool's handler returns: a [`ToolResult`], or a
/// [`Structured`] value.
pub trait IntoToolResult {
    fn into_tool_result(self) -> Result<ToolResult, ToolError>;
}

impl IntoToolResult for ToolResult {
    fn into_tool_result(self) -> Result<ToolResult, ToolError> {
        Ok(self)
    }
}

/// A typed tool's value result: `structuredContent`, with its JSON text as
/// the text block for clients that read only content. `T: JsonSchema` so
/// that the tool can announce it as `outputSchema` once the registry
/// carries one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structured<T>(pub T);

impl<T: Serialize + JsonSchema> IntoToolResult for Structured<T> {
    fn into_tool_result(self) -> Result<ToolResult, ToolError> {
        serde_json::to_value(&self.0)
            .map(ToolResult::structured)
            .map_err(|e| ToolError::internal(format!("result not serializable: {e}")))
    }
}

/// The input schema of `T`, as a tool announces it; `None` when `T` does
/// not describe a JSON object (MCP tools take named arguments).
pub(crate) fn input_schema<T: JsonSchema>() -> Option<Value> {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    let object = schema.as_object_mut()?;
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    plain_annotated_types(object);
    Some(schema)
}

/// `Option<T>` is `"type": [T, "null"]`; the engine mirrors only string,
/// integer and boolean arguments into headers, so an annotated optional
/// argument is announced with `T` alone (it stays optional: not in
/// `required`; an explicit `null` still deserializes as `None`).
fn plain_annotated_types(node: &mut Map<String, Value>) {
    if node.contains_key("x-mcp-header")
        && let Some(Value::Array(types)) = node.get("type")
        && let [a, b] = types.as_slice()
    {
        let plain = match (a.as_str(), b.as_str()) {
            (Some("null"), Some(_)) => Some(b.clone()),
            (Some(_), Some("null")) => Some(a.clone()),
            _ => None,
        };
        if let Some(plain) = plain {
            node.insert("type".into(), plain);
        }
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        for sub in properties.values_mut() {
            if let Value::Object(sub) = sub {
                plain_annotated_types(sub);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::handler::arguments_from_slice;
    use serde::Deserialize;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Inner {
        /// Where.
        #[schemars(extend("x-mcp-header" = "Region"))]
        region: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Args {
        target: Inner,
        #[schemars(extend("x-mcp-header" = "Limit"))]
        limit: u32,
        tags: Option<Vec<String>>,
    }

    #[test]
    fn schemas_are_inline_objects_the_engine_accepts() {
        let schema = input_schema::<Args>().unwrap();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("$schema").is_none() && schema.get("$defs").is_none());
        let region = &schema["properties"]["target"]["properties"]["region"];
        assert_eq!(region["type"], "string");
        assert_eq!(region["description"], "Where.");
        // Unannotated options keep their null.
        assert_eq!(
            schema["properties"]["tags"]["type"],
            json!(["array", "null"])
        );
        assert_eq!(schema["required"], json!(["target", "limit"]));
        let text = schema.to_string();
        let annotations =
            mcpwire_core::mcp::mirror::Annotations::<'_, 8>::collect(text.as_bytes()).unwrap();
        assert_eq!(annotations.iter().count(), 2);
        // Not an object: no tool schema.
        assert!(input_schema::<u32>().is_none());
        assert!(input_schema::<Vec<String>>().is_none());
    }

    #[test]
    fn bad_arguments_name_the_argument() {
        let e =
            arguments_from_slice::<Args>(br#"{"target": {"region": 5}, "limit": 1}"#).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("target.region: invalid type"), "{e}");
        assert_eq!(e.data, Some(json!({"argument": "target.region"})));
        let e = arguments_from_slice::<Args>(br#"{"target": {}}"#).unwrap_err();
        assert!(e.message.contains("missing field `limit`"), "{e}");
        // The reader's place in the text is left out: the path names it.
        assert!(!e.message.contains("line 1"), "{e}");
        let e = arguments_from_slice::<Args>(b"{}").unwrap_err();
        assert_eq!(e.code, -32602);
    }
}
