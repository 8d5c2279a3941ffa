//! What a server offers, described statically: tools, resources, resource
//! templates and prompts, and the JSON of the list results built from them.
//!
//! Descriptions are borrowed (`&'r str`, usually `'static`), so a firmware
//! keeps them in flash. Input schemas are JSON text, checked once by
//! [`Registry::check`].

#[cfg(feature = "forward")]
use super::error::RpcError;
use super::json;
use super::mirror::{AnnotationError, Annotations};
use super::writer::JsonWriter;

/// A tool (MCP 2026-07-28 §10.1).
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo<'r> {
    pub name: &'r str,
    pub title: Option<&'r str>,
    pub description: &'r str,
    /// A JSON Schema object, as JSON text.
    pub input_schema: &'r str,
}

/// A resource.
#[derive(Debug, Clone, Copy)]
pub struct ResourceInfo<'r> {
    pub uri: &'r str,
    pub name: &'r str,
    pub description: Option<&'r str>,
    pub mime_type: Option<&'r str>,
}

/// A resource template (RFC 6570 URI template).
#[derive(Debug, Clone, Copy)]
pub struct ResourceTemplateInfo<'r> {
    pub uri_template: &'r str,
    pub name: &'r str,
    pub description: Option<&'r str>,
    pub mime_type: Option<&'r str>,
}

/// An argument of a prompt.
#[derive(Debug, Clone, Copy)]
pub struct PromptArgument<'r> {
    pub name: &'r str,
    pub description: Option<&'r str>,
    pub required: bool,
}

/// A prompt.
#[derive(Debug, Clone, Copy)]
pub struct PromptInfo<'r> {
    pub name: &'r str,
    pub description: Option<&'r str>,
    pub arguments: &'r [PromptArgument<'r>],
}

/// Who the server is.
#[derive(Debug, Clone, Copy)]
pub struct ServerInfo<'r> {
    pub name: &'r str,
    pub version: &'r str,
    pub instructions: Option<&'r str>,
}

/// Everything a server offers.
#[derive(Debug, Clone, Copy)]
pub struct Registry<'r> {
    pub info: ServerInfo<'r>,
    pub tools: &'r [ToolInfo<'r>],
    pub resources: &'r [ResourceInfo<'r>],
    pub templates: &'r [ResourceTemplateInfo<'r>],
    pub prompts: &'r [PromptInfo<'r>],
    /// The server sends list-changed and resource-updated events on
    /// `subscriptions/listen` streams.
    pub listen: bool,
    /// The server answers `completion/complete`.
    pub completions: bool,
    /// Every checked request goes to the application as
    /// [`RequestKind::Forward`](super::server::RequestKind::Forward),
    /// whatever its method (`server/discover`, the list methods and
    /// `subscriptions/listen` among them): a bridge answers them from the
    /// server it forwards to. The envelope, `_meta`, version and mirrored
    /// header checks still run first; the lists above are not served.
    pub forward: bool,
    /// The tool schemas of the server a forwarding registry forwards to,
    /// as it learnt them (feature `forward`): a `tools/call`'s
    /// `mcp-param-*` headers are checked against them as against
    /// [`tools`](Self::tools), and refused (-32020) for a tool whose schema
    /// is not known. `None`: a forwarded call's `mcp-param-*` headers are
    /// not checked (only `mcp-name` and `mcp-method` are).
    #[cfg(feature = "forward")]
    pub forwarded_tools: Option<&'r dyn ForwardedTools>,
    /// The tools whose input schema has no `x-mcp-header` annotation, as
    /// [`check`](Self::check) found them: a call to one of them skips its
    /// schema in the mirrored-header check. Start from the default, which
    /// knows none (every call reads its tool's schema).
    pub plain_schemas: PlainSchemas,
}

/// What a forwarding registry knows of one tool of the server it forwards
/// to (feature `forward`).
#[cfg(feature = "forward")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardedSchema<'a> {
    /// An input schema with `x-mcp-header` annotations (JSON text): a
    /// call's `mcp-param-*` headers are checked against its arguments.
    Annotated(&'a [u8]),
    /// An input schema without annotations: nothing to check, and an
    /// `mcp-param-*` header is ignored, as a server does for its own tool.
    Plain,
    /// No schema known: the server's list was never read or did not name
    /// the tool, or the tool's annotations are invalid. A call with an
    /// `mcp-param-*` header is refused (-32020): it cannot be checked, and
    /// a gateway in front may route or authorize on it.
    Unknown,
}

/// The tool schemas a forwarding registry learnt from the server it
/// forwards to (its `tools/list`, read again when the list changes), kept
/// by the application (feature `forward`); the engine looks one up per
/// `tools/call` of a binding that mirrors headers.
#[cfg(feature = "forward")]
pub trait ForwardedTools: Sync + core::fmt::Debug {
    /// Calls `check` with what is known of the tool called `name` (a raw
    /// JSON string, quotes and escapes as the request has them) and
    /// returns its answer; the schema need live only as long as the call.
    fn with_schema(
        &self,
        name: &[u8],
        check: &mut dyn FnMut(ForwardedSchema<'_>) -> Result<(), RpcError>,
    ) -> Result<(), RpcError>;
}

/// Which tools of a registry, by index, have an input schema without an
/// `x-mcp-header` annotation (the first 64; a later tool's schema is read
/// at each call). Only [`Registry::check`] marks a tool, and the marks
/// hold for the tool list it checked: a registry built by hand, or given
/// other tools after its check, reads every schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlainSchemas {
    bits: u64,
    /// The address and length of the tool list checked.
    tools: (usize, usize),
}

impl PlainSchemas {
    /// No tool marked (every schema is read): what a registry built by hand
    /// starts with, usable in a `const` registry.
    pub const NONE: Self = Self {
        bits: 0,
        tools: (0, 0),
    };
}

/// Why a registry cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryError<'r> {
    /// A tool's input schema is not a JSON object.
    InvalidSchema { tool: &'r str },
    /// A tool's `x-mcp-header` annotations are invalid (§5.5.1).
    InvalidAnnotation {
        tool: &'r str,
        error: AnnotationError,
    },
    /// Two tools share a name.
    DuplicateTool { tool: &'r str },
}

/// Annotations tracked per tool.
pub const MAX_ANNOTATIONS: usize = 8;
/// Annotations a client mirrors per tool: the servers it calls may
/// annotate more arguments than this crate's own registry serves (the
/// conformance suite's `test_custom_headers` has 14). A tool with more is
/// left out of the client's `tools/list`, as an invalid one.
pub const MAX_CLIENT_ANNOTATIONS: usize = 16;

impl<'r> Registry<'r> {
    /// A registry of `info` and `tools` alone: no resources, templates or
    /// prompts, no listen streams, completions or forwarding (set those
    /// fields after), and no schema marked yet ([`check`](Self::check)
    /// marks them).
    pub const fn new(info: ServerInfo<'r>, tools: &'r [ToolInfo<'r>]) -> Self {
        Self {
            info,
            tools,
            resources: &[],
            templates: &[],
            prompts: &[],
            listen: false,
            completions: false,
            forward: false,
            #[cfg(feature = "forward")]
            forwarded_tools: None,
            plain_schemas: PlainSchemas::NONE,
        }
    }

    /// Checks the schemas and annotations once, before serving, and notes
    /// which schemas have no annotation ([`plain_schemas`](Self::plain_schemas)).
    pub fn check(&mut self) -> Result<(), RegistryError<'r>> {
        let mut plain = 0u64;
        for (i, t) in self.tools.iter().enumerate() {
            let schema = t.input_schema.as_bytes();
            if json::validate(schema, json::DEFAULT_MAX_DEPTH).is_err()
                || json::kind(schema) != Some(json::Kind::Object)
            {
                return Err(RegistryError::InvalidSchema { tool: t.name });
            }
            let annotations =
                Annotations::<'_, MAX_ANNOTATIONS>::collect(schema).map_err(|error| {
                    RegistryError::InvalidAnnotation {
                        tool: t.name,
                        error,
                    }
                })?;
            if self.tools[..i].iter().any(|o| o.name == t.name) {
                return Err(RegistryError::DuplicateTool { tool: t.name });
            }
            if i < 64 && annotations.is_empty() {
                plain |= 1 << i;
            }
        }
        self.plain_schemas = PlainSchemas {
            bits: plain,
            tools: (self.tools.as_ptr() as usize, self.tools.len()),
        };
        Ok(())
    }

    /// The marks of [`check`](Self::check), if they are of these tools.
    /// None on a small target: its few tools' schemas are searched at each
    /// call, with less code.
    fn plain_bits(&self) -> u64 {
        let p = self.plain_schemas;
        if json::WORDS && p.tools == (self.tools.as_ptr() as usize, self.tools.len()) {
            p.bits
        } else {
            0
        }
    }

    /// Whether tool `index`'s schema is known to have no annotation.
    pub fn schema_is_plain(&self, index: usize) -> bool {
        index < 64 && (self.plain_bits() >> index) & 1 == 1
    }

    /// Whether no tool's schema has an annotation, as far as known.
    pub fn no_schema_annotated(&self) -> bool {
        self.tools.len() <= 64 && self.plain_bits().count_ones() as usize == self.tools.len()
    }

    /// The index of the tool called `name` (a raw JSON string).
    pub fn tool_index(&self, name: &[u8]) -> Option<usize> {
        self.tools
            .iter()
            .position(|t| json::str_eq(name, t.name.as_bytes()))
    }

    /// The tool called `name` (a raw JSON string).
    pub fn tool(&self, name: &[u8]) -> Option<&ToolInfo<'r>> {
        self.tools
            .iter()
            .find(|t| json::str_eq(name, t.name.as_bytes()))
    }

    /// The prompt called `name` (a raw JSON string).
    pub fn prompt(&self, name: &[u8]) -> Option<&PromptInfo<'r>> {
        self.prompts
            .iter()
            .find(|p| json::str_eq(name, p.name.as_bytes()))
    }

    /// Writes the `capabilities` object of `server/discover`.
    pub fn write_capabilities(&self, w: &mut JsonWriter<'_>) {
        w.raw(b"{");
        let mut first = true;
        let mut cap = |w: &mut JsonWriter<'_>, name: &[u8], body: &[u8]| {
            w.key(first, name).raw(body);
            first = false;
        };
        if !self.tools.is_empty() {
            cap(
                w,
                b"tools",
                if self.listen {
                    b"{\"listChanged\":true}"
                } else {
                    b"{}"
                },
            );
        }
        if !self.resources.is_empty() || !self.templates.is_empty() {
            cap(
                w,
                b"resources",
                if self.listen {
                    b"{\"listChanged\":true,\"subscribe\":true}"
                } else {
                    b"{}"
                },
            );
        }
        if !self.prompts.is_empty() {
            cap(
                w,
                b"prompts",
                if self.listen {
                    b"{\"listChanged\":true}"
                } else {
                    b"{}"
                },
            );
        }
        if self.completions {
            cap(w, b"completions", b"{}");
        }
        w.raw(b"}");
    }

    /// The result of `server/discover` (§8.2).
    pub fn write_discover(&self, w: &mut JsonWriter<'_>, supported: &[&str]) {
        w.raw(b"{").key(true, b"resultType").string(b"complete");
        w.key(false, b"supportedVersions").raw(b"[");
        for (i, v) in supported.iter().enumerate() {
            if i > 0 {
                w.raw(b",");
            }
            w.string(v.as_bytes());
        }
        w.raw(b"]").key(false, b"capabilities");
        self.write_capabilities(w);
        if let Some(text) = self.info.instructions {
            w.key(false, b"instructions").string(text.as_bytes());
        }
        w.key(false, b"ttlMs")
            .int(3_600_000)
            .key(false, b"cacheScope")
            .string(b"public");
        self.write_result_meta(w);
        w.raw(b"}");
    }

    /// `"_meta":{"io.modelcontextprotocol/serverInfo":{...}}`, after a member.
    pub fn write_result_meta(&self, w: &mut JsonWriter<'_>) {
        w.key(false, b"_meta").raw(b"{");
        w.key(true, super::meta::KEY_SERVER_INFO.as_bytes())
            .raw(b"{");
        w.key(true, b"name").string(self.info.name.as_bytes());
        w.key(false, b"version")
            .string(self.info.version.as_bytes());
        w.raw(b"}}");
    }

    /// A complete, cacheable list result: `{"resultType":"complete",
    /// "<key>":[items],"ttlMs":0,"cacheScope":"public","_meta":...}`.
    fn write_list<T>(
        &self,
        w: &mut JsonWriter<'_>,
        key: &[u8],
        items: &[T],
        item: impl Fn(&mut JsonWriter<'_>, &T),
    ) {
        w.raw(b"{")
            .key(true, b"resultType")
            .string(b"complete")
            .key(false, key)
            .raw(b"[");
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                w.raw(b",");
            }
            w.raw(b"{");
            item(w, x);
            w.raw(b"}");
        }
        w.raw(b"]")
            .key(false, b"ttlMs")
            .int(0)
            .key(false, b"cacheScope")
            .string(b"public");
        self.write_result_meta(w);
        w.raw(b"}");
    }

    /// The result of `tools/list`: every tool, one page.
    pub fn write_tools_list(&self, w: &mut JsonWriter<'_>) {
        self.write_list(w, b"tools", self.tools, |w, t| {
            w.key(true, b"name").string(t.name.as_bytes());
            optional(w, b"title", t.title);
            w.key(false, b"description")
                .string(t.description.as_bytes());
            w.key(false, b"inputSchema")
                .raw(json::trim(t.input_schema.as_bytes()));
        });
    }

    /// The result of `resources/list`.
    pub fn write_resources_list(&self, w: &mut JsonWriter<'_>) {
        self.write_list(w, b"resources", self.resources, |w, r| {
            resource_fields(w, b"uri", r.uri, r.name, r.description, r.mime_type);
        });
    }

    /// The result of `resources/templates/list`.
    pub fn write_templates_list(&self, w: &mut JsonWriter<'_>) {
        self.write_list(w, b"resourceTemplates", self.templates, |w, r| {
            resource_fields(
                w,
                b"uriTemplate",
                r.uri_template,
                r.name,
                r.description,
                r.mime_type,
            );
        });
    }

    /// The result of `prompts/list`.
    pub fn write_prompts_list(&self, w: &mut JsonWriter<'_>) {
        self.write_list(w, b"prompts", self.prompts, |w, p| {
            w.key(true, b"name").string(p.name.as_bytes());
            optional(w, b"description", p.description);
            w.key(false, b"arguments").raw(b"[");
            for (j, a) in p.arguments.iter().enumerate() {
                if j > 0 {
                    w.raw(b",");
                }
                w.raw(b"{").key(true, b"name").string(a.name.as_bytes());
                optional(w, b"description", a.description);
                w.key(false, b"required")
                    .raw(if a.required { b"true" } else { b"false" });
                w.raw(b"}");
            }
            w.raw(b"]");
        });
    }
}

/// The members a resource and a resource template share.
fn resource_fields(
    w: &mut JsonWriter<'_>,
    locator_key: &[u8],
    locator: &str,
    name: &str,
    description: Option<&str>,
    mime_type: Option<&str>,
) {
    w.key(true, locator_key).string(locator.as_bytes());
    w.key(false, b"name").string(name.as_bytes());
    optional(w, b"description", description);
    optional(w, b"mimeType", mime_type);
}

fn optional(w: &mut JsonWriter<'_>, key: &[u8], value: Option<&str>) {
    if let Some(v) = value {
        w.key(false, key).string(v.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [ToolInfo<'static>; 2] = [
        ToolInfo {
            name: "echo",
            title: None,
            description: "Returns its text.",
            input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        },
        ToolInfo {
            name: "lookup",
            title: Some("Lookup"),
            description: "Finds things \"fast\".",
            input_schema: r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
        },
    ];

    fn registry() -> Registry<'static> {
        Registry {
            info: ServerInfo {
                name: "demo",
                version: "0.1.0",
                instructions: Some("Be nice."),
            },
            tools: &TOOLS,
            resources: &[ResourceInfo {
                uri: "mem://readme",
                name: "readme",
                description: None,
                mime_type: Some("text/plain"),
            }],
            templates: &[],
            prompts: &[PromptInfo {
                name: "greet",
                description: None,
                arguments: &[PromptArgument {
                    name: "who",
                    description: None,
                    required: true,
                }],
            }],
            listen: true,
            completions: false,
            forward: false,
            #[cfg(feature = "forward")]
            forwarded_tools: None,
            plain_schemas: Default::default(),
        }
    }

    /// Each list is valid JSON and one complete page, without
    /// `nextCursor` (so the typed binding never has pages to merge).
    #[test]
    fn lists_are_valid_json_with_what_was_registered() {
        let mut r = registry();
        assert_eq!(r.check(), Ok(()));
        // `echo` has no annotation, `lookup` has one.
        assert!(r.schema_is_plain(0) && !r.schema_is_plain(1) && !r.no_schema_annotated());
        // Marks of other tools do not hold.
        let plain = [TOOLS[0]];
        let other = Registry { tools: &plain, ..r };
        assert!(!other.schema_is_plain(0) && !other.no_schema_annotated());
        let mut buf = [0u8; 2048];
        for write in [
            Registry::write_tools_list as fn(&Registry<'static>, &mut JsonWriter<'_>),
            Registry::write_resources_list,
            Registry::write_templates_list,
            Registry::write_prompts_list,
        ] {
            let mut w = JsonWriter::new(&mut buf);
            write(&r, &mut w);
            let text = w.finish().unwrap();
            assert_eq!(
                json::validate(text, 16),
                Ok(()),
                "{}",
                core::str::from_utf8(text).unwrap()
            );
            assert_eq!(json::get(text, b"nextCursor"), None);
            assert!(json::str_eq(
                json::get(text, b"resultType").unwrap(),
                b"complete"
            ));
        }
        let mut w = JsonWriter::new(&mut buf);
        r.write_tools_list(&mut w);
        let text = w.finish().unwrap();
        let tools = json::get(text, b"tools").unwrap();
        assert_eq!(json::elements(tools).count(), 2);
        let second = json::elements(tools).nth(1).unwrap();
        assert!(json::str_eq(
            json::get(second, b"description").unwrap(),
            b"Finds things \"fast\"."
        ));
        let mut w = JsonWriter::new(&mut buf);
        r.write_discover(&mut w, &["2026-07-28"]);
        let text = w.finish().unwrap();
        assert_eq!(json::validate(text, 16), Ok(()));
        assert!(json::get(json::get(text, b"capabilities").unwrap(), b"tools").is_some());
    }

    #[test]
    fn bad_registries_are_refused() {
        let bad = [ToolInfo {
            name: "x",
            title: None,
            description: "",
            input_schema: "[1]",
        }];
        let mut r = Registry {
            tools: &bad,
            ..registry()
        };
        assert_eq!(r.check(), Err(RegistryError::InvalidSchema { tool: "x" }));
        let dup = [TOOLS[0], TOOLS[0]];
        let mut r = Registry {
            tools: &dup,
            ..registry()
        };
        assert_eq!(
            r.check(),
            Err(RegistryError::DuplicateTool { tool: "echo" })
        );
    }
}
