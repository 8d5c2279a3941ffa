//! The frame layer (RFC 9113 §4, §6): the 9-octet frame header, the rules a
//! header alone can break, whole-frame parsing for frames already in memory,
//! and writers for every frame type.
//!
//! The connection parses payloads as they arrive (DATA and header fragments
//! are never buffered whole); [`Frame::parse`] is for frames held in one
//! slice, as tests and tools have them.

use super::ErrorCode;

/// Octets in a frame header.
pub const HEADER_LEN: usize = 9;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The smallest and largest SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2).
pub const MIN_MAX_FRAME_SIZE: u32 = 16_384;
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A broken rule: the connection error code and a reason for GOAWAY's debug data.
pub type Violation = (ErrorCode, &'static str);

/// A frame type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameType(pub u8);

impl FrameType {
    pub const DATA: Self = Self(0x0);
    pub const HEADERS: Self = Self(0x1);
    pub const PRIORITY: Self = Self(0x2);
    pub const RST_STREAM: Self = Self(0x3);
    pub const SETTINGS: Self = Self(0x4);
    pub const PUSH_PROMISE: Self = Self(0x5);
    pub const PING: Self = Self(0x6);
    pub const GOAWAY: Self = Self(0x7);
    pub const WINDOW_UPDATE: Self = Self(0x8);
    pub const CONTINUATION: Self = Self(0x9);
}

/// Frame flags (RFC 9113 §6).
pub mod flags {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub length: u32,
    pub kind: FrameType,
    pub flags: u8,
    /// The stream identifier, reserved bit cleared.
    pub stream_id: u32,
}

impl FrameHeader {
    pub const fn parse(b: &[u8; HEADER_LEN]) -> Self {
        Self {
            length: (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32,
            kind: FrameType(b[3]),
            flags: b[4],
            stream_id: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub const fn emit(&self) -> [u8; HEADER_LEN] {
        let l = self.length.to_be_bytes();
        let s = (self.stream_id & MAX_WINDOW).to_be_bytes();
        [
            l[1],
            l[2],
            l[3],
            self.kind.0,
            self.flags,
            s[0],
            s[1],
            s[2],
            s[3],
        ]
    }

    pub const fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The rules this header breaks on its own, as a connection error
    /// (RFC 9113 §4.2, §6). Stream-state rules are the connection's.
    pub fn check(&self, max_frame_size: u32) -> Result<(), Violation> {
        use ErrorCode as E;
        if self.length > max_frame_size {
            return Err((
                E::FRAME_SIZE_ERROR,
                "frame larger than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        let on_stream = self.stream_id != 0;
        let len = self.length;
        match self.kind {
            FrameType::DATA
            | FrameType::HEADERS
            | FrameType::CONTINUATION
            | FrameType::PUSH_PROMISE
                if !on_stream =>
            {
                Err((E::PROTOCOL_ERROR, "stream frame on stream 0"))
            }
            FrameType::DATA | FrameType::HEADERS => {
                let fixed = u32::from(self.has(flags::PADDED))
                    + if self.kind == FrameType::HEADERS && self.has(flags::PRIORITY) {
                        5
                    } else {
                        0
                    };
                if len < fixed {
                    Err((
                        E::FRAME_SIZE_ERROR,
                        "frame shorter than its padding and priority fields",
                    ))
                } else {
                    Ok(())
                }
            }
            FrameType::PRIORITY if !on_stream => Err((E::PROTOCOL_ERROR, "PRIORITY on stream 0")),
            FrameType::PRIORITY if len != 5 => {
                Err((E::FRAME_SIZE_ERROR, "PRIORITY length is not 5"))
            }
            FrameType::RST_STREAM if !on_stream => {
                Err((E::PROTOCOL_ERROR, "RST_STREAM on stream 0"))
            }
            FrameType::RST_STREAM if len != 4 => {
                Err((E::FRAME_SIZE_ERROR, "RST_STREAM length is not 4"))
            }
            FrameType::SETTINGS if on_stream => Err((E::PROTOCOL_ERROR, "SETTINGS on a stream")),
            FrameType::SETTINGS if self.has(flags::ACK) && len != 0 => {
                Err((E::FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"))
            }
            FrameType::SETTINGS if !len.is_multiple_of(6) => {
                Err((E::FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6"))
            }
            FrameType::PING if on_stream => Err((E::PROTOCOL_ERROR, "PING on a stream")),
            FrameType::PING if len != 8 => Err((E::FRAME_SIZE_ERROR, "PING length is not 8")),
            FrameType::GOAWAY if on_stream => Err((E::PROTOCOL_ERROR, "GOAWAY on a stream")),
            FrameType::GOAWAY if len < 8 => Err((E::FRAME_SIZE_ERROR, "GOAWAY shorter than 8")),
            FrameType::WINDOW_UPDATE if len != 4 => {
                Err((E::FRAME_SIZE_ERROR, "WINDOW_UPDATE length is not 4"))
            }
            _ => Ok(()),
        }
    }
}

/// One SETTINGS parameter (RFC 9113 §6.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub id: u16,
    pub value: u32,
}

impl Setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

    pub const fn parse(b: &[u8; 6]) -> Self {
        Self {
            id: u16::from_be_bytes([b[0], b[1]]),
            value: u32::from_be_bytes([b[2], b[3], b[4], b[5]]),
        }
    }

    pub const fn emit(&self) -> [u8; 6] {
        let i = self.id.to_be_bytes();
        let v = self.value.to_be_bytes();
        [i[0], i[1], v[0], v[1], v[2], v[3]]
    }
}

/// A frame held whole in one slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream_id: u32,
        data: &'a [u8],
        end_stream: bool,
        pad_len: Option<u8>,
    },
    Headers {
        stream_id: u32,
        fragment: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        pad_len: Option<u8>,
    },
    Priority {
        stream_id: u32,
        dependency: u32,
        exclusive: bool,
        weight: u8,
    },
    RstStream {
        stream_id: u32,
        code: ErrorCode,
    },
    Settings {
        ack: bool,
        params: &'a [u8],
    },
    PushPromise {
        stream_id: u32,
        promised_id: u32,
        fragment: &'a [u8],
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway {
        last_stream_id: u32,
        code: ErrorCode,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream_id: u32,
        increment: u32,
    },
    Continuation {
        stream_id: u32,
        fragment: &'a [u8],
        end_headers: bool,
    },
    Unknown {
        kind: u8,
        stream_id: u32,
        payload: &'a [u8],
    },
}

impl<'a> Frame<'a> {
    /// Parses the frame at the start of `buf`. Returns the frame and the
    /// octets it spans, `Ok(None)` when `buf` holds only part of it, or the
    /// connection error it is.
    pub fn parse(buf: &'a [u8], max_frame_size: u32) -> Result<Option<(Self, usize)>, Violation> {
        let Some((head, rest)) = buf.split_first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let h = FrameHeader::parse(head);
        h.check(max_frame_size)?;
        let Some(payload) = rest.get(..h.length as usize) else {
            return Ok(None);
        };
        let total = HEADER_LEN + payload.len();
        let sid = h.stream_id;
        let frame = match h.kind {
            FrameType::DATA | FrameType::HEADERS => {
                let (pad_len, mut body) = strip_padding(&h, payload)?;
                if h.kind == FrameType::DATA {
                    Frame::Data {
                        stream_id: sid,
                        data: body,
                        end_stream: h.has(flags::END_STREAM),
                        pad_len,
                    }
                } else {
                    if h.has(flags::PRIORITY) {
                        body = body
                            .get(5..)
                            .ok_or((ErrorCode::FRAME_SIZE_ERROR, "short HEADERS"))?;
                    }
                    Frame::Headers {
                        stream_id: sid,
                        fragment: body,
                        end_stream: h.has(flags::END_STREAM),
                        end_headers: h.has(flags::END_HEADERS),
                        pad_len,
                    }
                }
            }
            FrameType::PRIORITY => {
                let d = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                Frame::Priority {
                    stream_id: sid,
                    dependency: d & MAX_WINDOW,
                    exclusive: d & !MAX_WINDOW != 0,
                    weight: payload[4],
                }
            }
            FrameType::RST_STREAM => Frame::RstStream {
                stream_id: sid,
                code: ErrorCode(be32(payload)),
            },
            FrameType::SETTINGS => Frame::Settings {
                ack: h.has(flags::ACK),
                params: payload,
            },
            FrameType::PUSH_PROMISE => {
                let (_, body) = strip_padding(&h, payload)?;
                let id = body
                    .get(..4)
                    .ok_or((ErrorCode::FRAME_SIZE_ERROR, "short PUSH_PROMISE"))?;
                Frame::PushPromise {
                    stream_id: sid,
                    promised_id: be32(id) & MAX_WINDOW,
                    fragment: &body[4..],
                }
            }
            FrameType::PING => {
                let mut p = [0u8; 8];
                p.copy_from_slice(payload);
                Frame::Ping {
                    ack: h.has(flags::ACK),
                    payload: p,
                }
            }
            FrameType::GOAWAY => Frame::GoAway {
                last_stream_id: be32(payload) & MAX_WINDOW,
                code: ErrorCode(be32(&payload[4..])),
                debug: &payload[8..],
            },
            FrameType::WINDOW_UPDATE => Frame::WindowUpdate {
                stream_id: sid,
                increment: be32(payload) & MAX_WINDOW,
            },
            FrameType::CONTINUATION => Frame::Continuation {
                stream_id: sid,
                fragment: payload,
                end_headers: h.has(flags::END_HEADERS),
            },
            FrameType(kind) => Frame::Unknown {
                kind,
                stream_id: sid,
                payload,
            },
        };
        Ok(Some((frame, total)))
    }
}

fn be32(b: &[u8]) -> u32 {
    match b.first_chunk::<4>() {
        Some(b) => u32::from_be_bytes(*b),
        None => 0,
    }
}

/// Splits off the Pad Length field and the padding (RFC 9113 §6.1).
fn strip_padding<'a>(
    h: &FrameHeader,
    payload: &'a [u8],
) -> Result<(Option<u8>, &'a [u8]), Violation> {
    if !h.has(flags::PADDED) {
        return Ok((None, payload));
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or((ErrorCode::FRAME_SIZE_ERROR, "missing Pad Length"))?;
    let body_len = rest
        .len()
        .checked_sub(usize::from(pad))
        .ok_or((ErrorCode::PROTOCOL_ERROR, "padding longer than the payload"))?;
    Ok((Some(pad), &rest[..body_len]))
}

/// Writes a frame header into the first 9 octets of `out`.
pub fn write_header(
    out: &mut [u8],
    length: usize,
    kind: FrameType,
    flags: u8,
    stream_id: u32,
) -> Option<()> {
    let h = FrameHeader {
        length: length as u32,
        kind,
        flags,
        stream_id,
    };
    out.get_mut(..HEADER_LEN)?.copy_from_slice(&h.emit());
    Some(())
}

impl Frame<'_> {
    /// The octets [`Frame::emit`] writes.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + match *self {
                Frame::Data { data, pad_len, .. } => {
                    data.len() + pad_len.map_or(0, |p| 1 + usize::from(p))
                }
                Frame::Headers {
                    fragment, pad_len, ..
                } => fragment.len() + pad_len.map_or(0, |p| 1 + usize::from(p)),
                Frame::Priority { .. } => 5,
                Frame::RstStream { .. } | Frame::WindowUpdate { .. } => 4,
                Frame::Settings { params, .. } => params.len(),
                Frame::PushPromise { fragment, .. } => 4 + fragment.len(),
                Frame::Ping { .. } => 8,
                Frame::GoAway { debug, .. } => 8 + debug.len(),
                Frame::Continuation { fragment, .. } => fragment.len(),
                Frame::Unknown { payload, .. } => payload.len(),
            }
    }

    /// Writes the frame into `out`; `None` if it does not fit. Padding is
    /// written as zeros.
    pub fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.encoded_len();
        let out = out.get_mut(..len)?;
        out.fill(0);
        let (head, body) = out.split_at_mut(HEADER_LEN);
        let (kind, fl, sid) = match *self {
            Frame::Data {
                stream_id,
                data,
                end_stream,
                pad_len,
            } => {
                let at = put_pad(body, pad_len);
                body[at..at + data.len()].copy_from_slice(data);
                let f = if end_stream { flags::END_STREAM } else { 0 }
                    | if pad_len.is_some() { flags::PADDED } else { 0 };
                (FrameType::DATA, f, stream_id)
            }
            Frame::Headers {
                stream_id,
                fragment,
                end_stream,
                end_headers,
                pad_len,
            } => {
                let at = put_pad(body, pad_len);
                body[at..at + fragment.len()].copy_from_slice(fragment);
                let f = if end_stream { flags::END_STREAM } else { 0 }
                    | if end_headers { flags::END_HEADERS } else { 0 }
                    | if pad_len.is_some() { flags::PADDED } else { 0 };
                (FrameType::HEADERS, f, stream_id)
            }
            Frame::Priority {
                stream_id,
                dependency,
                exclusive,
                weight,
            } => {
                let d = dependency | if exclusive { 1 << 31 } else { 0 };
                body[..4].copy_from_slice(&d.to_be_bytes());
                body[4] = weight;
                (FrameType::PRIORITY, 0, stream_id)
            }
            Frame::RstStream { stream_id, code } => {
                body.copy_from_slice(&code.0.to_be_bytes());
                (FrameType::RST_STREAM, 0, stream_id)
            }
            Frame::Settings { ack, params } => {
                body.copy_from_slice(params);
                (FrameType::SETTINGS, if ack { flags::ACK } else { 0 }, 0)
            }
            Frame::PushPromise {
                stream_id,
                promised_id,
                fragment,
            } => {
                body[..4].copy_from_slice(&promised_id.to_be_bytes());
                body[4..].copy_from_slice(fragment);
                (FrameType::PUSH_PROMISE, flags::END_HEADERS, stream_id)
            }
            Frame::Ping { ack, payload } => {
                body.copy_from_slice(&payload);
                (FrameType::PING, if ack { flags::ACK } else { 0 }, 0)
            }
            Frame::GoAway {
                last_stream_id,
                code,
                debug,
            } => {
                body[..4].copy_from_slice(&last_stream_id.to_be_bytes());
                body[4..8].copy_from_slice(&code.0.to_be_bytes());
                body[8..].copy_from_slice(debug);
                (FrameType::GOAWAY, 0, 0)
            }
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => {
                body.copy_from_slice(&increment.to_be_bytes());
                (FrameType::WINDOW_UPDATE, 0, stream_id)
            }
            Frame::Continuation {
                stream_id,
                fragment,
                end_headers,
            } => {
                body.copy_from_slice(fragment);
                (
                    FrameType::CONTINUATION,
                    if end_headers { flags::END_HEADERS } else { 0 },
                    stream_id,
                )
            }
            Frame::Unknown {
                kind,
                stream_id,
                payload,
            } => {
                body.copy_from_slice(payload);
                (FrameType(kind), 0, stream_id)
            }
        };
        head.copy_from_slice(
            &FrameHeader {
                length: (len - HEADER_LEN) as u32,
                kind,
                flags: fl,
                stream_id: sid,
            }
            .emit(),
        );
        Some(len)
    }
}

fn put_pad(body: &mut [u8], pad_len: Option<u8>) -> usize {
    match pad_len {
        Some(p) => {
            body[0] = p;
            1
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = FrameHeader {
            length: 0x12345,
            kind: FrameType::HEADERS,
            flags: 0x25,
            stream_id: 0x7fff_ffff,
        };
        assert_eq!(FrameHeader::parse(&h.emit()), h);
        // The reserved bit is ignored on receipt.
        let mut b = h.emit();
        b[5] |= 0x80;
        assert_eq!(FrameHeader::parse(&b).stream_id, 0x7fff_ffff);
    }

    #[test]
    fn every_frame_round_trips() {
        let frames = [
            Frame::Data {
                stream_id: 1,
                data: b"hello",
                end_stream: true,
                pad_len: Some(3),
            },
            Frame::Headers {
                stream_id: 3,
                fragment: b"\x82",
                end_stream: false,
                end_headers: true,
                pad_len: None,
            },
            Frame::Priority {
                stream_id: 5,
                dependency: 3,
                exclusive: true,
                weight: 200,
            },
            Frame::RstStream {
                stream_id: 1,
                code: ErrorCode::CANCEL,
            },
            Frame::Settings {
                ack: false,
                params: &[0, 4, 0, 0x10, 0, 0],
            },
            Frame::Settings {
                ack: true,
                params: &[],
            },
            Frame::Ping {
                ack: true,
                payload: *b"12345678",
            },
            Frame::GoAway {
                last_stream_id: 7,
                code: ErrorCode::ENHANCE_YOUR_CALM,
                debug: b"calm",
            },
            Frame::WindowUpdate {
                stream_id: 0,
                increment: 1 << 20,
            },
            Frame::Continuation {
                stream_id: 3,
                fragment: b"\x84",
                end_headers: true,
            },
            Frame::Unknown {
                kind: 0xfa,
                stream_id: 9,
                payload: b"?",
            },
        ];
        let mut buf = [0u8; 64];
        for f in frames {
            let n = f.emit(&mut buf).unwrap();
            assert_eq!(n, f.encoded_len());
            assert_eq!(Frame::parse(&buf[..n], 16384), Ok(Some((f, n))), "{f:?}");
            // Any shorter prefix is incomplete, not an error.
            for cut in 0..n {
                assert_eq!(Frame::parse(&buf[..cut], 16384), Ok(None));
            }
        }
    }

    #[test]
    fn fixed_length_frames_of_the_wrong_length_are_frame_size_errors() {
        for (kind, sid, good) in [
            (FrameType::PING, 0, 8),
            (FrameType::PRIORITY, 1, 5),
            (FrameType::RST_STREAM, 1, 4),
            (FrameType::WINDOW_UPDATE, 0, 4),
            (FrameType::WINDOW_UPDATE, 1, 4),
        ] {
            for len in [0, good - 1, good + 1] {
                let h = FrameHeader {
                    length: len,
                    kind,
                    flags: 0,
                    stream_id: sid,
                };
                assert_eq!(
                    h.check(16384).map_err(|e| e.0),
                    Err(ErrorCode::FRAME_SIZE_ERROR),
                    "{kind:?} {len}"
                );
            }
        }
        let settings = FrameHeader {
            length: 7,
            kind: FrameType::SETTINGS,
            flags: 0,
            stream_id: 0,
        };
        assert_eq!(
            settings.check(16384).map_err(|e| e.0),
            Err(ErrorCode::FRAME_SIZE_ERROR)
        );
        let ack = FrameHeader {
            length: 6,
            kind: FrameType::SETTINGS,
            flags: flags::ACK,
            stream_id: 0,
        };
        assert_eq!(
            ack.check(16384).map_err(|e| e.0),
            Err(ErrorCode::FRAME_SIZE_ERROR)
        );
        let big = FrameHeader {
            length: 16385,
            kind: FrameType::DATA,
            flags: 0,
            stream_id: 1,
        };
        assert_eq!(
            big.check(16384).map_err(|e| e.0),
            Err(ErrorCode::FRAME_SIZE_ERROR)
        );
    }

    #[test]
    fn padding_longer_than_payload_is_a_protocol_error() {
        let bytes = [0, 0, 3, 0, flags::PADDED, 0, 0, 0, 1, 5, b'a', b'b'];
        assert_eq!(
            Frame::parse(&bytes, 16384).map_err(|e| e.0),
            Err(ErrorCode::PROTOCOL_ERROR)
        );
    }
}
