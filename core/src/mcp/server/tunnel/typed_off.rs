//! Without feature `typed`: no typed RPC is served (a call on
//! `/model_context_protocol.Mcp/...` is answered UNIMPLEMENTED, as any
//! other unknown path), and the tunnel keeps no typed code or state.

use super::*;

/// No typed RPC: `Option<Rpc>` in a call record takes no room.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rpc {}

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
    pub(super) fn typed_dispatch(&mut self, _i: usize, rpc: Rpc, _len: usize) {
        match rpc {}
    }

    pub(super) fn typed_frame(&mut self, _i: usize, rpc: Rpc) -> bool {
        match rpc {}
    }
}
