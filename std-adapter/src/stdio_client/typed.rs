//! The typed helpers of a [`StdioChannel`], as those of
//! [`Channel`](crate::Channel) (written once, in `channel/calls.rs`): tools
//! listed (every page) and called (with progress, or typed), resources and
//! prompts listed, read and got. A JSON-RPC error response is an `Err` whose
//! [`CallError::rpc`] holds it; a tool's own failure (`isError`) is an
//! ordinary [`CallToolResult`].

use super::{StdioCall, StdioChannel};
use crate::client::calls::typed_helpers;

typed_helpers!(StdioChannel, StdioCall, "");
