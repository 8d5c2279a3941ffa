//! The event stream of the 2024 HTTP+SSE shape (MCP 2026-07-28 §13.1),
//! over HTTP/1.1: the engine's own `GET` keeps a link open for it. Its
//! first event, `endpoint`, names where every message is `POST`ed
//! (resolved against the endpoint's URL by
//! [`endpoint_target`](super::era::endpoint_target)); then each `message`
//! event is a response, handed to the call whose request has its id, or a
//! notification, handed to the call whose `progressToken` it names; other
//! messages are dropped. The stream's end fails the calls waiting for
//! their responses on it.

use super::call::{Fed, Own, Place};
use super::engine::HttpClient;
use super::era::endpoint_target;
use super::lifecycle::Phase;
use super::response::Judgement;
use crate::grpc::Code;
use crate::h2::Storage;
use crate::http1::MediaType;
use crate::mcp::client::calls::bytes;
use crate::mcp::json;
use crate::mcp::store::CallStore;

impl<
    S: CallStore,
    const CALLS: usize,
    const LINKS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    const HEAD: usize,
> HttpClient<S, CALLS, LINKS, TABLE, BUF, B, CACHE, HEAD>
{
    /// Whether call `i` is the engine's event stream.
    pub(super) fn is_events(&self, i: usize) -> bool {
        self.calls
            .call(i)
            .is_some_and(|c| c.own == Some(Own::Events))
    }

    /// The event stream's response head: anything but 200 with an event
    /// stream fails it.
    pub(super) fn events_head(&mut self, i: usize, status: u16, media: MediaType) {
        self.events_fed = 0;
        self.events_parser = crate::http1::SseParser::new();
        if let Some(c) = self.calls.call_mut(i) {
            c.diagnostics.http_status = Some(status);
        }
        if status == 200 && media == MediaType::EventStream {
            return;
        }
        let code = if status >= 400 {
            Code::from_http_status(status)
        } else {
            Code::Internal
        };
        self.calls.fail_transport(
            i,
            code,
            b"the 2024 event stream could not be opened (not 200 with text/event-stream)",
            Some(status),
        );
    }

    /// Octets of the event stream: each event handled as it completes.
    /// [`Fed::Note`]: a notification for a call stopped it there.
    pub(super) fn events_data(&mut self, i: usize, data: &[u8]) -> Fed {
        let mut used = 0;
        while used < data.len() {
            let rest = &data[used..];
            // An event's data is no longer than the octets that carried it.
            let want = self.events_fed + rest.len();
            let Some(out) = self.calls.rx_room(i, want) else {
                self.calls.fail_transport(
                    i,
                    Code::ResourceExhausted,
                    b"no buffer for the event stream",
                    None,
                );
                return Fed::All;
            };
            let fed = match self.events_parser.feed(rest, out) {
                Ok(fed) => fed,
                Err(e) => {
                    self.calls
                        .fail_transport(i, Code::Internal, e.reason().as_bytes(), None);
                    return Fed::All;
                }
            };
            used += fed.consumed;
            self.events_fed += fed.consumed;
            let Some(event) = fed.event else {
                if fed.consumed == 0 {
                    break;
                }
                continue;
            };
            self.events_fed = 0;
            if event.name() == b"endpoint" {
                self.on_endpoint(i, event.data_len);
            } else if event.is_message() && self.on_stream_message(i, event.data_len) {
                return Fed::Note(used);
            }
        }
        Fed::All
    }

    /// The `endpoint` event (its data `rx[..len]` of the stream's call):
    /// where messages go; then `initialize`.
    fn on_endpoint(&mut self, i: usize, len: usize) {
        if self.era.phase != Phase::Streaming {
            return;
        }
        let data = self
            .calls
            .slots
            .get(i)
            .map_or(&[][..], |s| bytes(&self.calls.store, &s.rx))
            .get(..len)
            .unwrap_or(b"");
        let resolved = endpoint_target(
            self.config.scheme,
            self.config.authority,
            self.config.target,
            data,
            self.era.post_target_room(),
        )
        .map(str::len);
        match resolved {
            Ok(n) => {
                self.era.set_post_target(n);
                if let Some(c) = self.calls.call_mut(i) {
                    // The stream lives as long as the engine.
                    c.deadline = None;
                }
                self.send_initialize();
            }
            Err(_) => self.calls.fail_transport(
                i,
                Code::Internal,
                b"the endpoint event names no usable target (another origin, or malformed)",
                None,
            ),
        }
    }

    /// A `message` event (`rx[..len]` of the stream's call `i`): a
    /// response goes to its call, a notification to the call of its
    /// progress token. `true`: a notification to hand out first.
    fn on_stream_message(&mut self, i: usize, len: usize) -> bool {
        let (target, note, error) = {
            let text = self
                .calls
                .slots
                .get(i)
                .map_or(&[][..], |s| bytes(&self.calls.store, &s.rx))
                .get(..len)
                .unwrap_or(b"");
            if json::validate(text, json::DEFAULT_MAX_DEPTH).is_err()
                || json::kind(text) != Some(json::Kind::Object)
            {
                return false;
            }
            let [method, id, result, error] =
                json::get_all(text, [b"method", b"id", b"result", b"error"]);
            match (method, id) {
                (None, Some(id)) if result.is_some() || error.is_some() => {
                    let code = error
                        .and_then(|e| json::get(e, b"code"))
                        .and_then(json::as_i64);
                    (self.posted_call(request_id, id), false, code)
                }
                (Some(_), None) => {
                    let Some(token) =
                        json::get(text, b"params").and_then(|p| json::get(p, b"progressToken"))
                    else {
                        return false;
                    };
                    (self.posted_call(progress_token, token), true, None)
                }
                _ => return false,
            }
        };
        let Some(j) = target else {
            return false;
        };
        if !self.calls.copy_rx(i, len, j) {
            self.calls.fail_transport(
                j,
                Code::ResourceExhausted,
                b"message larger than the call buffer",
                None,
            );
            return false;
        }
        if note {
            let call = self.calls.call_id(j);
            self.calls.note = Some(super::call::Note {
                call,
                len,
                told: false,
            });
            return true;
        }
        self.calls.judged(j, Judgement::Response { len, error });
        false
    }

    /// The call waiting for its answer on the stream whose request's
    /// `key` (a raw JSON value found in the request by `key`) is `value`.
    fn posted_call(&self, key: fn(&[u8]) -> Option<&[u8]>, value: &[u8]) -> Option<usize> {
        let value = json::trim(value);
        (0..CALLS).find(|&j| {
            let Some(slot) = self.calls.slots.get(j) else {
                return false;
            };
            let Some(c) = slot.call.as_ref() else {
                return false;
            };
            let waiting = c.posted
                && c.terminal.is_none()
                && matches!(c.place, Place::Posted | Place::Link(_));
            waiting
                && bytes(&self.calls.store, &slot.req)
                    .get(c.orig.0..c.orig.1)
                    .and_then(key)
                    .is_some_and(|k| json::trim(k) == value)
        })
    }

    /// The event stream ended or failed: the calls waiting for their
    /// responses on it fail; the era is probed again by the next call.
    pub(super) fn events_lost(&mut self) {
        for j in 0..CALLS {
            let waiting = self
                .calls
                .call(j)
                .is_some_and(|c| c.posted && c.terminal.is_none() && c.own.is_none());
            if waiting {
                if let Some(c) = self.calls.call_mut(j) {
                    c.place = Place::Done;
                }
                self.calls.fail_transport(
                    j,
                    Code::Unavailable,
                    b"the 2024 HTTP+SSE event stream ended before the response",
                    None,
                );
            }
        }
        self.era.lost_stream();
    }
}

/// The raw id of a request.
fn request_id(request: &[u8]) -> Option<&[u8]> {
    json::get(request, b"id")
}

/// The raw `progressToken` of a request.
fn progress_token(request: &[u8]) -> Option<&[u8]> {
    json::get(request, b"params")
        .and_then(|p| json::get(p, b"_meta"))
        .and_then(|m| json::get(m, b"progressToken"))
}
