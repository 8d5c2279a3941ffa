//! Without the feature `tunnel-http`: no Streamable HTTP on the tunnel's
//! connection, every request head goes to the gRPC checks. The names of
//! `http.rs` over an exchange that cannot exist, so that each branch the
//! tunnel takes for an HTTP call folds away (a gRPC-only firmware pays no
//! flash for it).

use super::*;

/// No value: no call is a Streamable HTTP one.
#[derive(Debug, Clone, Copy)]
pub(super) enum Exchange {}

/// Where a request head goes: always to the gRPC checks (the tunnel
/// matches on every variant, as with the feature).
#[allow(dead_code)]
pub(super) enum Route {
    Grpc,
    Refuse(u16),
    Call(Exchange),
}

pub(super) fn route(
    _fields: HeaderList<'_>,
    _endpoint: &crate::mcp::server::HttpEndpoint<'_>,
) -> Route {
    Route::Grpc
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
    pub(super) fn exchange(&self, _i: usize) -> Option<&Exchange> {
        None
    }

    // Reached only through a `Route::Refuse` or a call with an exchange,
    // neither of which exists here.
    pub(super) fn http_refuse(&mut self, _stream: StreamRef, _status: u16) {}

    pub(super) fn http_refuse_auth(&mut self, _i: usize, _refusal: crate::mcp::auth::Refusal) {}

    pub(super) fn http_keep_alive_deadline(&self) -> Option<Instant> {
        None
    }

    pub(super) fn http_keep_alive(&mut self, _now: Instant) {}

    pub(super) fn http_data(&mut self, _i: usize, _bytes: &[u8]) {}

    pub(super) fn http_dispatch(&mut self, _i: usize) {}

    pub(super) fn http_timeout(&mut self, _i: usize) {}

    pub(super) fn http_error_status(&mut self, _i: usize, _code: i32) {}

    pub(super) fn http_drops_notifications(&self, _call: CallId) -> bool {
        false
    }

    pub(super) fn flush_http(&mut self, _i: usize) {}
}
