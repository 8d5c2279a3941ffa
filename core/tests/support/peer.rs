//! A scripted peer: raw frames in, parsed frames out, around ONE connection
//! of ours (after h2's `tests/h2-support/src/mock.rs`).
//!
//! The peer writes frames with [`Frame::emit`] and header blocks with our
//! HPACK [`Encoder`] (which never indexes) or hand-made representations
//! ([`lit_inc`], [`indexed`]) when a test needs the dynamic table. It reads
//! what the connection transmits with [`Frame::parse`], joins HEADERS and
//! CONTINUATION and decodes them with a [`Decoder`]. Every frame the
//! connection writes must parse, and a header block must never be
//! interleaved with another frame.

use std::collections::VecDeque;

use super::h2::Map;

use mcpwire_core::h2::frame::{FrameHeader, FrameType, PREFACE, Setting, flags};
use mcpwire_core::h2::{
    Config, Connection, ConnectionError, ErrorCode, HeadersKind, InlineStorage, Role, Storage,
    StreamRef,
};
use mcpwire_core::hpack::{Decoder, Encoder, Field};
use mcpwire_core::time::Instant;

use super::h2::{Ev, Fields, SimStorage, Split, as_fields};

pub use mcpwire_core::h2::frame::Frame;

/// A frame the connection wrote, owned; header blocks joined and decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Rx {
    Headers {
        stream: u32,
        fields: Fields,
        end_stream: bool,
        /// HEADERS plus CONTINUATION frames the block took.
        frames: usize,
    },
    Data {
        stream: u32,
        data: Vec<u8>,
        end_stream: bool,
        padded: bool,
    },
    Priority {
        stream: u32,
    },
    Rst {
        stream: u32,
        code: ErrorCode,
    },
    Settings {
        ack: bool,
        params: Vec<(u16, u32)>,
    },
    PushPromise {
        stream: u32,
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway {
        last_stream_id: u32,
        code: ErrorCode,
        debug: String,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Unknown {
        kind: u8,
    },
}

impl Rx {
    /// The stream the frame belongs to (0 for connection frames).
    pub fn stream(&self) -> u32 {
        match *self {
            Rx::Headers { stream, .. }
            | Rx::Data { stream, .. }
            | Rx::Priority { stream }
            | Rx::Rst { stream, .. }
            | Rx::PushPromise { stream }
            | Rx::WindowUpdate { stream, .. } => stream,
            _ => 0,
        }
    }
}

/// A scripted peer around one connection.
pub struct Peer<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: Storage<B> = InlineStorage<B>,
> {
    pub conn: Box<Connection<S, T, B, R, St>>,
    pub now: Instant,
    pub split: Split,
    /// Encodes the peer's header blocks.
    pub enc: Encoder,
    /// Decodes the connection's header blocks.
    pub dec: Decoder<4096>,
    rx: Vec<u8>,
    /// The connection is a client: its output starts with the preface.
    expect_preface: bool,
    /// A header block of the connection being joined: (stream, end_stream, frames, bytes).
    block: Option<(u32, bool, usize, Vec<u8>)>,
    /// Frames not yet taken by the test.
    pub frames: VecDeque<Rx>,
    /// Every frame the connection wrote.
    pub wire: Vec<Rx>,
    /// Events not yet taken by the test.
    pub events: VecDeque<Ev>,
    /// Every event.
    pub log: Vec<Ev>,
    /// DATA handed to the application, per stream handle.
    pub data: Map<StreamRef, Vec<u8>>,
    /// Release DATA as soon as it is handed out.
    pub release: bool,
    /// `recv` made no progress and needed a `poll_transmit` to go on.
    pub stalls: usize,
    /// Octets of the largest frame the connection may send us.
    pub max_frame_size: u32,
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    std::fmt::Debug for Peer<S, T, B, R, St>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("conn", &self.conn)
            .field("split", &self.split)
            .field("frames", &self.frames)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    Peer<S, T, B, R, St>
{
    /// A peer for a connection in `role` (the connection's role).
    pub fn new(role: Role, config: Config, split: Split) -> Self {
        let now = Instant::ZERO;
        Peer {
            conn: Box::new(Connection::new(role, config, now)),
            now,
            split,
            enc: Encoder::new(),
            dec: Decoder::new(),
            rx: Vec::new(),
            expect_preface: role == Role::Client,
            block: None,
            frames: VecDeque::new(),
            wire: Vec::new(),
            events: VecDeque::new(),
            log: Vec::new(),
            data: Map::default(),
            release: true,
            stalls: 0,
            max_frame_size: 16_384,
        }
    }

    /// A server connection, the peer being its client.
    pub fn server(config: Config, split: Split) -> Self {
        Self::new(Role::Server, config, split)
    }

    /// A client connection, the peer being its server.
    pub fn client(config: Config, split: Split) -> Self {
        Self::new(Role::Client, config, split)
    }

    // -----------------------------------------------------------------
    // Driving the connection
    // -----------------------------------------------------------------

    /// Feeds `bytes` (cut by the split mode) without transmitting, except
    /// where `recv` cannot go on otherwise (counted in `stalls`).
    pub fn feed(&mut self, bytes: &[u8]) {
        self.deliver(bytes, false);
    }

    /// Feeds `bytes` as the run loop does (transmitting after every
    /// delivered chunk), then collects what the connection wrote.
    pub fn send(&mut self, bytes: &[u8]) {
        self.deliver(bytes, true);
        self.flush();
    }

    fn deliver(&mut self, bytes: &[u8], transmit: bool) {
        let step = match self.split {
            Split::ByteAtATime => 1,
            _ => bytes.len().max(1),
        };
        for chunk in bytes.chunks(step) {
            let mut input = chunk;
            let mut stuck = 0;
            while !input.is_empty() {
                let r = self.conn.recv(input, self.now);
                let mut progress = r.consumed > 0;
                if let Some(d) = r.data {
                    progress = true;
                    self.data
                        .entry(d.stream)
                        .or_default()
                        .extend_from_slice(d.bytes);
                    if d.end_stream {
                        self.log.push(Ev::DataEnd { stream: d.stream });
                        self.events.push_back(Ev::DataEnd { stream: d.stream });
                    }
                    if self.release && !d.bytes.is_empty() {
                        self.conn.release_data(d.stream, d.bytes.len());
                    }
                }
                input = &input[r.consumed..];
                if self.drain() > 0 {
                    progress = true;
                }
                if progress {
                    stuck = 0;
                } else {
                    // recv waits for poll_transmit (a full acknowledgement
                    // or refusal queue), which the documented loop does
                    // not say.
                    self.stalls += 1;
                    stuck += 1;
                    assert!(stuck < 3, "recv makes no progress: {self:?}");
                    self.flush();
                }
            }
            if transmit {
                self.flush();
            }
        }
    }

    /// Drains the connection's events into `events` and `log`.
    pub fn drain(&mut self) -> usize {
        let mut n = 0;
        while let Some(ev) = Ev::poll(&mut *self.conn) {
            n += 1;
            self.log.push(ev.clone());
            self.events.push_back(ev);
        }
        n
    }

    /// `poll_transmit` until 0 and parse what came out.
    pub fn flush(&mut self) {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = self.conn.poll_transmit(&mut buf);
            if n == 0 {
                break;
            }
            self.rx.extend_from_slice(&buf[..n]);
        }
        assert!(
            !self.conn.wants_transmit(),
            "wants_transmit() but poll_transmit gives nothing"
        );
        self.drain();
        self.parse();
    }

    fn parse(&mut self) {
        if self.expect_preface {
            if self.rx.len() < PREFACE.len() {
                return;
            }
            assert_eq!(&self.rx[..PREFACE.len()], PREFACE, "client preface");
            self.rx.drain(..PREFACE.len());
            self.expect_preface = false;
        }
        loop {
            let parsed = match Frame::parse(&self.rx, self.max_frame_size) {
                Ok(Some((frame, n))) => (to_rx_parts(&frame), n, frame_kind(&self.rx)),
                Ok(None) => return,
                Err(e) => panic!("the connection wrote an invalid frame: {e:?}"),
            };
            let (part, n, head) = parsed;
            self.rx.drain(..n);
            match part {
                Part::Block {
                    stream,
                    fragment,
                    end_stream,
                    end_headers,
                    first,
                } => {
                    if first {
                        assert!(self.block.is_none(), "HEADERS inside another header block");
                        self.block = Some((stream, end_stream, 0, Vec::new()));
                    }
                    let Some(b) = self.block.as_mut() else {
                        panic!("CONTINUATION without HEADERS");
                    };
                    assert_eq!(b.0, stream, "CONTINUATION on another stream");
                    b.2 += 1;
                    b.3.extend_from_slice(&fragment);
                    if end_headers {
                        let Some((stream, end_stream, frames, bytes)) = self.block.take() else {
                            unreachable!()
                        };
                        let mut scratch = vec![0u8; 1 << 16];
                        let mut f = Vec::new();
                        self.dec
                            .decode(&bytes, &mut scratch, |x: Field<'_>| {
                                f.push((x.name.to_vec(), x.value.to_vec()))
                            })
                            .expect("the connection's header block decodes");
                        self.push_rx(Rx::Headers {
                            stream,
                            fields: f,
                            end_stream,
                            frames,
                        });
                    }
                }
                Part::Other(rx) => {
                    assert!(self.block.is_none(), "frame {head:?} inside a header block");
                    self.push_rx(rx);
                }
            }
        }
    }

    fn push_rx(&mut self, rx: Rx) {
        self.wire.push(rx.clone());
        self.frames.push_back(rx);
    }

    /// Takes every frame received so far.
    pub fn take(&mut self) -> Vec<Rx> {
        self.flush();
        self.frames.drain(..).collect()
    }

    /// Takes every event so far.
    pub fn take_events(&mut self) -> Vec<Ev> {
        self.events.drain(..).collect()
    }

    // -----------------------------------------------------------------
    // Writing frames
    // -----------------------------------------------------------------

    pub fn frame(f: Frame<'_>) -> Vec<u8> {
        let mut out = vec![0u8; f.encoded_len()];
        let n = f.emit(&mut out).expect("frame fits");
        out.truncate(n);
        out
    }

    /// A frame from its parts, whatever its length rules say.
    pub fn raw(kind: u8, fl: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let head = FrameHeader {
            length: payload.len() as u32,
            kind: FrameType(kind),
            flags: fl,
            stream_id: stream,
        };
        let mut out = head.emit().to_vec();
        out.extend_from_slice(payload);
        out
    }

    /// A header block of `fields`, from the peer's encoder.
    pub fn block(&mut self, fields: &Fields) -> Vec<u8> {
        let mut out = vec![0u8; 1 << 17];
        let n = self
            .enc
            .encode(as_fields(fields), &mut out)
            .expect("block fits");
        out.truncate(n);
        out
    }

    /// HEADERS with END_HEADERS carrying `block`.
    pub fn headers_frame(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
        Self::frame(Frame::Headers {
            stream_id: stream,
            fragment: block,
            end_stream,
            end_headers: true,
            pad_len: None,
        })
    }

    /// HEADERS with `fields`, END_HEADERS set.
    pub fn headers(&mut self, stream: u32, fields: &Fields, end_stream: bool) -> Vec<u8> {
        let b = self.block(fields);
        Self::headers_frame(stream, &b, end_stream)
    }

    pub fn data(stream: u32, data: &[u8], end_stream: bool) -> Vec<u8> {
        Self::frame(Frame::Data {
            stream_id: stream,
            data,
            end_stream,
            pad_len: None,
        })
    }

    pub fn padded_data(stream: u32, data: &[u8], pad: u8, end_stream: bool) -> Vec<u8> {
        Self::frame(Frame::Data {
            stream_id: stream,
            data,
            end_stream,
            pad_len: Some(pad),
        })
    }

    pub fn continuation(stream: u32, fragment: &[u8], end_headers: bool) -> Vec<u8> {
        Self::frame(Frame::Continuation {
            stream_id: stream,
            fragment,
            end_headers,
        })
    }

    pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for &(id, value) in params {
            p.extend_from_slice(&Setting { id, value }.emit());
        }
        Self::frame(Frame::Settings {
            ack: false,
            params: &p,
        })
    }

    pub fn settings_ack() -> Vec<u8> {
        Self::frame(Frame::Settings {
            ack: true,
            params: &[],
        })
    }

    pub fn ping(payload: [u8; 8]) -> Vec<u8> {
        Self::frame(Frame::Ping {
            ack: false,
            payload,
        })
    }

    pub fn rst(stream: u32, code: ErrorCode) -> Vec<u8> {
        Self::frame(Frame::RstStream {
            stream_id: stream,
            code,
        })
    }

    pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
        Self::frame(Frame::WindowUpdate {
            stream_id: stream,
            increment,
        })
    }

    pub fn goaway(last_stream_id: u32, code: ErrorCode) -> Vec<u8> {
        Self::frame(Frame::GoAway {
            last_stream_id,
            code,
            debug: &[],
        })
    }

    pub fn priority(stream: u32, dependency: u32) -> Vec<u8> {
        Self::frame(Frame::Priority {
            stream_id: stream,
            dependency,
            exclusive: false,
            weight: 15,
        })
    }

    // -----------------------------------------------------------------
    // Handshake and common exchanges
    // -----------------------------------------------------------------

    /// Opens the connection with empty peer SETTINGS and acknowledges the
    /// connection's. Returns the connection's SETTINGS parameters.
    pub fn handshake(&mut self) -> Vec<(u16, u32)> {
        self.handshake_with(&[])
    }

    /// As [`Peer::handshake`], with the peer's SETTINGS parameters.
    pub fn handshake_with(&mut self, params: &[(u16, u32)]) -> Vec<(u16, u32)> {
        let mut first = Vec::new();
        if !self.expect_preface {
            first.extend_from_slice(PREFACE);
        }
        first.extend_from_slice(&Self::settings(params));
        self.flush();
        self.send(&first);
        let frames = self.take();
        let ours = frames
            .iter()
            .find_map(|f| match f {
                Rx::Settings { ack: false, params } => Some(params.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no SETTINGS from the connection: {frames:?}"));
        assert!(
            frames.contains(&Rx::Settings {
                ack: true,
                params: vec![]
            }),
            "our SETTINGS not acknowledged: {frames:?}"
        );
        self.send(&Self::settings_ack());
        assert!(self.take().is_empty(), "nothing answers a SETTINGS ACK");
        assert_eq!(self.conn.poll_timeout(), None, "no deadline after the ACK");
        self.events.clear();
        ours
    }

    /// Sends a complete request on `stream` and returns its handle.
    pub fn request(&mut self, stream: u32, fields: &Fields, end_stream: bool) -> StreamRef {
        self.events.clear();
        let h = self.headers(stream, fields, end_stream);
        self.send(&h);
        self.expect_request(stream)
    }

    /// The next event must be a Request on a new stream: its handle.
    pub fn expect_request(&mut self, stream: u32) -> StreamRef {
        let ev = self
            .events
            .pop_front()
            .unwrap_or_else(|| panic!("no event for stream {stream}: {self:?}"));
        match ev {
            Ev::Headers {
                stream: s,
                kind: HeadersKind::Request,
                ..
            } => {
                assert_eq!(self.conn.stream_id(s), Some(stream));
                s
            }
            other => panic!("expected a request on {stream}, got {other:?}"),
        }
    }

    /// A full request/response on a fresh `stream`: the connection still works.
    pub fn assert_request_works(&mut self, stream: u32) {
        let req = super::h2::request("/ok", &[]);
        let s = self.request(stream, &req, true);
        self.conn
            .send_headers(s, as_fields(&super::h2::response("200", &[])), true)
            .expect("response");
        let frames = self.take();
        assert!(
            frames.iter().any(|f| matches!(
                f,
                Rx::Headers { stream: id, fields, end_stream: true, .. }
                    if *id == stream && super::h2::get(fields, ":status") == Some("200")
            )),
            "no response on stream {stream}: {frames:?}"
        );
        assert!(!self.conn.is_closed());
    }

    /// The connection answers a PING.
    pub fn assert_alive(&mut self) {
        let payload = *b"alive?!!";
        self.send(&Self::ping(payload));
        let frames = self.take();
        assert!(
            frames.contains(&Rx::Ping { ack: true, payload }),
            "no PING ACK: {frames:?}"
        );
    }

    /// The connection sent GOAWAY with `code` as its last frame, reported
    /// the local error once, and is closed.
    pub fn expect_goaway(&mut self, code: ErrorCode) {
        let frames = self.take();
        let Some(pos) = frames.iter().position(|f| matches!(f, Rx::GoAway { .. })) else {
            panic!("expected GOAWAY {code:?}, got {frames:?}; {self:?}");
        };
        match &frames[pos] {
            Rx::GoAway { code: got, .. } => {
                assert_eq!(*got, code, "GOAWAY code; frames {frames:?}")
            }
            _ => unreachable!(),
        }
        assert_eq!(pos + 1, frames.len(), "frames after the GOAWAY: {frames:?}");
        assert!(self.conn.is_closed(), "closed after GOAWAY {code:?}");
        let closed: Vec<_> = self
            .log
            .iter()
            .filter_map(|e| match e {
                Ev::ConnectionClosed { error } => Some(*error),
                _ => None,
            })
            .collect();
        assert_eq!(closed.len(), 1, "one ConnectionClosed: {:?}", self.log);
        match closed[0] {
            Some(ConnectionError::Local { code: c, .. }) => assert_eq!(c, code),
            other => panic!("ConnectionClosed {other:?}, want Local {code:?}"),
        }
        assert_eq!(self.conn.error().map(|e| e.code()), Some(code));
        // Nothing more is read or written.
        self.send(&Self::ping([0; 8]));
        assert!(self.take().is_empty());
    }

    /// RST_STREAM frames in `frames` for `stream`.
    pub fn rsts(frames: &[Rx], stream: u32) -> Vec<ErrorCode> {
        frames
            .iter()
            .filter_map(|f| match f {
                Rx::Rst { stream: s, code } if *s == stream => Some(*code),
                _ => None,
            })
            .collect()
    }

    /// The connection reset `stream` with `code` and stayed up.
    pub fn expect_rst(&mut self, stream: u32, code: ErrorCode) {
        let frames = self.take();
        assert_eq!(
            Self::rsts(&frames, stream),
            vec![code],
            "RST_STREAM on {stream}: {frames:?}"
        );
        assert!(
            !frames.iter().any(|f| matches!(f, Rx::GoAway { .. })),
            "unexpected GOAWAY: {frames:?}"
        );
        assert!(!self.conn.is_closed());
    }

    /// Sum of WINDOW_UPDATE increments on `stream` in the wire log.
    pub fn window_updates(&self, stream: u32) -> u64 {
        self.wire
            .iter()
            .filter_map(|f| match f {
                Rx::WindowUpdate {
                    stream: s,
                    increment,
                } if *s == stream => Some(u64::from(*increment)),
                _ => None,
            })
            .sum()
    }
}

/// A frame as the parser sees it: a piece of a header block, or anything else.
enum Part {
    Block {
        stream: u32,
        fragment: Vec<u8>,
        end_stream: bool,
        end_headers: bool,
        first: bool,
    },
    Other(Rx),
}

fn frame_kind(buf: &[u8]) -> u8 {
    buf.get(3).copied().unwrap_or(0)
}

fn to_rx_parts(f: &Frame<'_>) -> Part {
    match *f {
        Frame::Headers {
            stream_id,
            fragment,
            end_stream,
            end_headers,
            ..
        } => Part::Block {
            stream: stream_id,
            fragment: fragment.to_vec(),
            end_stream,
            end_headers,
            first: true,
        },
        Frame::Continuation {
            stream_id,
            fragment,
            end_headers,
        } => Part::Block {
            stream: stream_id,
            fragment: fragment.to_vec(),
            end_stream: false,
            end_headers,
            first: false,
        },
        Frame::Data {
            stream_id,
            data,
            end_stream,
            pad_len,
        } => Part::Other(Rx::Data {
            stream: stream_id,
            data: data.to_vec(),
            end_stream,
            padded: pad_len.is_some(),
        }),
        Frame::Priority { stream_id, .. } => Part::Other(Rx::Priority { stream: stream_id }),
        Frame::RstStream { stream_id, code } => Part::Other(Rx::Rst {
            stream: stream_id,
            code,
        }),
        Frame::Settings { ack, params } => Part::Other(Rx::Settings {
            ack,
            params: params
                .chunks(6)
                .map(|c| {
                    let s = Setting::parse(&[c[0], c[1], c[2], c[3], c[4], c[5]]);
                    (s.id, s.value)
                })
                .collect(),
        }),
        Frame::PushPromise { stream_id, .. } => Part::Other(Rx::PushPromise { stream: stream_id }),
        Frame::Ping { ack, payload } => Part::Other(Rx::Ping { ack, payload }),
        Frame::GoAway {
            last_stream_id,
            code,
            debug,
        } => Part::Other(Rx::GoAway {
            last_stream_id,
            code,
            debug: String::from_utf8_lossy(debug).into_owned(),
        }),
        Frame::WindowUpdate {
            stream_id,
            increment,
        } => Part::Other(Rx::WindowUpdate {
            stream: stream_id,
            increment,
        }),
        Frame::Unknown { kind, .. } => Part::Other(Rx::Unknown { kind }),
    }
}

// ---------------------------------------------------------------------------
// Hand-made HPACK representations (RFC 7541 §6)
// ---------------------------------------------------------------------------

/// An HPACK integer with an `n`-bit prefix and the given high bits.
pub fn hpack_int(value: usize, n: u8, high: u8) -> Vec<u8> {
    let max = (1usize << n) - 1;
    if value < max {
        return vec![high | value as u8];
    }
    let mut out = vec![high | max as u8];
    let mut v = value - max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
    out
}

/// A raw (not Huffman) string literal.
pub fn hpack_str(s: &[u8]) -> Vec<u8> {
    let mut out = hpack_int(s.len(), 7, 0);
    out.extend_from_slice(s);
    out
}

/// A literal with incremental indexing and a new name (§6.2.1): the field
/// enters the decoder's dynamic table.
pub fn lit_inc(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x40];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// An indexed field (§6.1).
pub fn indexed(index: usize) -> Vec<u8> {
    hpack_int(index, 7, 0x80)
}

/// `:method POST`, `:scheme http`, `:path /` from the static table.
pub const STATIC_POST: [u8; 3] = [0x83, 0x86, 0x84];

/// Frame flags, for frames built with [`Peer::raw`].
pub const END_STREAM: u8 = flags::END_STREAM;
pub const END_HEADERS: u8 = flags::END_HEADERS;
pub const ACK: u8 = flags::ACK;
