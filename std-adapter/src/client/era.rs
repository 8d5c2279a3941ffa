//! The era a [`Client`](super::Client) speaks with its server (MCP
//! 2026-07-28 §8.3), as the application reads it in
//! [`Client::era`](super::Client::era): what the engine's handshake found
//! over Streamable HTTP or stdio, in owned text.

use std::fmt;

pub use mcpwire_core::mcp::client::era::{Era, EraChoice};

/// The era the client speaks with its server (§8.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraInfo {
    pub era: Era,
    /// The protocol version in use.
    pub version: String,
    /// The modern version the probe asked for.
    pub requested: String,
    /// The versions the server named (raw JSON array), when it named any.
    pub server_versions: Option<String>,
    /// The client fell back to an older era, and why.
    pub fallback: Option<String>,
    /// The JSON-RPC code the probe was answered with, when an error.
    pub probe_error: Option<i64>,
    /// The stdio child was restarted before `initialize` (the probe left
    /// it unusable).
    pub restarted_for_fallback: bool,
}

impl fmt::Display for EraInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let era = self.era.describe();
        write!(
            f,
            "era {era}, version {}, requested {}, server versions {}",
            self.version,
            self.requested,
            self.server_versions.as_deref().unwrap_or("(none named)")
        )?;
        match &self.fallback {
            Some(why) => write!(f, ", fallback: {why}")?,
            None => write!(f, ", no fallback")?,
        }
        if let Some(code) = self.probe_error {
            write!(f, " (server/discover answered {code})")?;
        }
        if self.restarted_for_fallback {
            write!(f, ", child restarted before initialize")?;
        }
        Ok(())
    }
}
