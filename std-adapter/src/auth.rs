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
//! The engine of `mcpwire-core` sends these ([`mcpwire_core::mcp::auth`]),
//! so every driver refuses a call with the same words.
//!
//! Tokens are never logged, formatted by `Debug`, or put in an answer.

use std::fmt;

use mcpwire_core::mcp::auth::Decision;
/// The realm of the `www-authenticate` challenges.
pub use mcpwire_core::mcp::auth::REALM;

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

impl AuthDecision {
    /// The engine's form of the decision.
    pub(crate) fn to_core(&self) -> Decision<'_> {
        match self {
            Self::Allow { principal } => Decision::Allow { principal },
            Self::Unauthenticated => Decision::Unauthenticated,
            Self::PermissionDenied => Decision::PermissionDenied,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_map_to_the_core() {
        let allow = AuthDecision::Allow {
            principal: "alice".into(),
        };
        assert_eq!(allow.to_core(), Decision::Allow { principal: "alice" });
        assert_eq!(
            AuthDecision::Unauthenticated.to_core(),
            Decision::Unauthenticated
        );
        assert_eq!(
            AuthDecision::PermissionDenied.to_core(),
            Decision::PermissionDenied
        );
    }

    #[test]
    fn debug_hides_tokens() {
        let t = BearerTokens::new([("s3cret-token", "alice")]);
        let shown = format!("{t:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains("s3cret"));
    }
}
