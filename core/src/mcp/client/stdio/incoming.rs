//! What the server's lines mean: a line is parsed once and acted on — a
//! response matched to its call by id (or to the handshake), a
//! notification to its call by progress token or subscription id, a bad
//! line or an unmatched message reported; and the head of an over-long
//! line, which may name the call it answers.

use super::super::era::{self, Era, Verdict};
use super::super::input;
use super::{BAD_LINE_PREFIX, INIT_ID, Outcome, PROBE_ID, Phase, State, StdioClient, StdioEvent};
use crate::mcp::envelope::Message;
use crate::mcp::json;

impl<B: AsRef<[u8]> + AsMut<[u8]>, const CALLS: usize> StdioClient<B, CALLS> {
    /// Fails the call whose id the head of an over-long line (its first
    /// `head` octets in the buffer) names, when one is found there.
    pub(super) fn fail_too_long(&mut self, head: usize) {
        if self.skipping.is_some() {
            return;
        }
        let Some(id) = id_in_head(&self.buf.as_ref()[..head.min(HEAD_SCAN)]) else {
            return;
        };
        if let Some(s) = self
            .slots
            .iter_mut()
            .find(|s| s.state == State::Live && s.id.is(id))
        {
            s.state = State::Done {
                outcome: Outcome::Local {
                    code: crate::mcp::error::INTERNAL_ERROR,
                    message: "the response line is over the client's line limit",
                },
                told: false,
            };
            s.notified = false;
        }
    }

    /// Acts on the complete line `buf[..line]`.
    pub(super) fn on_line(&mut self) {
        let mut n = self.line;
        if self.buf.as_ref()[..n].last() == Some(&b'\r') {
            n -= 1;
            self.line = n;
        }
        let buf = self.buf.as_ref();
        let text = &buf[..n];
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let message = match Message::parse(text, json::DEFAULT_MAX_DEPTH) {
            Ok(m) => m,
            Err(_) => {
                let json = json::validate(text, json::DEFAULT_MAX_DEPTH).is_ok();
                let k = text.len().min(BAD_LINE_PREFIX);
                self.bad.0[..k].copy_from_slice(&text[..k]);
                self.bad.1 = k;
                self.push(StdioEvent::BadLine { json });
                return;
            }
        };
        let mut handshake = None;
        let mut hit = None;
        match message {
            Message::Response { id, .. } | Message::Error { id, .. } => {
                if json::trim(id) == PROBE_ID || json::trim(id) == INIT_ID {
                    handshake = Some(json::trim(id) == PROBE_ID);
                } else if let Some(i) = self
                    .slots
                    .iter()
                    .position(|s| s.state != State::Free && s.id.is(id))
                {
                    hit = Some(i);
                    let max_rounds = self.config.max_input_rounds;
                    let s = &mut self.slots[i];
                    if s.state == State::Live {
                        let outcome = match message {
                            Message::Response { result, .. } if s.answers_input => {
                                asked(result, s.id.get(), s.rounds, max_rounds)
                            }
                            Message::Response { .. } => Outcome::Response,
                            _ => Outcome::Error,
                        };
                        if outcome == Outcome::InputRequired {
                            s.rounds = s.rounds.saturating_add(1);
                        }
                        s.state = State::Done {
                            outcome,
                            told: false,
                        };
                    }
                }
            }
            Message::Notification { method, params } => {
                let p = params.unwrap_or(b"{}");
                let target = if json::str_eq(method, b"notifications/progress") {
                    json::get(p, b"progressToken").and_then(|t| {
                        self.slots
                            .iter()
                            .position(|s| s.state == State::Live && s.token.is(t))
                    })
                } else if json::str_eq(method, b"notifications/cancelled") {
                    json::get(p, b"requestId").and_then(|t| {
                        let i = self
                            .slots
                            .iter()
                            .position(|s| s.state == State::Live && s.listen && s.id.is(t))?;
                        self.slots[i].state = State::Done {
                            outcome: Outcome::ServerClosed,
                            told: false,
                        };
                        Some(i)
                    })
                } else {
                    json::get(p, b"_meta")
                        .and_then(|m| {
                            json::get(m, crate::mcp::meta::KEY_SUBSCRIPTION_ID.as_bytes())
                        })
                        .and_then(|t| {
                            self.slots
                                .iter()
                                .position(|s| s.state == State::Live && s.listen && s.id.is(t))
                        })
                };
                if let Some(i) = target {
                    hit = Some(i);
                    if self.slots[i].state == State::Live {
                        self.slots[i].notified = true;
                    }
                }
            }
            Message::Request { .. } => {}
        }
        match handshake {
            Some(true) => self.on_probe_answer(n),
            Some(false) => self.on_initialize_answer(n),
            None if hit.is_none() => self.push(StdioEvent::Unmatched),
            None => {}
        }
    }

    pub(super) fn on_probe_answer(&mut self, n: usize) {
        let Phase::Probing { .. } = self.phase else {
            return;
        };
        let Ok(message) = Message::parse(&self.buf.as_ref()[..n], json::DEFAULT_MAX_DEPTH) else {
            return;
        };
        self.era.note(&message);
        match era::classify(&message) {
            Verdict::Modern(v) => {
                self.era.set_modern(v);
                self.ready();
            }
            Verdict::Retry(v) if self.era.renegotiated.is_none() => {
                self.era.renegotiated = Some(v);
                self.probe(v);
            }
            Verdict::Retry(_) => {
                self.era.fall_back("-32022 twice");
                self.initialize();
            }
            Verdict::Legacy(why) => {
                self.era.fall_back(why);
                self.initialize();
            }
            // `server_versions` and `probe_error` say which versions.
            Verdict::Unsupported => self.fail_handshake(
                "the server answered -32022 and speaks none of this client's protocol versions",
            ),
        }
    }

    pub(super) fn on_initialize_answer(&mut self, n: usize) {
        if !matches!(self.phase, Phase::Initializing { .. }) {
            return;
        }
        let Ok(message) = Message::parse(&self.buf.as_ref()[..n], json::DEFAULT_MAX_DEPTH) else {
            return;
        };
        match era::initialize_answer(&message) {
            Ok(v) => {
                self.era.set_legacy(Era::Legacy, v);
                self.phase = Phase::Initialized;
            }
            Err(why) => self.fail_handshake(why),
        }
    }
}

/// What the result of a call whose application answers input requests
/// means: an `input_required` result it can answer (the call's id `id`,
/// after `rounds` rounds of at most `max`), one it cannot (a local
/// failure), or the call's response.
fn asked(result: &[u8], id: &[u8], rounds: u8, max: u8) -> Outcome {
    if !input::asks_for_input(result) {
        return Outcome::Response;
    }
    if let Err(e) = input::InputRequired::read(result) {
        return Outcome::Refused { message: e.message };
    }
    if rounds >= max {
        return Outcome::TooManyRounds;
    }
    // The next round's id must be one a call can have.
    let mut next = [0u8; input::MAX_ROUND_ID];
    let fits = input::round_id(id, rounds.saturating_add(1), &mut next)
        .is_some_and(|n| n <= super::MAX_ID);
    if !fits {
        return Outcome::Refused {
            message: "the id of the next round's request would be over 64 octets",
        };
    }
    Outcome::InputRequired
}

/// Octets of an over-long line searched for its `"id"`.
pub(super) const HEAD_SCAN: usize = 512;

/// The raw top-level-looking `"id"` value (a plain string or a number) in
/// the head of a line too long to parse.
fn id_in_head(head: &[u8]) -> Option<&[u8]> {
    let at = head.windows(5).position(|w| w == b"\"id\":")? + 5;
    let rest = json::trim(&head[at..]);
    let end = if rest.first() == Some(&b'"') {
        rest[1..].iter().position(|&b| b == b'"' || b == b'\\')? + 2
    } else {
        rest.iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'-'))?
    };
    (end > 0).then(|| &rest[..end])
}
