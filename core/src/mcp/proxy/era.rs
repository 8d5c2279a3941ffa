//! An older-era server (2025-11-25, 2024-11-05) served to the host as MCP
//! 2026-07-28 (§8.3): the host side stays the current era, so the proxy
//! answers the host's `server/discover` itself, from which lists the
//! server answers ([`PROBES`], [`write_discover`]), and gives the server's
//! results the members the current era requires ([`current_era_result`]).

use super::{List, Method};
use crate::mcp::json;
use crate::mcp::meta::{KEY_SERVER_INFO, PROTOCOL_VERSION};
use crate::mcp::writer::{JsonWriter, Overflow};

/// The lists a proxy asks an older-era server for: each it answers is a
/// capability of its discovery.
pub const PROBES: [List; 3] = [List::Tools, List::Resources, List::Prompts];

/// The `params` of a proxy's own request (a probe, a read of the tool
/// list): the current version and no client capabilities.
pub const OWN_PARAMS: &str = concat!(
    r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":""#,
    "2026-07-28",
    r#"","io.modelcontextprotocol/clientCapabilities":{}}}"#
);

/// A `server/discover` result the proxy gives for a server (MCP
/// 2026-07-28 §8.1): the current version, the capabilities named (each
/// `{}`), the instructions, and stale at once for this caller (the proxy
/// promises nothing of the server's).
#[derive(Debug, Clone, Copy)]
pub struct Discover<'a> {
    /// Capability names (`tools`, `resources`, `prompts`).
    pub capabilities: &'a [&'a str],
    pub instructions: Option<&'a str>,
    /// The proxy's `serverInfo`.
    pub name: &'a str,
    pub version: &'a str,
}

/// Writes the result of `discover` into `out`; the length written.
pub fn write_discover(discover: &Discover<'_>, out: &mut [u8]) -> Result<usize, Overflow> {
    let mut w = JsonWriter::new(out);
    w.raw(br#"{"resultType":"complete","supportedVersions":["#)
        .string(PROTOCOL_VERSION.as_bytes())
        .raw(br#"],"capabilities":{"#);
    for (i, name) in discover.capabilities.iter().enumerate() {
        w.key(i == 0, name.as_bytes()).raw(b"{}");
    }
    w.raw(b"}");
    if let Some(text) = discover.instructions {
        w.key(false, b"instructions").string(text.as_bytes());
    }
    w.raw(br#","ttlMs":0,"cacheScope":"private","_meta":{"#)
        .key(true, KEY_SERVER_INFO.as_bytes())
        .raw(b"{")
        .key(true, b"name")
        .string(discover.name.as_bytes())
        .key(false, b"version")
        .string(discover.version.as_bytes())
        .raw(b"}}}");
    w.finish().map(<[u8]>::len)
}

/// Octets [`current_era_result`] may add to a result.
pub const ADDED_MAX: usize = 64;

/// An older-era server's result of a `method` request, as MCP 2026-07-28
/// has it: `resultType` (`complete`: older eras have no other) and, on a
/// cacheable result, the caching hints (`ttlMs` 0, `cacheScope`
/// `private`: stale at once, for this caller), each when it is missing.
/// A result that is not an object is written as it is. Writes into `out`
/// (the result's length and [`ADDED_MAX`] are enough); the length written.
pub fn current_era_result(
    method: Method,
    result: &[u8],
    out: &mut [u8],
) -> Result<usize, Overflow> {
    let mut w = JsonWriter::new(out);
    let trimmed = json::trim(result);
    let Some(body) = trimmed
        .strip_suffix(b"}")
        .filter(|_| trimmed.first() == Some(&b'{'))
    else {
        w.raw(result);
        return w.finish().map(<[u8]>::len);
    };
    let [kind, ttl, scope] = json::get_all(result, [b"resultType", b"ttlMs", b"cacheScope"]);
    let mut first = json::members(result).next().is_none();
    w.raw(body);
    let mut add = |w: &mut JsonWriter<'_>, missing: bool, key: &[u8], value: &[u8]| {
        if missing {
            w.key(first, key).raw(value);
            first = false;
        }
    };
    add(&mut w, kind.is_none(), b"resultType", br#""complete""#);
    let cacheable = method.cacheable();
    add(&mut w, cacheable && ttl.is_none(), b"ttlMs", b"0");
    add(
        &mut w,
        cacheable && scope.is_none(),
        b"cacheScope",
        br#""private""#,
    );
    w.raw(b"}");
    w.finish().map(<[u8]>::len)
}

#[cfg(test)]
mod tests {
    use std::string::String;
    use std::vec;

    use super::*;

    fn era(method: &str, result: &str) -> String {
        let mut out = vec![0; result.len() + ADDED_MAX];
        let n = current_era_result(Method::of(method), result.as_bytes(), &mut out).unwrap();
        String::from_utf8(out[..n].to_vec()).unwrap()
    }

    #[test]
    fn an_older_servers_results_get_the_current_eras_fields() {
        assert_eq!(
            era("tools/list", r#"{"tools":[]}"#),
            r#"{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(
            era(
                "tools/call",
                r#"{"content":[],"resultType":"complete","isError":false}"#
            ),
            r#"{"content":[],"resultType":"complete","isError":false}"#
        );
        assert_eq!(
            era(
                "resources/read",
                r#"{"contents":[],"ttlMs":5000,"cacheScope":"public"}"#
            ),
            r#"{"contents":[],"ttlMs":5000,"cacheScope":"public","resultType":"complete"}"#
        );
        assert_eq!(era("ping", "{}"), r#"{"resultType":"complete"}"#);
        assert_eq!(era("ping", " { } "), r#"{ "resultType":"complete"}"#);
        assert_eq!(era("ping", "[1]"), "[1]");
        // The most it adds.
        let added = era("prompts/list", "{}").len() - 2;
        assert!(added <= ADDED_MAX, "{added}");
    }

    #[test]
    fn the_proxys_discovery_names_the_capabilities_and_the_proxy() {
        let mut out = vec![0; 512];
        let discover = Discover {
            capabilities: &["tools", "prompts"],
            instructions: Some("the server said \"no\""),
            name: "mcpwire-bridge",
            version: "0.1.0",
        };
        let n = write_discover(&discover, &mut out).unwrap();
        assert_eq!(
            core::str::from_utf8(&out[..n]).unwrap(),
            concat!(
                r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"#,
                r#""capabilities":{"tools":{},"prompts":{}},"instructions":"the server said \"no\"","#,
                r#""ttlMs":0,"cacheScope":"private","#,
                r#""_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpwire-bridge","version":"0.1.0"}}}"#
            )
        );
        let none = Discover {
            capabilities: &[],
            instructions: None,
            ..discover
        };
        let n = write_discover(&none, &mut out).unwrap();
        assert!(
            core::str::from_utf8(&out[..n])
                .unwrap()
                .contains(r#""capabilities":{},"ttlMs""#)
        );
        assert_eq!(
            write_discover(&none, &mut [0; 4]).map_err(|o| o.needed),
            Err(n)
        );
    }

    #[test]
    fn the_proxys_own_requests_speak_the_current_version() {
        let meta = json::get(OWN_PARAMS.as_bytes(), b"_meta").unwrap();
        let version = json::get(meta, crate::mcp::meta::KEY_PROTOCOL_VERSION).unwrap();
        assert!(json::str_eq(version, PROTOCOL_VERSION.as_bytes()));
        assert_eq!(
            PROBES.map(List::capability),
            ["tools", "resources", "prompts"]
        );
    }
}
