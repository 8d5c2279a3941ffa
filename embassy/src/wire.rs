//! The engine of a network connection (features `grpc`, `http`): the gRPC
//! tunnel over HTTP/2 or Streamable HTTP over HTTP/1.1 on one port, chosen
//! per connection by its first octets, behind the one run loop of
//! [`crate::connection`].

use mcpwire_core::drive::Endpoint;
use mcpwire_core::mcp::auth::Decision as AuthDecision;
use mcpwire_core::mcp::server::{
    CallId, Failure, ListChange, Request, SendError, ServerEngine, ServerEvent,
};
use mcpwire_core::time::Instant;

use crate::connection::Binding;

/// The engine of a network connection: the gRPC tunnel over HTTP/2 or
/// Streamable HTTP over HTTP/1.1, chosen by the connection's first octets.
/// One loop ([`Conn::drive`]) runs either, and a connection task holds one
/// engine at a time: the size of the larger plus a tag. A binding compiled
/// out (features `grpc`, `http`) leaves its variant out, so its code is
/// never instantiated.
pub(crate) enum Wire<G, H> {
    #[cfg(feature = "grpc")]
    Grpc(G),
    #[cfg(feature = "http")]
    Http(H),
    /// Uninhabited: keeps `G` and `H` used whatever the features.
    #[allow(dead_code)]
    Never(core::convert::Infallible, core::marker::PhantomData<(G, H)>),
}

/// `$body` on the engine of whichever binding `$wire` holds.
macro_rules! each {
    ($wire:expr, $e:ident => $body:expr) => {
        match $wire {
            #[cfg(feature = "grpc")]
            Wire::Grpc($e) => $body,
            #[cfg(feature = "http")]
            Wire::Http($e) => $body,
            Wire::Never(never, _) => match *never {},
        }
    };
}

impl<G: Binding, H: Binding> Endpoint for Wire<G, H> {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        each!(self, e => e.recv(input, now))
    }
    fn wants_transmit(&self) -> bool {
        each!(self, e => e.wants_transmit())
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        each!(self, e => e.poll_transmit(out))
    }
    fn is_waiting(&self) -> bool {
        each!(self, e => e.is_waiting())
    }
}

impl<G: Binding, H: Binding> ServerEngine for Wire<G, H> {
    fn poll_event(&mut self) -> Option<ServerEvent> {
        each!(self, e => e.poll_event())
    }
    fn request(&self, call: CallId) -> Option<Request<'_>> {
        each!(self, e => e.request(call))
    }
    fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        each!(self, e => e.respond(call, result))
    }
    fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError> {
        each!(self, e => e.respond_error(call, code, message, data))
    }
    fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
        each!(self, e => e.fail(call, failure))
    }
    fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        each!(self, e => e.notify(call, method, params))
    }
    fn progress(&mut self, call: CallId, params: &[u8]) -> Result<(), SendError> {
        each!(self, e => e.progress(call, params))
    }
    fn publish(&mut self, change: ListChange<'_>) -> usize {
        each!(self, e => e.publish(change))
    }
    fn is_listening(&self) -> bool {
        each!(self, e => e.is_listening())
    }
    fn bearer_token(&self, call: CallId) -> Option<&str> {
        each!(self, e => e.bearer_token(call))
    }
    fn authorize(&mut self, call: CallId, decision: AuthDecision<'_>) {
        each!(self, e => e.authorize(call, decision))
    }
}

impl<G: Binding, H: Binding> Binding for Wire<G, H> {
    fn recv_eof(&mut self) {
        each!(self, e => e.recv_eof())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        each!(self, e => e.poll_timeout())
    }
    fn handle_timeout(&mut self, now: Instant) {
        each!(self, e => e.handle_timeout(now))
    }
    fn is_over(&self, eof: bool) -> bool {
        each!(self, e => e.is_over(eof))
    }
    fn go_away(&mut self) -> bool {
        each!(self, e => e.go_away())
    }
}

/// The first octets of the HTTP/2 connection preface (RFC 9113 §3.4): no
/// HTTP/1.1 request starts with them.
#[cfg(all(feature = "grpc", feature = "http"))]
pub(crate) const PREFACE_START: &[u8] = b"PRI ";

/// Reads the first octets of a connection into `input` until they show
/// whether it speaks HTTP/2 (the preface) or HTTP/1.1 (anything else); how
/// many were read, 0 when the peer closed (or failed) first. `input`
/// becomes the start of the run loop's input, so nothing is copied.
#[cfg(all(feature = "grpc", feature = "http"))]
pub(crate) async fn sniff<Io: embedded_io_async::Read>(io: &mut Io, input: &mut [u8]) -> usize {
    let mut n = 0;
    while n < PREFACE_START.len() && PREFACE_START.starts_with(&input[..n]) {
        match io.read(&mut input[n..]).await {
            Ok(k) if k > 0 => n += k,
            _ => return 0,
        }
    }
    n
}

/// Whether sniffed octets open an HTTP/2 connection.
#[cfg(all(feature = "grpc", feature = "http"))]
pub(crate) fn is_preface(first: &[u8]) -> bool {
    first.get(..PREFACE_START.len()) == Some(PREFACE_START)
}
