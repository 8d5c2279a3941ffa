//! Sealed `requestState` for multi round-trip requests (MCP 2026-07-28
//! §9.3): the client echoes the state, so a server that acts on it must
//! check that it wrote it. [`StateSeal`] signs a payload with HMAC-SHA256,
//! bound to a context (the tool or prompt it belongs to) and an expiry.
//!
//! Sealed, not encrypted: the payload travels in clear. Put nothing
//! secret in it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::result::ToolError;

type HmacSha256 = Hmac<Sha256>;

/// Signs and checks `requestState` values.
///
/// A state is `PAYLOAD.EXPIRES.MAC`: the payload as given, the expiry in
/// Unix seconds, and the hex HMAC-SHA256 of the context, payload and
/// expiry. [`StateSeal::open`] answers -32602 for a state that was not
/// sealed with this key and context, or has expired.
///
/// ```
/// use mcpwire_tokio::StateSeal;
/// let seal = StateSeal::new(b"a key of the server's configuration");
/// let state = seal.seal("tools/call deploy", "step2");
/// assert_eq!(seal.open("tools/call deploy", &state).unwrap(), "step2");
/// assert!(seal.open("tools/call other", &state).is_err());
/// assert!(seal.open("tools/call deploy", &format!("{state}x")).is_err());
/// ```
#[derive(Clone)]
pub struct StateSeal {
    key: Arc<[u8]>,
    max_age: Duration,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("StateSeal")
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

impl StateSeal {
    /// How long a sealed state stays valid unless set otherwise.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);

    /// A seal with `key` (HMAC takes any length; use 32 random bytes or
    /// more).
    pub fn new(key: &[u8]) -> Self {
        Self {
            key: key.into(),
            max_age: Self::DEFAULT_MAX_AGE,
        }
    }

    /// A seal with a random key: states outlive neither the process nor
    /// a restart, and each process of a fleet rejects the others' states.
    pub fn random() -> std::io::Result<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(std::io::Error::other)?;
        Ok(Self::new(&key))
    }

    /// The key from the environment variable `var` (its bytes) when it is
    /// set and not empty, a random one otherwise; whether the key came
    /// from the variable.
    pub fn from_env(var: &str) -> std::io::Result<(Self, bool)> {
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(key) => Ok((Self::new(key.as_encoded_bytes()), true)),
            None => Ok((Self::random()?, false)),
        }
    }

    /// How long a sealed state stays valid.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// `payload` sealed for `context` (for example the method and the
    /// tool's name, so a state of one tool is refused by another).
    pub fn seal(&self, context: &str, payload: &str) -> String {
        let expires = unix_now().saturating_add(self.max_age.as_secs());
        let mac = self.mac(context, payload, expires);
        format!("{payload}.{expires}.{}", hex(&mac))
    }

    /// The payload of a state sealed for `context`; -32602 when it was
    /// not sealed with this key and context, was altered, or expired.
    pub fn open<'s>(&self, context: &str, state: &'s str) -> Result<&'s str, ToolError> {
        let invalid = || ToolError::invalid_params("requestState failed verification");
        let (rest, mac) = state.rsplit_once('.').ok_or_else(invalid)?;
        let (payload, expires) = rest.rsplit_once('.').ok_or_else(invalid)?;
        let expires: u64 = expires.parse().map_err(|_| invalid())?;
        let mac = unhex(mac).ok_or_else(invalid)?;
        self.hmac(context, payload, expires)
            .verify_slice(&mac)
            .map_err(|_| invalid())?;
        if unix_now() > expires {
            return Err(ToolError::invalid_params("requestState expired"));
        }
        Ok(payload)
    }

    fn hmac(&self, context: &str, payload: &str, expires: u64) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = match HmacSha256::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => unreachable_key(),
        };
        // Lengths first, so no two (context, payload) pairs share a text.
        mac.update(&(context.len() as u64).to_be_bytes());
        mac.update(context.as_bytes());
        mac.update(&(payload.len() as u64).to_be_bytes());
        mac.update(payload.as_bytes());
        mac.update(&expires.to_be_bytes());
        mac
    }

    fn mac(&self, context: &str, payload: &str, expires: u64) -> Vec<u8> {
        self.hmac(context, payload, expires)
            .finalize()
            .into_bytes()
            .to_vec()
    }
}

#[cold]
fn unreachable_key() -> ! {
    unreachable!("HMAC accepts keys of any length")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_states_open_only_unaltered_in_their_context() {
        let seal = StateSeal::new(b"k");
        let state = seal.seal("ctx", "a.b");
        assert_eq!(seal.open("ctx", &state).unwrap(), "a.b");
        for bad in [
            format!("{state}-TAMPERED"),
            state.replacen("a.b", "a.c", 1),
            "a.b".to_owned(),
            String::new(),
            "x.1.zz".to_owned(),
        ] {
            let e = seal.open("ctx", &bad).unwrap_err();
            assert_eq!(e.code, -32602, "{bad}");
        }
        assert!(seal.open("other", &state).is_err());
        assert!(StateSeal::new(b"other key").open("ctx", &state).is_err());
        // A state whose expiry passed (sealed as `seal` would have, 5 s
        // ago with a zero max age).
        let past = unix_now() - 5;
        let expired = format!("p.{past}.{}", hex(&seal.mac("ctx", "p", past)));
        assert_eq!(
            seal.open("ctx", &expired).unwrap_err().message,
            "requestState expired"
        );
        assert!(StateSeal::random().unwrap().open("ctx", &state).is_err());
    }
}
