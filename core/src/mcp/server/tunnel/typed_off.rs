//! Without feature `typed`: no typed RPC is served (a call on
//! `/model_context_protocol.Mcp/...` is answered UNIMPLEMENTED, as any
//! other unknown path), and the tunnel keeps no typed code.

use super::*;
use mcpwire_proto::gcp::Rpc;

/// No path names a typed RPC.
pub(super) fn rpc(_path: &[u8]) -> Option<Result<Rpc, ()>> {
    None
}

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// Never called: no call is typed.
    pub(super) fn typed_dispatch(&mut self, i: usize, _rpc: Rpc, _len: usize) {
        self.drop_call(i);
    }

    /// Never called: no call is typed.
    pub(super) fn typed_frame(&mut self, _i: usize, _rpc: Rpc) -> bool {
        true
    }
}
