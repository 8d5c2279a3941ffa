//! Bearer-token authentication of calls (gRPC binding: "A missing or
//! invalid bearer token ends with UNAUTHENTICATED or PERMISSION_DENIED and a
//! `www-authenticate` trailer").
//!
//! With an [`Auth`] on the [`Server`](crate::Server), the engine holds every
//! call until the driver has checked its `authorization` header: an allowed
//! call goes on with the checker's principal (see
//! [`ToolCall::principal`](crate::ToolCall::principal)); a refused one ends
//! before anything is answered, with grpc-status 16 (UNAUTHENTICATED) or 7
//! (PERMISSION_DENIED) and a `www-authenticate: Bearer …` trailer (RFC 6750
//! §3):
//!
//! | checker says | token | grpc-status | `www-authenticate` |
//! | --- | --- | --- | --- |
//! | [`AuthDecision::Unauthenticated`] | none (or not `Bearer`) | 16 | `Bearer realm="mcpwire"` |
//! | [`AuthDecision::Unauthenticated`] | given | 16 | `Bearer realm="mcpwire", error="invalid_token"` |
//! | [`AuthDecision::PermissionDenied`] | any | 7 | `Bearer realm="mcpwire", error="insufficient_scope"` |
//!
//! Tokens are never logged, formatted by `Debug`, or put in an answer.

use std::fmt;

use mcpwire_core::grpc::Code;

/// The realm of the `www-authenticate` challenges.
pub const REALM: &str = "mcpwire";

/// What a checker decides about a call's bearer token.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthDecision {
    /// The call goes on; its handler sees `principal` (at most 128 octets
    /// are kept; a longer one is dropped).
    Allow { principal: String },
    /// No token, or one the checker does not know: UNAUTHENTICATED.
    Unauthenticated,
    /// A known token without the right to call: PERMISSION_DENIED.
    PermissionDenied,
}

impl fmt::Debug for AuthDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Checks the bearer token of a call: `Some(token)` from an
/// `authorization: Bearer <token>` header, `None` when the call has no
/// `authorization` header or one of another scheme.
///
/// It runs on the connection's task, before the call's request is read:
/// keep it quick and non-blocking. Any `Fn(Option<&str>) -> AuthDecision +
/// Send + Sync + 'static` is an `Auth`.
pub trait Auth: Send + Sync + 'static {
    fn check(&self, token: Option<&str>) -> AuthDecision;
}

impl<F> Auth for F
where
    F: Fn(Option<&str>) -> AuthDecision + Send + Sync + 'static,
{
    fn check(&self, token: Option<&str>) -> AuthDecision {
        self(token)
    }
}

/// A fixed set of bearer tokens, each naming its principal.
///
/// ```
/// use mcpwire_tokio::{Auth, AuthDecision, BearerTokens};
/// let tokens = BearerTokens::new([("s3cret", "alice")]);
/// assert_eq!(
///     tokens.check(Some("s3cret")),
///     AuthDecision::Allow { principal: "alice".into() }
/// );
/// assert_eq!(tokens.check(Some("wrong")), AuthDecision::Unauthenticated);
/// assert_eq!(tokens.check(None), AuthDecision::Unauthenticated);
/// ```
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: Vec<(Vec<u8>, String)>,
}

impl BearerTokens {
    /// The (token, principal) pairs. Empty tokens are ignored.
    pub fn new<T, P>(tokens: impl IntoIterator<Item = (T, P)>) -> Self
    where
        T: Into<String>,
        P: Into<String>,
    {
        Self {
            tokens: tokens
                .into_iter()
                .map(|(t, p)| (t.into().into_bytes(), p.into()))
                .filter(|(t, _)| !t.is_empty())
                .collect(),
        }
    }

    /// Adds a token.
    pub fn with(mut self, token: impl Into<String>, principal: impl Into<String>) -> Self {
        let token = token.into().into_bytes();
        if !token.is_empty() {
            self.tokens.push((token, principal.into()));
        }
        self
    }

    /// How many tokens are known.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token is known (every call is then refused).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The principals, never the tokens.
        f.debug_struct("BearerTokens")
            .field(
                "principals",
                &self.tokens.iter().map(|(_, p)| p).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Auth for BearerTokens {
    fn check(&self, token: Option<&str>) -> AuthDecision {
        let Some(token) = token else {
            return AuthDecision::Unauthenticated;
        };
        // Every known token is compared, each in constant time for its
        // length.
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known, token.as_bytes()) && found.is_none() {
                found = Some(principal);
            }
        }
        match found {
            Some(principal) => AuthDecision::Allow {
                principal: principal.clone(),
            },
            None => AuthDecision::Unauthenticated,
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `authorization` value: `Bearer <token>` (the scheme in
/// any case, RFC 7235 §2.1), else `None`.
pub(crate) fn bearer_token(authorization: Option<&[u8]>) -> Option<&str> {
    let value = std::str::from_utf8(authorization?).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// How a refused call ends: (status, `grpc-message`, `www-authenticate`).
pub(crate) fn refusal(
    decision: &AuthDecision,
    had_token: bool,
) -> Option<(Code, &'static str, String)> {
    match decision {
        AuthDecision::Allow { .. } => None,
        AuthDecision::Unauthenticated if !had_token => Some((
            Code::Unauthenticated,
            "missing bearer token",
            format!("Bearer realm=\"{REALM}\""),
        )),
        AuthDecision::Unauthenticated => Some((
            Code::Unauthenticated,
            "invalid bearer token",
            format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
        )),
        AuthDecision::PermissionDenied => Some((
            Code::PermissionDenied,
            "permission denied",
            format!("Bearer realm=\"{REALM}\", error=\"insufficient_scope\""),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values() {
        assert_eq!(bearer_token(Some(b"Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some(b"bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some(b"Basic abc")), None);
        assert_eq!(bearer_token(Some(b"Bearer")), None);
        assert_eq!(bearer_token(Some(b"Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }

    #[test]
    fn debug_hides_tokens() {
        let t = BearerTokens::new([("s3cret-token", "alice")]);
        let shown = format!("{t:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains("s3cret"));
    }
}
