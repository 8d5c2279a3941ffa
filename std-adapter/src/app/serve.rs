//! What a server asks of an [`App`] when it starts and as requests come:
//! the engine's [`Registry`] (built once, by leaking the descriptions), the
//! listen source, and the handler a routed request names
//! ([`App::handle`]), its result ending with the server's `_meta`.

use std::sync::Arc;

use mcpwire_core::mcp::registry::{
    PromptArgument, PromptInfo, Registry, RegistryError, ResourceInfo, ResourceTemplateInfo,
    ServerInfo, ToolInfo,
};
use mcpwire_core::mcp::server::{ListChange, Request, RequestKind};
use serde_json::Value;
use tokio::sync::broadcast;

use super::*;

impl App {
    /// The engine's registry, built once per server.
    ///
    /// The engine borrows its descriptions for `'static` (a firmware keeps
    /// them in flash), so the strings and slices are leaked here:
    /// `Box::leak` of the configuration, once, when a server starts. This
    /// is a server's lifetime configuration; a process that starts many
    /// servers leaks one copy each.
    pub(crate) fn registry(&self) -> Result<Registry<'static>, RegistryError<'static>> {
        let tools: Vec<ToolInfo<'static>> = self
            .tools
            .iter()
            .map(|t| ToolInfo {
                name: leak(&t.name),
                title: None,
                description: leak(&t.description),
                input_schema: leak(&t.schema),
            })
            .collect();
        let resources: Vec<ResourceInfo<'static>> = self
            .resources
            .iter()
            .map(|r| ResourceInfo {
                uri: leak(&r.uri),
                name: leak(&r.name),
                description: None,
                mime_type: r.mime_type.as_deref().map(leak),
            })
            .collect();
        let templates: Vec<ResourceTemplateInfo<'static>> = self
            .templates
            .iter()
            .map(|t| ResourceTemplateInfo {
                uri_template: leak(&t.uri_template),
                name: leak(&t.name),
                description: None,
                mime_type: t.mime_type.as_deref().map(leak),
            })
            .collect();
        let prompts: Vec<PromptInfo<'static>> = self
            .prompts
            .iter()
            .map(|p| {
                let arguments: Vec<PromptArgument<'static>> = p
                    .arguments
                    .iter()
                    .map(|(name, required)| PromptArgument {
                        name: leak(name),
                        description: None,
                        required: *required,
                    })
                    .collect();
                PromptInfo {
                    name: leak(&p.name),
                    description: p.description.as_deref().map(leak),
                    arguments: Box::leak(arguments.into_boxed_slice()),
                }
            })
            .collect();
        let mut registry = Registry {
            info: ServerInfo {
                name: leak(&self.name),
                version: leak(&self.version),
                instructions: self.instructions.as_deref().map(leak),
            },
            tools: Box::leak(tools.into_boxed_slice()),
            resources: Box::leak(resources.into_boxed_slice()),
            templates: Box::leak(templates.into_boxed_slice()),
            prompts: Box::leak(prompts.into_boxed_slice()),
            listen: self.listen.is_some(),
            completions: self.completion.is_some(),
            forward: self.forward.is_some(),
            // Leaked as the descriptions are: one handle per server.
            forwarded_tools: self.forward_tools.as_ref().map(|t| {
                let tools: &'static Arc<LearntTools> = Box::leak(Box::new(Arc::clone(t)));
                &**tools as &'static dyn mcpwire_core::mcp::registry::ForwardedTools
            }),
            plain_schemas: Default::default(),
        };
        registry.check()?;
        Ok(registry)
    }

    /// A receiver of the listen source, if the app has one.
    pub(crate) fn subscribe(&self) -> Option<broadcast::Receiver<ListenEvent>> {
        self.listen.as_ref().map(broadcast::Sender::subscribe)
    }

    /// The handler of a routed request, as a future of its answer; `None`
    /// for a request this app has no handler for (the engine routes only
    /// what the registry offers, so only a registry built elsewhere gets
    /// here).
    pub(crate) fn handle(&self, request: &Request<'_>, link: Link) -> Option<Work> {
        if let RequestKind::Forward { .. } = request.kind {
            return Some(self.forward.as_ref()?(ForwardRequest::new(request, link)));
        }
        let meta = Arc::clone(&self.result_meta);
        let answer = move |result: Value| Ok(with_meta(json_bytes(&result), &meta));
        // Tools, the hot path, read their params from the raw JSON; the
        // other handlers get a tree.
        if let RequestKind::CallTool {
            tool,
            name,
            arguments,
        } = request.kind
        {
            let handler = &self.tools.get(tool)?.handler;
            let meta = Arc::clone(&self.result_meta);
            let params = RawParams::new(request.params, arguments.raw(), request.progress_token());
            let work = handler(ToolCall {
                link,
                name: name.to_owned(),
                params: Arc::new(params),
                principal: request.principal.map(str::to_owned),
            });
            return Some(Box::pin(async move {
                let result = work.await?;
                let mut out = Vec::with_capacity(result.size_hint() + meta.len());
                result.write_json(&mut out);
                Ok(with_meta(out, &meta))
            }));
        }
        let params: Value = serde_json::from_slice(request.params).unwrap_or(Value::Null);
        Some(match request.kind {
            RequestKind::CallTool { .. } | RequestKind::Forward { .. } => return None,
            RequestKind::ReadResource { uri } => {
                let uri: String = serde_json::from_slice(uri).unwrap_or_default();
                let found = self
                    .resources
                    .iter()
                    .find(|r| r.uri == uri)
                    .map(|r| (&r.handler, &r.mime_type, Vec::new()))
                    .or_else(|| {
                        self.templates.iter().find_map(|t| {
                            let variables = match_template(&t.uri_template, &uri)?;
                            Some((&t.handler, &t.mime_type, variables))
                        })
                    });
                let Some((handler, mime_type, variables)) = found else {
                    return Some(Box::pin(async move {
                        let mut e = ToolError::invalid_params("Resource not found");
                        e.data = Some(json!({"uri": uri}));
                        Err(e)
                    }));
                };
                let mime_type = mime_type.clone();
                let work = handler(ResourceRead {
                    uri: uri.clone(),
                    params,
                    variables,
                });
                Box::pin(async move {
                    let content = work.await?;
                    answer(resource_contents(&uri, mime_type.as_deref(), content))
                })
            }
            RequestKind::GetPrompt { prompt, name, .. } => {
                let handler = &self.prompts.get(prompt)?.handler;
                let work = handler(PromptGet {
                    name: name.to_owned(),
                    params,
                });
                Box::pin(async move { answer(work.await?.to_json()) })
            }
            RequestKind::Complete => {
                let work = self.completion.as_ref()?(CompletionRequest { params });
                Box::pin(async move { answer(work.await?.to_json()) })
            }
        })
    }
}

/// `result` (a JSON object's text) with `meta` (`,"_meta":{...}}`) in
/// place of its closing brace. The App's results have no `_meta` of their
/// own.
fn with_meta(mut result: Vec<u8>, meta: &[u8]) -> Vec<u8> {
    if result.last() == Some(&b'}') {
        result.pop();
        // `{}` has no member to follow.
        let meta = if result == b"{" { &meta[1..] } else { meta };
        result.extend_from_slice(meta);
    }
    result
}

/// The variables of `uri` read through `template` (RFC 6570 level 1: each
/// `{name}` matches one non-empty run of characters other than `/`, up to
/// the next literal); `None` when it does not match.
fn match_template(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut variables = Vec::new();
    let (mut t, mut u) = (template, uri);
    loop {
        let Some(open) = t.find('{') else {
            return (t == u).then_some(variables);
        };
        u = u.strip_prefix(&t[..open])?;
        let rest = &t[open + 1..];
        let close = rest.find('}')?;
        let name = &rest[..close];
        t = &rest[close + 1..];
        let literal = &t[..t.find('{').unwrap_or(t.len())];
        let end = match (literal.is_empty(), t.is_empty()) {
            (true, true) => u.len(),
            // Two expressions in a row: nothing tells where one ends.
            (true, false) => return None,
            (false, _) => u.find(literal)?,
        };
        let value = &u[..end];
        if value.is_empty() || value.contains('/') {
            return None;
        }
        variables.push((name.to_owned(), value.to_owned()));
        u = &u[end..];
    }
}

impl ListenEvent {
    /// The change the engine announces.
    pub(crate) fn change(&self) -> ListChange<'_> {
        match self {
            Self::ToolsListChanged => ListChange::ToolsListChanged,
            Self::PromptsListChanged => ListChange::PromptsListChanged,
            Self::ResourcesListChanged => ListChange::ResourcesListChanged,
            Self::ResourceUpdated { uri } => ListChange::ResourceUpdated { uri },
        }
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_one_segment_per_variable() {
        let vars = |t, u| match_template(t, u);
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".to_owned(), "123".to_owned())])
        );
        assert_eq!(
            vars("a://{x}-{y}", "a://1-2"),
            Some(vec![("x".into(), "1".into()), ("y".into(), "2".into())])
        );
        assert_eq!(vars("a://t/{id}", "a://t/"), None);
        assert_eq!(vars("a://t/{id}", "a://t/1/2"), None);
        assert_eq!(vars("a://t/{id}/data", "a://t/1/other"), None);
        assert_eq!(vars("a://t/{x}{y}", "a://t/12"), None);
        assert_eq!(vars("a://static", "a://static"), Some(vec![]));
    }

    #[test]
    fn results_end_with_the_server_info() {
        let meta = b",\"_meta\":{\"m\":1}}";
        assert_eq!(
            with_meta(b"{\"a\":1}".to_vec(), meta),
            b"{\"a\":1,\"_meta\":{\"m\":1}}"
        );
        assert_eq!(with_meta(b"{}".to_vec(), meta), b"{\"_meta\":{\"m\":1}}");
    }
}
