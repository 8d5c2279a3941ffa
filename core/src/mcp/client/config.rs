//! The client engine's settings and its fixed limits.

use core::time::Duration;

use crate::h2;

/// Octets of input handed to the connection per
/// [`Client::recv`](super::Client::recv).
pub const RECV_CHUNK: usize = 512;
/// Pages a list walk reads at most ([`Pages`](super::pages::Pages)): the
/// `tools/list` an engine reads again after a -32020, a host's list
/// helpers. The gRPC binding's servers merge as many into one answer.
pub const MAX_LIST_PAGES: usize = 1024;
/// Rounds of input a call that answers input requests (MCP 2026-07-28 §9,
/// [`CallOptions::answers_input`](super::CallOptions::answers_input)) is
/// handed out at most: the next `input_required` result fails it.
pub const MAX_INPUT_ROUNDS: u8 = 16;
pub use crate::mcp::REMEMBERED_RESETS;

/// Settings of the client.
#[derive(Debug, Clone, Copy)]
pub struct ClientConfig {
    /// The HTTP/2 connection's settings.
    pub h2: h2::Config,
    /// `:authority` of every call.
    pub authority: &'static str,
    /// `:scheme` of every call (`http`, or `https` over TLS).
    pub scheme: &'static str,
    /// The request timeout when a call names none (not for
    /// `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// Metadata added to every call (`authorization` is never indexed).
    pub metadata: &'static [(&'static str, &'static str)],
    /// The largest message a call sends or takes (also capped by the call
    /// store's largest buffer). Default 4 MiB.
    pub max_message_bytes: usize,
    /// Keepalive PINGs that find a peer gone silent; `None` (the default)
    /// sends none.
    pub keepalive: Option<super::Keepalive>,
    /// Pages of `tools/list` read again after a -32020 at most. Default
    /// [`MAX_LIST_PAGES`].
    pub max_list_pages: usize,
    /// Rounds of input a call answers at most (each an
    /// [`InputRequired`](super::ClientEvent::InputRequired); the next
    /// `input_required` result fails the call). Default
    /// [`MAX_INPUT_ROUNDS`].
    pub max_input_rounds: u8,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            h2: h2::Config::default(),
            authority: "localhost",
            scheme: "http",
            request_timeout: Duration::from_secs(60),
            metadata: &[],
            max_message_bytes: 4 << 20,
            keepalive: None,
            max_list_pages: MAX_LIST_PAGES,
            max_input_rounds: MAX_INPUT_ROUNDS,
        }
    }
}
