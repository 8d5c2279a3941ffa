//! Bearer-token authorization of requests (RFC 6750), shared by every
//! binding: the token of an `authorization` value, and how a refused
//! request ends.
//!
//! The application decides ([`Decision`]); the core maps the decision to
//! the wire, so every driver sends the same challenge:
//!
//! | decision | token | gRPC status | `www-authenticate` |
//! | --- | --- | --- | --- |
//! | [`Decision::Unauthenticated`] | none (or not `Bearer`) | 16 | `Bearer realm="mcpwire"` |
//! | [`Decision::Unauthenticated`] | given | 16 | `Bearer realm="mcpwire", error="invalid_token"` |
//! | [`Decision::PermissionDenied`] | any | 7 | `Bearer realm="mcpwire", error="insufficient_scope"` |
//!
//! HTTP bindings answer 401 and 403 with the same challenges.

use crate::grpc::Code;

/// The realm of the challenges.
pub const REALM: &str = "mcpwire";

/// Longest principal name kept for a request; a longer one is dropped.
pub const MAX_PRINCIPAL: usize = 128;

/// What the application decides about a request's bearer token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Decision<'p> {
    /// The request goes on; its handler sees `principal` (at most
    /// [`MAX_PRINCIPAL`] octets are kept).
    Allow { principal: &'p str },
    /// No token, or one the checker does not know.
    Unauthenticated,
    /// A known token without the right to call.
    PermissionDenied,
}

impl core::fmt::Debug for Decision<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Allow { principal } => f
                .debug_struct("Allow")
                .field("principal", principal)
                .finish(),
            Self::Unauthenticated => f.write_str("Unauthenticated"),
            Self::PermissionDenied => f.write_str("PermissionDenied"),
        }
    }
}

/// How a refused request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// UNAUTHENTICATED or PERMISSION_DENIED.
    pub status: Code,
    /// The HTTP status of the HTTP bindings: 401 or 403.
    pub http_status: u16,
    /// `grpc-message`, or the error text of an HTTP answer.
    pub message: &'static str,
    /// The `www-authenticate` value.
    pub challenge: &'static str,
}

/// The token of an `authorization` value: `Bearer <token>` (the scheme in
/// any case, RFC 7235 §2.1), else `None`. The whitespace around it is
/// HTTP's (ASCII: spaces and tabs), never Unicode's.
pub fn bearer_token(authorization: Option<&[u8]>) -> Option<&str> {
    let value = core::str::from_utf8(authorization?).ok()?.trim_ascii();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_ascii_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A fixed set of bearer tokens, each naming its principal, for a device
/// (tokens and names in flash). Every known token is compared, each in
/// constant time for its length.
#[derive(Clone, Copy)]
pub struct StaticTokens<'t> {
    tokens: &'t [(&'t str, &'t str)],
}

impl<'t> StaticTokens<'t> {
    /// The (token, principal) pairs; empty tokens never match.
    pub const fn new(tokens: &'t [(&'t str, &'t str)]) -> Self {
        Self { tokens }
    }

    /// The decision for a request's bearer token.
    pub fn check(&self, token: Option<&str>) -> Decision<'t> {
        let Some(token) = token else {
            return Decision::Unauthenticated;
        };
        let mut found = None;
        for (known, principal) in self.tokens {
            if !known.is_empty() && constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = found.or(Some(*principal));
            }
        }
        found.map_or(Decision::Unauthenticated, |principal| Decision::Allow {
            principal,
        })
    }
}

impl core::fmt::Debug for StaticTokens<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The principals, never the tokens.
        let mut l = f.debug_list();
        for (_, p) in self.tokens {
            l.entry(p);
        }
        l.finish()
    }
}

/// Equality whose time depends on the length only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Decision<'_> {
    /// How the request ends, or `None` when it is allowed. `had_token`:
    /// whether the request carried a bearer token at all.
    pub fn refusal(&self, had_token: bool) -> Option<Refusal> {
        match self {
            Self::Allow { .. } => None,
            Self::Unauthenticated if !had_token => Some(Refusal {
                status: Code::Unauthenticated,
                http_status: 401,
                message: "missing bearer token",
                challenge: "Bearer realm=\"mcpwire\"",
            }),
            Self::Unauthenticated => Some(Refusal {
                status: Code::Unauthenticated,
                http_status: 401,
                message: "invalid bearer token",
                challenge: "Bearer realm=\"mcpwire\", error=\"invalid_token\"",
            }),
            Self::PermissionDenied => Some(Refusal {
                status: Code::PermissionDenied,
                http_status: 403,
                message: "permission denied",
                challenge: "Bearer realm=\"mcpwire\", error=\"insufficient_scope\"",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values() {
        assert_eq!(bearer_token(Some(b"Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some(b"bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some(b"Bearer\tabc\t")), None);
        assert_eq!(bearer_token(Some(b" Bearer \tabc\t")), Some("abc"));
        // HTTP's whitespace only: a no-break space is part of the token.
        assert_eq!(
            bearer_token(Some("Bearer abc\u{a0}".as_bytes())),
            Some("abc\u{a0}")
        );
        assert_eq!(bearer_token(Some(b"Basic abc")), None);
        assert_eq!(bearer_token(Some(b"Bearer")), None);
        assert_eq!(bearer_token(Some(b"Bearer ")), None);
        assert_eq!(bearer_token(Some(&[0xff, b' ', b'a'])), None);
        assert_eq!(bearer_token(None), None);
    }

    #[test]
    fn static_tokens_name_their_principal() {
        let t = StaticTokens::new(&[("s3cret", "alice"), ("", "nobody")]);
        assert_eq!(
            t.check(Some("s3cret")),
            Decision::Allow { principal: "alice" }
        );
        assert_eq!(t.check(Some("s3cre")), Decision::Unauthenticated);
        assert_eq!(t.check(Some("")), Decision::Unauthenticated);
        assert_eq!(t.check(None), Decision::Unauthenticated);
        let mut shown = std::string::String::new();
        core::fmt::write(&mut shown, format_args!("{t:?}")).unwrap();
        assert!(shown.contains("alice") && !shown.contains("s3cret"));
    }

    #[test]
    fn challenges_name_the_realm_and_the_error() {
        let missing = Decision::Unauthenticated.refusal(false).unwrap();
        assert_eq!(missing.status, Code::Unauthenticated);
        assert_eq!(missing.challenge, "Bearer realm=\"mcpwire\"");
        let invalid = Decision::Unauthenticated.refusal(true).unwrap();
        assert!(invalid.challenge.ends_with("error=\"invalid_token\""));
        let denied = Decision::PermissionDenied.refusal(true).unwrap();
        assert_eq!(
            (denied.status, denied.http_status),
            (Code::PermissionDenied, 403)
        );
        assert!(denied.challenge.ends_with("error=\"insufficient_scope\""));
        assert!(denied.challenge.contains(REALM));
        assert_eq!(Decision::Allow { principal: "a" }.refusal(true), None);
    }
}
