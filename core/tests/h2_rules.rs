//! Scripted-peer tests: one connection of ours, and a peer that writes the
//! exact frames of each rule of RFC 9113 and of the gRPC binding
//! (`shared/spec/grpc-binding.txt`, "HTTP/2") and reads back what the
//! connection writes. Every test runs with the peer's bytes delivered whole
//! and one byte at a time, and with `InlineStorage` (`inline::NAME`) and
//! `GrowingStorage` (`growing::NAME`; see `rules!`).
// A panic in a test is a failed test, not peer input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use mcpwire_core::h2::frame::{MAX_WINDOW, PREFACE, Setting};
use mcpwire_core::h2::{Config, ConnectionError, ErrorCode, HeadersKind, Role, StreamError};
use mcpwire_core::time::Instant;
use support::h2::*;
use support::peer::*;

/// A server with four stream slots.
type Sv = Peer<4, 4096, 16384, 64>;
/// A client with 32 stream slots.
type Cl = Peer<32, 4096, 16384, 64>;
/// A client with one stream slot: every new stream reuses slot 0.
type Cl1 = Peer<1, 4096, 16384, 64>;
/// [`Sv`], [`Cl`] and [`Cl1`] with storage `St` (their frame builders do
/// not depend on it).
type SvWith<St> = Peer<4, 4096, BUF, 64, St>;
type ClWith<St> = Peer<32, 4096, BUF, 64, St>;
type Cl1With<St> = Peer<1, 4096, BUF, 64, St>;

const BUF: usize = 16384;

/// A storage the rules run with.
trait Rule: SimStorage<BUF> {}

impl<St: SimStorage<BUF>> Rule for St {}

const MODES: [Split; 2] = [Split::Whole, Split::ByteAtATime];

fn both(f: impl Fn(Split)) {
    for split in MODES {
        eprintln!("-- peer bytes delivered {split:?}");
        f(split);
    }
}

/// A server after the handshake.
fn server<St: Rule>(split: Split) -> SvWith<St> {
    server_with::<St>(Config::default(), split)
}

fn server_with<St: Rule>(config: Config, split: Split) -> SvWith<St> {
    let mut p = SvWith::<St>::server(config, split);
    p.handshake();
    p
}

fn client<St: Rule>(split: Split) -> ClWith<St> {
    let mut p = ClWith::<St>::client(Config::default(), split);
    p.handshake();
    p
}

fn req() -> Fields {
    request("/mcp.zig.transport.v1.Mcp/Call", &[])
}

/// The events the application saw for a stream id.
fn events_for<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>(
    p: &Peer<S, T, B, R, St>,
    handle: mcpwire_core::h2::StreamRef,
) -> Vec<Ev> {
    p.log
        .iter()
        .filter(|e| e.stream() == Some(handle))
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------------
// Preface and SETTINGS
// ---------------------------------------------------------------------------

fn server_settings_window_update_and_ack<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(Config::default(), split);
        let mut first = PREFACE.to_vec();
        first.extend(Sv::settings(&[]));
        p.send(&first);
        let frames = p.take();
        assert_eq!(
            frames,
            vec![
                Rx::Settings {
                    ack: false,
                    params: vec![
                        (Setting::HEADER_TABLE_SIZE, 4096),
                        (Setting::MAX_CONCURRENT_STREAMS, 4),
                        (Setting::INITIAL_WINDOW_SIZE, 1 << 20),
                        (Setting::MAX_FRAME_SIZE, 16_384),
                        (Setting::MAX_HEADER_LIST_SIZE, 16_384),
                    ]
                },
                // The binding's 4 MiB connection window.
                Rx::WindowUpdate {
                    stream: 0,
                    increment: (4 << 20) - 65_535
                },
                Rx::Settings {
                    ack: true,
                    params: vec![]
                },
            ]
        );
        assert_eq!(p.conn.poll_timeout(), Some(Instant::from_millis(10_000)));
        p.send(&Sv::settings_ack());
        assert!(p.take().is_empty());
        assert_eq!(p.conn.poll_timeout(), None);
        p.assert_request_works(1);
    });
}

fn client_preface_sends_enable_push_0_first<St: Rule>() {
    both(|split| {
        let mut p = ClWith::<St>::client(Config::default(), split);
        p.flush();
        let frames = p.take();
        let Some(Rx::Settings { ack: false, params }) = frames.first() else {
            panic!("the client's first frame after the preface: {frames:?}");
        };
        assert!(
            params.contains(&(Setting::ENABLE_PUSH, 0)),
            "SETTINGS_ENABLE_PUSH = 0: {params:?}"
        );
        assert!(frames.contains(&Rx::WindowUpdate {
            stream: 0,
            increment: (4 << 20) - 65_535
        }));
    });
}

fn invalid_preface_ends_the_connection<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(Config::default(), split);
        p.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let frames = p.take();
        assert!(p.conn.is_closed(), "{frames:?}");
        assert_eq!(
            p.conn.error().map(|e| e.code()),
            Some(ErrorCode::PROTOCOL_ERROR)
        );
        for f in &frames {
            if let Rx::GoAway { code, .. } = f {
                assert_eq!(*code, ErrorCode::PROTOCOL_ERROR);
            }
        }
    });
}

fn first_frame_must_be_settings<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(Config::default(), split);
        let mut first = PREFACE.to_vec();
        first.extend(Sv::ping([1; 8]));
        p.send(&first);
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn settings_ack_timeout_sends_goaway_settings_timeout<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(Config::default(), split);
        let mut first = PREFACE.to_vec();
        first.extend(Sv::settings(&[]));
        p.send(&first);
        p.take();
        // The peer never acknowledges.
        let deadline = p.conn.poll_timeout().expect("a deadline");
        assert_eq!(deadline, Instant::from_millis(10_000));
        p.conn.handle_timeout(Instant::from_millis(9_999));
        assert!(p.take().is_empty());
        p.conn.handle_timeout(deadline);
        p.drain();
        let frames = p.take();
        assert!(
            matches!(frames.as_slice(), [Rx::GoAway { code, .. }] if *code == ErrorCode::SETTINGS_TIMEOUT),
            "{frames:?}"
        );
        assert!(p.conn.is_closed());
        assert_eq!(p.conn.error(), Some(ConnectionError::SettingsTimeout));
        assert_eq!(
            p.log.last(),
            Some(&Ev::ConnectionClosed {
                error: Some(ConnectionError::SettingsTimeout)
            }),
            "the event says what error() says"
        );
    });
}

/// A server with a handshake timeout of 10 s and an idle timeout of 60 s.
fn idle_config() -> Config {
    Config {
        idle_timeout: Some(core::time::Duration::from_secs(60)),
        handshake_timeout: Some(core::time::Duration::from_secs(10)),
        ..Config::default()
    }
}

/// The connection said GOAWAY(NO_ERROR) as its last frame and closed
/// without an error (a graceful end).
fn expect_idle_goaway<St: Rule>(p: &mut SvWith<St>) {
    p.drain();
    let frames = p.take();
    assert!(
        matches!(frames.last(), Some(Rx::GoAway { code, .. }) if *code == ErrorCode::NO_ERROR),
        "{frames:?}"
    );
    assert!(p.conn.is_closed());
    assert_eq!(p.conn.error(), None);
}

/// A client that opens a connection and never sends its first request
/// (here: the preface's first octets only) is closed at the handshake
/// timeout with GOAWAY(NO_ERROR).
fn a_connection_without_a_first_request_ends_at_the_handshake_timeout<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(idle_config(), split);
        p.send(&PREFACE[..4]);
        p.take();
        assert_eq!(p.conn.poll_timeout(), Some(Instant::from_millis(10_000)));
        p.conn.handle_timeout(Instant::from_millis(9_999));
        assert!(p.take().is_empty() && !p.conn.is_closed());
        p.conn.handle_timeout(Instant::from_millis(10_000));
        expect_idle_goaway(&mut p);
    });
}

/// With no stream open the idle timeout runs from the last stream's end;
/// an open stream (a listen stream, a long call) is never idle.
fn a_connection_with_no_stream_open_ends_at_the_idle_timeout<St: Rule>() {
    both(|split| {
        let mut p = SvWith::<St>::server(idle_config(), split);
        let mut first = PREFACE.to_vec();
        first.extend(Sv::settings(&[]));
        first.extend(Sv::settings_ack());
        p.send(&first);
        p.take();
        assert_eq!(p.conn.poll_timeout(), Some(Instant::from_millis(10_000)));
        p.now = Instant::from_millis(5_000);
        p.request(1, &req(), false);
        assert_eq!(p.conn.poll_timeout(), None, "a stream is open");
        p.conn.handle_timeout(Instant::from_millis(1_000_000));
        assert!(p.take().is_empty() && !p.conn.is_closed());
        // The stream ends (the peer resets it) at 1,000 s: idle from then.
        p.now = Instant::from_millis(1_000_000);
        p.send(&Sv::rst(1, ErrorCode::CANCEL));
        p.take();
        assert_eq!(p.conn.poll_timeout(), Some(Instant::from_millis(1_060_000)));
        p.conn.handle_timeout(Instant::from_millis(1_059_999));
        assert!(p.take().is_empty() && !p.conn.is_closed());
        p.conn.handle_timeout(Instant::from_millis(1_060_000));
        expect_idle_goaway(&mut p);
    });
}

/// A stream marked with `drain_after_response` (Streamable HTTP: clients
/// send their whole body before they read) is read to its end after an
/// early response, its DATA dropped and its windows reopened, while the
/// body is within the discard budget; past it the rest is stopped with
/// RST_STREAM(NO_ERROR).
/// An unmarked stream is reset at once (the gRPC binding's rule).
fn an_early_response_drains_a_marked_request_up_to_the_budget<St: Rule>() {
    both(|split| {
        let config = Config {
            early_response_discard: 1000,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        let refused = fields(&[(":status", "413")]);
        let s = p.request(1, &req(), false);
        p.conn.drain_after_response(s);
        p.conn.send_headers(s, as_fields(&refused), true).unwrap();
        let frames = p.take();
        assert!(
            matches!(
                frames.as_slice(),
                [Rx::Headers {
                    stream: 1,
                    end_stream: true,
                    ..
                }]
            ),
            "{frames:?}"
        );
        p.send(&Sv::data(1, &[0; 600], false));
        p.send(&Sv::data(1, &[0; 300], true));
        let frames = p.take();
        assert!(Sv::rsts(&frames, 1).is_empty(), "{frames:?}");
        // The application sees none of the dropped body; the stream is over.
        assert!(
            !p.log.iter().any(|e| matches!(e, Ev::DataEnd { .. })),
            "{:?}",
            p.log
        );
        assert_eq!(p.conn.stream_id(s), None, "the stream ended");
        // Past the budget: reset.
        let s = p.request(3, &req(), false);
        p.conn.drain_after_response(s);
        p.conn.send_headers(s, as_fields(&refused), true).unwrap();
        p.take();
        p.send(&Sv::data(3, &[0; 1001], false));
        assert_eq!(Sv::rsts(&p.take(), 3), [ErrorCode::NO_ERROR]);
        // Unmarked: reset with the response.
        let s = p.request(5, &req(), false);
        p.conn.send_headers(s, as_fields(&refused), true).unwrap();
        assert_eq!(Sv::rsts(&p.take(), 5), [ErrorCode::NO_ERROR]);
        p.assert_request_works(7);
    });
}

fn client_refuses_enable_push_1_from_a_server<St: Rule>() {
    both(|split| {
        let mut p = ClWith::<St>::client(Config::default(), split);
        p.flush();
        p.take();
        p.send(&Cl::settings(&[(Setting::ENABLE_PUSH, 1)]));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

// ---------------------------------------------------------------------------
// PING
// ---------------------------------------------------------------------------

fn ping_is_answered_with_ack_and_the_same_payload<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::ping(*b"\x00\x01\x02\x03\xfc\xfd\xfe\xff"));
        assert_eq!(
            p.take(),
            vec![Rx::Ping {
                ack: true,
                payload: *b"\x00\x01\x02\x03\xfc\xfd\xfe\xff"
            }]
        );
        // An acknowledgement is reported, not answered.
        p.send(&Sv::frame(Frame::Ping {
            ack: true,
            payload: *b"pong!!!!",
        }));
        assert!(p.take().is_empty());
        assert_eq!(
            p.take_events(),
            vec![Ev::PingAck {
                payload: *b"pong!!!!"
            }]
        );
    });
}

fn a_ping_of_ours_is_written_once_and_its_ack_reported<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        assert!(p.conn.send_ping(*b"keep0001"));
        // One PING of ours waits at a time.
        assert!(!p.conn.send_ping(*b"keep0002"));
        p.flush();
        assert_eq!(
            p.take(),
            vec![Rx::Ping {
                ack: false,
                payload: *b"keep0001"
            }]
        );
        // Written: the next one can be queued.
        assert!(p.conn.send_ping(*b"keep0002"));
        p.flush();
        assert_eq!(p.take().len(), 1);
        // The acknowledgement is reported with the payload and not
        // answered; an acknowledgement of a PING never sent (RFC 9113 §6.7
        // asks nothing of it) is reported the same way, for the
        // application to tell apart, and the connection goes on.
        p.send(&Cl::frame(Frame::Ping {
            ack: true,
            payload: *b"keep0002",
        }));
        p.send(&Cl::frame(Frame::Ping {
            ack: true,
            payload: *b"stray!!!",
        }));
        assert!(p.take().is_empty());
        assert_eq!(
            p.take_events(),
            vec![
                Ev::PingAck {
                    payload: *b"keep0002"
                },
                Ev::PingAck {
                    payload: *b"stray!!!"
                }
            ]
        );
        p.assert_alive();
        // Over: no PING is queued.
        p.conn.abort(ErrorCode::NO_ERROR, "done");
        assert!(!p.conn.send_ping(*b"keep0003"));
    });
}

// ---------------------------------------------------------------------------
// Frame sizes (binding: wrong lengths are connection errors FRAME_SIZE_ERROR)
// ---------------------------------------------------------------------------

fn control_frames_of_the_wrong_length_are_frame_size_errors<St: Rule>() {
    // (frame type, flags, stream, payload length); stream 1 is open.
    let cases: [(u8, u8, u32, usize); 13] = [
        (0x6, 0, 0, 7),   // PING
        (0x6, 0, 0, 9),   // PING
        (0x2, 0, 1, 4),   // PRIORITY
        (0x2, 0, 1, 6),   // PRIORITY
        (0x3, 0, 1, 3),   // RST_STREAM
        (0x3, 0, 1, 5),   // RST_STREAM
        (0x4, 0, 0, 5),   // SETTINGS
        (0x4, 0, 0, 7),   // SETTINGS
        (0x4, ACK, 0, 6), // SETTINGS ACK with a payload
        (0x8, 0, 0, 3),   // WINDOW_UPDATE, connection
        (0x8, 0, 0, 5),
        (0x8, 0, 1, 3), // WINDOW_UPDATE, stream
        (0x8, 0, 1, 5),
    ];
    both(|split| {
        for (kind, fl, stream, len) in cases {
            eprintln!("frame type {kind:#x} flags {fl:#x} stream {stream} length {len}");
            let mut p = server::<St>(split);
            p.request(1, &req(), false);
            p.send(&Sv::raw(kind, fl, stream, &vec![0; len]));
            p.expect_goaway(ErrorCode::FRAME_SIZE_ERROR);
        }
    });
}

fn frames_over_max_frame_size_are_frame_size_errors<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        p.send(&Sv::data(1, &[0; 16_385], false));
        p.expect_goaway(ErrorCode::FRAME_SIZE_ERROR);

        let mut p = server::<St>(split);
        let mut block = p.block(&req());
        block.resize(16_385, 0);
        p.send(&Sv::headers_frame(1, &block, true));
        p.expect_goaway(ErrorCode::FRAME_SIZE_ERROR);
    });
}

// ---------------------------------------------------------------------------
// Stream states
// ---------------------------------------------------------------------------

fn data_on_stream_0_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::raw(0x0, 0, 0, b"x"));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn headers_on_an_even_stream_from_a_client_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let h = p.headers(2, &req(), true);
        p.send(&h);
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn data_on_an_idle_stream_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::data(1, b"x", false));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);

        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        p.send(&Sv::data(5, b"x", false));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn rst_stream_and_window_update_on_an_idle_stream_are_protocol_errors<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::rst(1, ErrorCode::CANCEL));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);

        let mut p = server::<St>(split);
        p.send(&Sv::window_update(3, 100));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

/// A header block on a closed stream we did not reset ends the connection.
/// The binding names PROTOCOL_ERROR; we keep RFC 9113 §5.1's STREAM_CLOSED
/// for a stream that was open and ended, because the conformance suite we
/// run (httpwg, `closed_sends_headers_frame`) requires GOAWAY(STREAM_CLOSED)
/// and fails on PROTOCOL_ERROR (issue #11 item 4). An id never opened is
/// PROTOCOL_ERROR (below), as both say.
fn headers_on_a_closed_stream_is_stream_closed<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), true);
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), true)
            .unwrap();
        p.take();
        assert_eq!(p.conn.stream_id(s), None, "stream 1 is closed");
        let h = p.headers(1, &req(), true);
        p.send(&h);
        // RFC 9113 §5.1: frames after END_STREAM on a closed stream are a
        // connection error of type STREAM_CLOSED.
        p.expect_goaway(ErrorCode::STREAM_CLOSED);
    });
}

/// RFC 9113 §5.1.1: a new stream id lower than one already opened is a
/// connection error of type PROTOCOL_ERROR.
fn headers_with_a_decreasing_stream_id_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.request(3, &req(), false);
        let h = p.headers(1, &req(), false);
        p.send(&h);
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn priority_on_an_idle_stream_is_harmless_and_self_dependency_resets<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::priority(9, 1));
        assert!(p.take().is_empty());
        p.assert_request_works(1);
        // HEADERS depending on itself: stream error PROTOCOL_ERROR (§5.3.1).
        let block = p.block(&req());
        let mut payload = 3u32.to_be_bytes().to_vec();
        payload.push(15);
        payload.extend_from_slice(&block);
        p.send(&Sv::raw(0x1, END_HEADERS | END_STREAM | 0x20, 3, &payload));
        p.expect_rst(3, ErrorCode::PROTOCOL_ERROR);
        p.assert_request_works(5);
    });
}

// ---------------------------------------------------------------------------
// Header blocks and CONTINUATION
// ---------------------------------------------------------------------------

fn a_header_block_split_over_continuation_frames_decodes<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut f = req();
        f.push((b"x-pad".to_vec(), vec![b'p'; 200]));
        let block = p.block(&f);
        // 1 HEADERS + 16 CONTINUATION: the default limit, accepted.
        let n = block.len() / 17;
        let mut parts: Vec<&[u8]> = (0..16).map(|i| &block[i * n..(i + 1) * n]).collect();
        parts.push(&block[16 * n..]);
        let mut bytes = Sv::frame(Frame::Headers {
            stream_id: 1,
            fragment: parts[0],
            end_stream: true,
            end_headers: false,
            pad_len: None,
        });
        for (i, part) in parts.iter().enumerate().skip(1) {
            bytes.extend(Sv::continuation(1, part, i == parts.len() - 1));
        }
        p.send(&bytes);
        let s = p.expect_request(1);
        assert!(p.take().is_empty());
        assert_eq!(p.data.get(&s), None);
    });
}

fn continuation_interleaving_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let others: [(&str, Vec<u8>); 5] = [
            ("DATA", Sv::data(1, b"x", false)),
            ("PING", Sv::ping([0; 8])),
            ("HEADERS on 3", Sv::headers_frame(3, &STATIC_POST, true)),
            ("CONTINUATION on 3", Sv::continuation(3, &[0x84], true)),
            ("PRIORITY", Sv::priority(1, 0)),
        ];
        for (what, other) in others {
            eprintln!("interrupted by {what}");
            let mut p = server::<St>(split);
            let mut bytes = Sv::frame(Frame::Headers {
                stream_id: 1,
                fragment: &STATIC_POST,
                end_stream: false,
                end_headers: false,
                pad_len: None,
            });
            bytes.extend(other);
            p.send(&bytes);
            p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
        }
        let mut p = server::<St>(split);
        p.send(&Sv::continuation(1, &STATIC_POST, true));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);
    });
}

fn too_many_continuation_frames_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut bytes = Sv::frame(Frame::Headers {
            stream_id: 1,
            fragment: &STATIC_POST,
            end_stream: true,
            end_headers: false,
            pad_len: None,
        });
        // 17 CONTINUATION frames, over the default of 16.
        for _ in 0..17 {
            bytes.extend(Sv::continuation(1, &[0x84], false));
        }
        p.send(&bytes);
        p.expect_goaway(ErrorCode::ENHANCE_YOUR_CALM);
    });
}

/// `block` as one HEADERS frame and CONTINUATION frames of at most `len`
/// octets of block each.
fn header_frames(stream_id: u32, block: &[u8], len: usize, end_stream: bool) -> Vec<u8> {
    let parts: Vec<&[u8]> = block.chunks(len).collect();
    let mut bytes = Sv::frame(Frame::Headers {
        stream_id,
        fragment: parts[0],
        end_stream,
        end_headers: parts.len() == 1,
        pad_len: None,
    });
    for (i, part) in parts.iter().enumerate().skip(1) {
        bytes.extend(Sv::continuation(stream_id, part, i == parts.len() - 1));
    }
    bytes
}

/// A literal without indexing with a new name (RFC 7541 §6.2.2).
fn lit_plain(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// The answer to a request head over the limits that did not end the
/// stream: `:status 431`, then RST_STREAM(NO_ERROR) (the binding's early
/// response), and the connection goes on.
fn expect_431_and_reset<St: Rule>(p: &mut SvWith<St>, stream: u32) {
    let frames = p.take();
    assert_eq!(
        frames,
        vec![
            Rx::Headers {
                stream,
                fields: fields(&[(":status", "431")]),
                end_stream: true,
                frames: 1
            },
            Rx::Rst {
                stream,
                code: ErrorCode::NO_ERROR
            }
        ]
    );
    assert!(p.take_events().is_empty(), "the application never sees it");
    assert!(!p.conn.is_closed());
}

/// The next request indexes the entries the refused block added: 62 =
/// x-after (newest), 63 = x-before.
fn expect_indexed_request<St: Rule>(p: &mut SvWith<St>, stream: u32) {
    let mut next = STATIC_POST.to_vec();
    next.extend(indexed(62));
    next.extend(indexed(63));
    p.send(&Sv::headers_frame(stream, &next, true));
    let ev = p.take_events();
    match ev.as_slice() {
        [
            Ev::Headers {
                kind: HeadersKind::Request,
                fields: f,
                ..
            },
        ] => {
            assert_eq!(get(f, "x-after"), Some("two"));
            assert_eq!(get(f, "x-before"), Some("one"));
        }
        other => panic!("{other:?}"),
    }
}

/// Header blocks are decoded as they arrive, so a block is not bounded by
/// the buffer: a 100 KB field in seven frames is over the field limit, the
/// stream gets 431 and the connection goes on, with the HPACK table in step
/// (binding: "the HPACK decoder reads the complete block. It applies each
/// change to the dynamic table").
fn a_100_kb_header_field_gets_431_and_the_table_stays_in_step<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut block = STATIC_POST.to_vec();
        block.extend(lit_inc(b"x-before", b"one"));
        block.extend(lit_plain(b"x-huge", &vec![b'h'; 100 * 1024]));
        block.extend(lit_inc(b"x-after", b"two"));
        assert!(block.len() > 6 * 16_384);
        p.send(&header_frames(1, &block, 16_384, false));
        expect_431_and_reset(&mut p, 1);
        expect_indexed_request(&mut p, 3);
        p.assert_request_works(5);
    });
}

/// A list over SETTINGS_MAX_HEADER_LIST_SIZE (16 KiB) whose block is
/// larger than the buffer, each field under the field limit: 431 too.
fn a_header_list_over_the_limit_in_many_frames_gets_431<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut block = STATIC_POST.to_vec();
        block.extend(lit_inc(b"x-before", b"one"));
        for i in 0..3u8 {
            block.extend(lit_plain(&[b'x', b'-', b'0' + i], &[b'l'; 7000]));
        }
        block.extend(lit_inc(b"x-after", b"two"));
        assert!(block.len() > BUF);
        p.send(&header_frames(1, &block, 5000, false));
        expect_431_and_reset(&mut p, 1);
        expect_indexed_request(&mut p, 3);
    });
}

/// The CONTINUATION flood limit holds whatever the fields: a 100 KB field in
/// 18 frames is cut off at the 17th with GOAWAY(ENHANCE_YOUR_CALM).
fn a_large_block_in_too_many_frames_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut block = STATIC_POST.to_vec();
        block.extend(lit_plain(b"x-huge", &vec![b'h'; 100 * 1024]));
        p.send(&header_frames(1, &block, block.len().div_ceil(18), true));
        p.expect_goaway(ErrorCode::ENHANCE_YOUR_CALM);
    });
}

/// A block with Huffman-coded literals that enter the dynamic table, cut
/// into HEADERS + CONTINUATION at every octet: the same request, and the
/// same table for the next one, as the uncut block.
fn a_block_cut_at_every_octet_decodes_like_the_whole_block<St: Rule>() {
    let huff = |s: &[u8]| {
        let mut code = vec![0; mcpwire_core::hpack::huffman::encoded_len(s)];
        let n = mcpwire_core::hpack::huffman::encode(s, &mut code).unwrap();
        let mut out = hpack_int(n, 7, 0x80);
        out.extend_from_slice(&code[..n]);
        out
    };
    let mut block = STATIC_POST.to_vec();
    block.extend([0x41]);
    block.extend(huff(b"example.com"));
    block.push(0x40);
    block.extend(huff(b"x-before"));
    block.extend(huff(b"one"));
    block.push(0x00);
    block.extend(huff(b"x-tail"));
    block.extend(huff(&[b'~'; 40]));
    block.extend(lit_inc(b"x-after", b"two"));
    let run = |cut: Option<usize>, split: Split| {
        let mut p = server::<St>(split);
        let bytes = match cut {
            None => Sv::headers_frame(1, &block, true),
            Some(i) => {
                let mut bytes = Sv::frame(Frame::Headers {
                    stream_id: 1,
                    fragment: &block[..i],
                    end_stream: true,
                    end_headers: false,
                    pad_len: None,
                });
                bytes.extend(Sv::continuation(1, &block[i..], true));
                bytes
            }
        };
        p.send(&bytes);
        let first = p.take_events();
        expect_indexed_request(&mut p, 3);
        first
    };
    let want = run(None, Split::Whole);
    match want.as_slice() {
        [Ev::Headers { fields: f, .. }] => {
            assert_eq!(get(f, ":authority"), Some("example.com"));
            assert_eq!(get(f, "x-tail"), Some("~".repeat(40).as_str()));
        }
        other => panic!("{other:?}"),
    }
    for split in MODES {
        for i in 0..=block.len() {
            assert_eq!(run(Some(i), split), want, "cut at {i}, {split:?}");
        }
    }
}

fn hpack_garbage_is_a_compression_error<St: Rule>() {
    let blocks: [(&str, Vec<u8>); 5] = [
        ("index 0", vec![0x80]),
        ("index past the tables", vec![0x83, 0xff, 0x80, 0x01]),
        (
            "integer overflow",
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
        ("size update over the maximum", vec![0x3f, 0xe1, 0xff, 0x03]),
        ("Huffman EOS", vec![0x00, 0x81, 0xff, 0x81, 0xff]),
    ];
    both(|split| {
        for (what, block) in &blocks {
            eprintln!("{what}");
            let mut p = server::<St>(split);
            p.send(&Sv::headers_frame(1, block, true));
            p.expect_goaway(ErrorCode::COMPRESSION_ERROR);
        }
    });
}

/// Binding: "A string length past the end of the block makes the block not
/// valid, also when the string is over max_field_size. The connection then
/// ends with PROTOCOL_ERROR" — not a 431, and not RFC 9113 §4.3's
/// COMPRESSION_ERROR, which stays the answer for other undecodable blocks
/// (httpwg's `invalid_header_block_fragment`, a block that ends before a
/// string's length, expects it; see `a_block_ending_before_a_string_length_is_a_compression_error`).
fn a_truncated_string_over_max_field_size_ends_the_connection<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut block = STATIC_POST.to_vec();
        block.extend([0x00, 0x01, b'x']);
        block.extend(hpack_int(100_000, 7, 0));
        block.extend([b'v'; 10]);
        p.send(&Sv::headers_frame(1, &block, true));
        let frames = p.take();
        assert!(
            !frames.iter().any(|f| matches!(f, Rx::Headers { .. })),
            "no 431 for a broken block: {frames:?}"
        );
        let code = frames.iter().find_map(|f| match f {
            Rx::GoAway { code, .. } => Some(*code),
            _ => None,
        });
        assert_eq!(code, Some(ErrorCode::PROTOCOL_ERROR), "{frames:?}");
        assert!(p.conn.is_closed());
    });
}

/// The same string past the end, short of any limit: PROTOCOL_ERROR; and a
/// block that ends before a string's length (httpwg's
/// `invalid_header_block_fragment`, RFC 9113 §4.3): COMPRESSION_ERROR.
fn a_block_ending_before_a_string_length_is_a_compression_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut block = STATIC_POST.to_vec();
        block.extend([0x00, 0x01, b'x', 0x05, b'v']);
        p.send(&Sv::headers_frame(1, &block, true));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);

        let mut p = server::<St>(split);
        p.send(&Sv::headers_frame(1, &[0x40], true));
        p.expect_goaway(ErrorCode::COMPRESSION_ERROR);
    });
}

// ---------------------------------------------------------------------------
// Malformed requests: RST_STREAM(PROTOCOL_ERROR), the connection goes on
// ---------------------------------------------------------------------------

fn malformed_heads() -> Vec<(&'static str, Fields)> {
    let base = |extra: &[(&str, &str)]| request("/x", extra);
    vec![
        ("uppercase name", base(&[("X-Upper", "1")])),
        (
            "missing :path",
            fields(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "a"),
            ]),
        ),
        ("connection header", base(&[("connection", "keep-alive")])),
        (
            "transfer-encoding",
            base(&[("transfer-encoding", "chunked")]),
        ),
        ("te: gzip", base(&[("te", "gzip")])),
        (
            "pseudo after regular",
            fields(&[
                (":method", "POST"),
                (":scheme", "http"),
                ("x-a", "1"),
                (":path", "/x"),
            ]),
        ),
        (
            "unknown pseudo",
            base(&[])
                .into_iter()
                .chain(fields(&[(":foo", "1")]))
                .collect(),
        ),
        (
            "duplicate :method",
            fields(&[
                (":method", "POST"),
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/x"),
            ]),
        ),
        (
            "empty :path",
            fields(&[(":method", "POST"), (":scheme", "http"), (":path", "")]),
        ),
        ("value with a leading space", base(&[("x-a", " 1")])),
        (":status in a request", base(&[(":status", "200")])),
        ("invalid content-length", base(&[("content-length", "1x")])),
    ]
}

fn malformed_requests_are_reset_and_the_connection_goes_on<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut id = 1;
        // Three rounds: more malformed requests than stream slots (4), so
        // none may count against the concurrency limit.
        for round in 0..3 {
            for (what, head) in malformed_heads() {
                eprintln!("round {round}: {what} on stream {id}");
                let h = p.headers(id, &head, true);
                p.send(&h);
                p.expect_rst(id, ErrorCode::PROTOCOL_ERROR);
                assert!(
                    p.take_events().is_empty(),
                    "the application never sees a malformed request ({what})"
                );
                id += 2;
            }
        }
        assert_eq!(p.conn.open_streams(), (0, 0));
        p.assert_request_works(id);
    });
}

/// content-length against the DATA that arrives (RFC 9113 §8.1.1).
fn content_length_mismatches_are_reset<St: Rule>() {
    // (what, body frames for stream `id`, trailers follow, reset expected);
    // content-length is 5.
    type Case = (&'static str, fn(u32) -> Vec<Vec<u8>>, bool, bool);
    let cases: [Case; 9] = [
        (
            "longer",
            |id| vec![Sv::data(id, &[1; 10], true)],
            false,
            true,
        ),
        (
            "shorter",
            |id| vec![Sv::data(id, &[1; 3], true)],
            false,
            true,
        ),
        (
            "shorter, then trailers",
            |id| vec![Sv::data(id, &[1; 3], false)],
            true,
            true,
        ),
        (
            "exact",
            |id| vec![Sv::data(id, &[1; 5], true)],
            false,
            false,
        ),
        (
            "exact, then trailers",
            |id| vec![Sv::data(id, &[1; 5], false)],
            true,
            false,
        ),
        (
            "exact in pieces, empty end",
            |id| {
                vec![
                    Sv::data(id, &[1; 2], false),
                    Sv::data(id, &[1; 3], false),
                    Sv::data(id, &[], true),
                ]
            },
            false,
            false,
        ),
        (
            "exact with padding",
            |id| vec![Sv::padded_data(id, &[1; 5], 10, true)],
            false,
            false,
        ),
        (
            "longer with padding",
            |id| vec![Sv::padded_data(id, &[1; 6], 10, true)],
            false,
            true,
        ),
        (
            "shorter with padding",
            |id| vec![Sv::padded_data(id, &[1; 4], 10, true)],
            false,
            true,
        ),
    ];
    both(|split| {
        let mut p = server::<St>(split);
        let mut id = 1;
        for (what, body, trailers, reset) in cases {
            eprintln!("{what} on stream {id}");
            let head = request("/x", &[("content-length", "5")]);
            let s = p.request(id, &head, false);
            for f in body(id) {
                p.send(&f);
            }
            if trailers {
                let t = p.headers(id, &fields(&[("x-t", "1")]), true);
                p.send(&t);
            }
            let frames = p.take();
            let events = events_for(&p, s);
            if reset {
                assert_eq!(
                    Sv::rsts(&frames, id),
                    vec![ErrorCode::PROTOCOL_ERROR],
                    "{what}: {frames:?}"
                );
                assert!(
                    events.contains(&Ev::Reset {
                        stream: s,
                        code: ErrorCode::PROTOCOL_ERROR,
                        remote: false
                    }),
                    "{what}: the application learns of the reset: {events:?}"
                );
            } else {
                assert!(Sv::rsts(&frames, id).is_empty(), "{what}: {frames:?}");
                assert_eq!(p.data.get(&s).map(Vec::len), Some(5), "{what}");
                let ended = events.iter().any(|e| {
                    matches!(
                        e,
                        Ev::DataEnd { .. }
                            | Ev::Headers {
                                end_stream: true,
                                ..
                            }
                    )
                });
                assert!(ended, "{what}: {events:?}");
                // Answer, so the stream closes.
                p.conn
                    .send_headers(s, as_fields(&response("200", &[])), true)
                    .unwrap();
                p.take();
            }
            p.events.clear();
            id += 2;
        }
        // HEADERS with END_STREAM and a non-zero content-length.
        let head = request("/x", &[("content-length", "5")]);
        let h = p.headers(id, &head, true);
        p.send(&h);
        p.expect_rst(id, ErrorCode::PROTOCOL_ERROR);
        let events = p.take_events();
        assert!(
            events.is_empty()
                || matches!(events.as_slice(), [Ev::Headers { .. }, Ev::Reset { .. }]),
            "a Reset only for a stream the application saw: {events:?}"
        );
        p.assert_request_works(id + 2);
        assert_eq!(
            p.conn.recv_window(),
            4 << 20,
            "every DATA octet returned to the connection window once"
        );
    });
}

// ---------------------------------------------------------------------------
// Header lists over the limit: 431, and the HPACK table stays in step
// ---------------------------------------------------------------------------

fn a_header_list_over_the_limit_gets_431_and_the_next_block_decodes<St: Rule>() {
    both(|split| {
        let config = Config {
            max_header_list_size: 1024,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        // The oversize block adds two entries to the dynamic table.
        let mut block = STATIC_POST.to_vec();
        block.extend(lit_inc(b"x-small", b"abc"));
        block.extend(lit_inc(b"x-big", &[b'b'; 1500]));
        p.send(&Sv::headers_frame(1, &block, false));
        let frames = p.take();
        assert_eq!(
            frames,
            vec![
                Rx::Headers {
                    stream: 1,
                    fields: fields(&[(":status", "431")]),
                    end_stream: true,
                    frames: 1
                },
                Rx::Rst {
                    stream: 1,
                    code: ErrorCode::NO_ERROR
                }
            ]
        );
        assert!(p.take_events().is_empty(), "the application never sees it");
        // The rest of the request is dropped without error.
        p.send(&Sv::data(1, &[0; 1000], true));
        assert!(
            p.take()
                .iter()
                .all(|f| matches!(f, Rx::WindowUpdate { .. }))
        );
        // The next request uses both entries: 62 = x-big (newest), 63 = x-small.
        let mut next = STATIC_POST.to_vec();
        next.extend(indexed(63));
        p.send(&Sv::headers_frame(3, &next, true));
        let ev = p.take_events();
        match ev.as_slice() {
            [
                Ev::Headers {
                    kind: HeadersKind::Request,
                    fields: f,
                    ..
                },
            ] => assert_eq!(get(f, "x-small"), Some("abc")),
            other => panic!("{other:?}"),
        }
        assert_eq!(p.conn.open_streams(), (1, 0));
    });
}

fn a_field_over_max_field_size_gets_431_too<St: Rule>() {
    both(|split| {
        let config = Config {
            max_field_size: 1000,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        let mut block = STATIC_POST.to_vec();
        block.extend(lit_inc(b"x-big", &[b'b'; 1500]));
        p.send(&Sv::headers_frame(1, &block, true));
        let frames = p.take();
        assert!(
            matches!(frames.first(), Some(Rx::Headers { stream: 1, fields: f, end_stream: true, .. })
                if get(f, ":status") == Some("431")),
            "{frames:?}"
        );
        // The request had ended: with the 431 the stream is closed, and no
        // frame but PRIORITY may follow on it (RFC 9113 §5.1).
        assert_eq!(frames.len(), 1, "RST_STREAM on a closed stream: {frames:?}");
        let mut next = STATIC_POST.to_vec();
        next.extend(indexed(62));
        p.send(&Sv::headers_frame(3, &next, true));
        // x-big is still over the field limit: 431 again, connection up.
        let frames = p.take();
        assert!(
            frames
                .iter()
                .any(|f| matches!(f, Rx::Headers { stream: 3, .. })),
            "{frames:?}"
        );
        p.assert_request_works(5);
    });
}

/// Trailers over the limit after the response started: a second `:status`
/// block would be malformed (RFC 9113 §8.1), so the stream is reset, and the
/// application, which saw the request, learns of it.
fn oversize_trailers_after_the_response_started_reset_the_stream<St: Rule>() {
    both(|split| {
        let config = Config {
            max_header_list_size: 1024,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        let s = p.request(1, &req(), false);
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), false)
            .unwrap();
        let frames = p.take();
        assert_eq!(frames.len(), 1);
        let trailers = lit_inc(b"x-big", &[b'b'; 1500]);
        p.send(&Sv::headers_frame(1, &trailers, true));
        let frames = p.take();
        assert!(
            !frames.iter().any(|f| matches!(f, Rx::Headers { .. })),
            "no second response head on stream 1: {frames:?}"
        );
        assert_eq!(Sv::rsts(&frames, 1).len(), 1, "{frames:?}");
        assert!(
            events_for(&p, s)
                .iter()
                .any(|e| matches!(e, Ev::Reset { .. })),
            "the application learns its stream is gone: {:?}",
            events_for(&p, s)
        );
        p.assert_request_works(3);
    });
}

// ---------------------------------------------------------------------------
// Remembered resets
// ---------------------------------------------------------------------------

fn trailers_on_a_stream_we_reset_are_decoded_and_ignored<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), false);
        p.conn.reset(s, ErrorCode::CANCEL).unwrap();
        assert_eq!(
            p.take(),
            vec![Rx::Rst {
                stream: 1,
                code: ErrorCode::CANCEL
            }]
        );
        // What the client sent before the reset arrived.
        let mut late = Sv::data(1, &[9; 3000], false);
        late.extend(Sv::padded_data(1, &[9; 100], 50, false));
        late.extend(Sv::headers_frame(1, &lit_inc(b"x-t", b"late"), true));
        p.send(&late);
        let frames = p.take();
        assert!(
            frames.iter().all(|f| matches!(f, Rx::WindowUpdate { .. })),
            "{frames:?}"
        );
        let ev = p.take_events();
        assert!(
            !ev.iter()
                .any(|e| matches!(e, Ev::Headers { .. } | Ev::DataEnd { .. })),
            "nothing of the reset stream reaches the application: {ev:?}"
        );
        assert!(p.data.get(&s).is_none_or(Vec::is_empty), "no DATA either");
        // The table kept the trailer's entry.
        let mut next = STATIC_POST.to_vec();
        next.extend(indexed(62));
        p.send(&Sv::headers_frame(3, &next, true));
        match p.take_events().as_slice() {
            [Ev::Headers { fields: f, .. }] => assert_eq!(get(f, "x-t"), Some("late")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            p.conn.recv_window(),
            4 << 20,
            "the octets of the dropped DATA return to the connection window once"
        );
    });
}

/// DATA that nobody takes returns to the connection window exactly once,
/// whatever the reason it is dropped (h2's CHANGELOG: connection-window
/// leaks through padding, frames on reset streams, DATA after GOAWAY).
fn dropped_data_returns_to_the_connection_window_exactly_once<St: Rule>() {
    both(|split| {
        let w = 4 << 20;
        // A stream the server reset.
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), false);
        p.conn.reset(s, ErrorCode::CANCEL).unwrap();
        p.take();
        p.send(&Sv::data(1, &[0; 10_000], false));
        p.send(&Sv::padded_data(1, &[0; 1000], 200, false));
        assert_eq!(p.conn.recv_window(), w, "reset stream");

        // A stream refused for the concurrency limit.
        let config = Config {
            max_concurrent_streams: 1,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        p.request(1, &req(), false);
        let mut b = p.headers(3, &req(), false);
        b.extend(Sv::data(3, &[0; 5000], true));
        p.send(&b);
        assert_eq!(Sv::rsts(&p.take(), 3), vec![ErrorCode::REFUSED_STREAM]);
        assert_eq!(p.conn.recv_window(), w, "refused stream");

        // A stream the peer broke content-length on.
        let mut p = server::<St>(split);
        p.request(1, &request("/x", &[("content-length", "1")]), false);
        p.send(&Sv::data(1, &[0; 7000], false));
        assert_eq!(Sv::rsts(&p.take(), 1), vec![ErrorCode::PROTOCOL_ERROR]);
        p.send(&Sv::data(1, &[0; 7000], true));
        assert_eq!(p.conn.recv_window(), w, "stream reset for content-length");

        // A stream above the last id of our GOAWAY.
        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        p.conn.go_away(ErrorCode::NO_ERROR);
        p.take();
        let mut b = p.headers(3, &req(), false);
        b.extend(Sv::data(3, &[0; 4000], true));
        b.extend(Sv::data(1, &[0; 4000], false));
        p.send(&b);
        p.take();
        assert_eq!(p.data.values().map(Vec::len).sum::<usize>(), 4000);
        assert_eq!(p.conn.recv_window(), w, "stream after GOAWAY");

        // Padding on a live stream.
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), false);
        p.send(&Sv::padded_data(1, &[0; 100], 255, false));
        assert_eq!(p.data.get(&s).map(Vec::len), Some(100));
        assert_eq!(p.conn.recv_window(), w, "padding");
    });
}

/// Resets a server remembers (the `R` of [`SvWith`]: the binding's
/// figure).
const RESETS: u32 = 64;

/// Streams the server resets in [`reset_while_answering`]: eight more than
/// it remembers, so the first eight are forgotten.
const RESET_STREAMS: u32 = RESETS + 8;

/// The id of the `i`th stream of [`reset_while_answering`] (from 0).
fn nth_id(i: u32) -> u32 {
    2 * i + 1
}

/// A server that answered [`RESET_STREAMS`] requests, one after the other
/// on streams 1, 3, 5, …, with a head and DATA and then reset each with
/// CANCEL (a handler that stopped mid-answer) while the client had not
/// ended its request: each RST_STREAM follows the stream's DATA.
fn reset_while_answering<St: Rule>(split: Split) -> SvWith<St> {
    assert_eq!(RESETS as usize, mcpwire_core::mcp::REMEMBERED_RESETS);
    let mut p = server::<St>(split);
    for i in 0..RESET_STREAMS {
        let id = nth_id(i);
        let s = p.request(id, &req(), false);
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), false)
            .unwrap();
        assert_eq!(p.conn.send_data(s, &[7; 100], false), Ok(100));
        p.conn.reset(s, ErrorCode::CANCEL).unwrap();
        let frames = p.take();
        assert!(
            matches!(
                frames.as_slice(),
                [
                    Rx::Headers { stream: a, end_stream: false, .. },
                    Rx::Data { stream: b, end_stream: false, .. },
                    Rx::Rst { stream: c, code: ErrorCode::CANCEL },
                ] if [*a, *b, *c] == [id; 3]
            ),
            "stream {id}: {frames:?}"
        );
    }
    assert_eq!(p.conn.open_streams(), (0, 0));
    p
}

/// What a client sends on a stream the server reset before the reset
/// reached it: the rest of the request body, a WINDOW_UPDATE for the
/// answer's DATA, its trailers (`trailers`: a header block), a reset of
/// its own and a PRIORITY.
fn late_frames(id: u32, trailers: &[u8]) -> Vec<u8> {
    let mut late = Sv::data(id, &[9; 50], false);
    late.extend(Sv::padded_data(id, &[9; 20], 30, false));
    late.extend(Sv::window_update(id, 1000));
    late.extend(Sv::headers_frame(id, trailers, true));
    late.extend(Sv::rst(id, ErrorCode::CANCEL));
    late.extend(Sv::priority(id, 0));
    late
}

/// RFC 9113 §5.1 ("closed"): an endpoint must ignore the frames it
/// receives on a stream after it sent RST_STREAM. The server remembers its
/// last [`RESETS`] resets (`remember_reset`): late frames on each of them
/// are ignored — no RST_STREAM, no GOAWAY, no event — their DATA returns to
/// the connection window, and their header blocks are decoded (the HPACK
/// table stays in step with the client's).
fn late_frames_on_the_last_64_streams_reset_are_ignored<St: Rule>() {
    both(|split| {
        let mut p = reset_while_answering::<St>(split);
        let window = p.conn.recv_window();
        let remembered = RESET_STREAMS - RESETS..RESET_STREAMS;
        let mut late = Vec::new();
        for i in remembered.clone() {
            // The oldest remembered stream's trailers add a table entry
            // (`x-t: late`, index 62) that the next request refers to.
            let trailers = if i == remembered.start {
                lit_inc(b"x-t", b"late")
            } else {
                p.block(&fields(&[("grpc-status", "1")]))
            };
            late.extend(late_frames(nth_id(i), &trailers));
        }
        p.send(&late);
        let frames = p.take();
        assert!(
            frames
                .iter()
                .all(|f| matches!(f, Rx::WindowUpdate { stream: 0, .. })),
            "only the connection window is given back: {frames:?}"
        );
        assert_eq!(
            p.take_events(),
            vec![],
            "nothing of a reset stream reaches the application"
        );
        assert!(p.data.values().all(Vec::is_empty), "no DATA either");
        assert!(!p.conn.is_closed());
        assert_eq!(
            p.conn.recv_window(),
            window,
            "the late DATA returned to the connection window"
        );
        // The table kept the entry of the oldest remembered stream.
        let next = nth_id(RESET_STREAMS);
        let mut block = STATIC_POST.to_vec();
        block.extend(indexed(62));
        p.send(&Sv::headers_frame(next, &block, true));
        match p.take_events().as_slice() {
            [Ev::Headers { fields: f, .. }] => assert_eq!(get(f, "x-t"), Some("late")),
            other => panic!("{other:?}"),
        }
        p.assert_request_works(next + 2);
    });
}

/// Past [`RESETS`], the oldest reset goes: a stream reset before the last
/// 64 is a closed stream the server no longer remembers. DATA or HEADERS
/// there is then a connection error of type STREAM_CLOSED, as on any
/// closed stream (RFC 9113 §5.1 lets an endpoint stop ignoring frames on a
/// stream it reset; §5.4.1 lets it end the connection on a stream error;
/// STREAM_CLOSED is what `headers_on_a_closed_stream_is_stream_closed`
/// sends). WINDOW_UPDATE, RST_STREAM and PRIORITY stay harmless on any
/// closed stream (§6.9: not an error; §5.1: ignored).
fn frames_on_a_reset_stream_past_the_last_64_end_the_connection<St: Rule>() {
    both(|split| {
        let forgotten = 0..RESET_STREAMS - RESETS;
        let mut p = reset_while_answering::<St>(split);
        let mut harmless = Vec::new();
        for i in forgotten.clone() {
            harmless.extend(Sv::window_update(nth_id(i), 1000));
            harmless.extend(Sv::rst(nth_id(i), ErrorCode::CANCEL));
            harmless.extend(Sv::priority(nth_id(i), 0));
        }
        p.send(&harmless);
        assert_eq!(p.take(), vec![]);
        p.assert_alive();

        // The oldest stream, and the newest the server forgot (the one
        // reset just before the 64 it remembers).
        for id in [nth_id(forgotten.start), nth_id(forgotten.end - 1)] {
            let mut p = reset_while_answering::<St>(split);
            p.send(&Sv::data(id, &[9; 50], false));
            p.expect_goaway(ErrorCode::STREAM_CLOSED);

            let mut p = reset_while_answering::<St>(split);
            let h = p.headers(id, &fields(&[("grpc-status", "1")]), true);
            p.send(&h);
            p.expect_goaway(ErrorCode::STREAM_CLOSED);
        }
    });
}

// ---------------------------------------------------------------------------
// Flow control
// ---------------------------------------------------------------------------

fn window_update_of_zero<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::window_update(0, 0));
        p.expect_goaway(ErrorCode::PROTOCOL_ERROR);

        let mut p = server::<St>(split);
        let s = p.request(1, &req(), false);
        p.send(&Sv::window_update(1, 0));
        p.expect_rst(1, ErrorCode::PROTOCOL_ERROR);
        assert!(events_for(&p, s).contains(&Ev::Reset {
            stream: s,
            code: ErrorCode::PROTOCOL_ERROR,
            remote: false
        }));
        p.assert_request_works(3);
    });
}

fn window_overflow_past_2_31_minus_1<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        // The connection send window is 65535; this takes it past 2^31-1.
        p.send(&Sv::window_update(0, MAX_WINDOW));
        p.expect_goaway(ErrorCode::FLOW_CONTROL_ERROR);

        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        p.send(&Sv::window_update(1, MAX_WINDOW - 65_535));
        assert!(p.take().is_empty(), "exactly 2^31-1 is fine");
        p.send(&Sv::window_update(1, 1));
        p.expect_rst(1, ErrorCode::FLOW_CONTROL_ERROR);
        p.assert_request_works(3);
    });
}

fn data_beyond_the_stream_window_is_a_flow_control_error<St: Rule>() {
    both(|split| {
        let config = Config {
            initial_window_size: 65_535,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        p.release = false;
        let s = p.request(1, &req(), false);
        for chunk in [16_384, 16_384, 16_384, 16_383] {
            p.send(&Sv::data(1, &vec![1; chunk], false));
        }
        assert!(p.take().is_empty(), "a full window is fine");
        assert_eq!(p.data.get(&s).map(Vec::len), Some(65_535));
        p.send(&Sv::data(1, &[1], false));
        p.expect_rst(1, ErrorCode::FLOW_CONTROL_ERROR);
        p.assert_request_works(3);
    });
}

fn data_beyond_the_connection_window_is_a_flow_control_error<St: Rule>() {
    both(|split| {
        let config = Config {
            connection_window_size: 65_535,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        p.release = false;
        p.request(1, &req(), false);
        p.request(3, &req(), false);
        // 65535 in all, over two streams.
        for (id, chunk) in [(1, 16_384), (3, 16_384), (1, 16_384), (3, 16_383)] {
            p.send(&Sv::data(id, &vec![1; chunk], false));
        }
        assert!(p.take().is_empty());
        p.send(&Sv::data(1, &[1], false));
        p.expect_goaway(ErrorCode::FLOW_CONTROL_ERROR);
    });
}

/// RFC 9113 §6.9.3: a receiver that advertises a window below 65535 "MUST
/// be prepared to receive data that exceeds this window size, since the
/// sender might send data that exceeds the lower limit prior to processing
/// the SETTINGS frame".
fn a_smaller_initial_window_tolerates_data_sent_before_the_settings_arrived<St: Rule>() {
    both(|split| {
        let config = Config {
            initial_window_size: 16_384,
            ..Config::default()
        };
        let mut p = SvWith::<St>::server(config, split);
        p.release = false;
        let mut first = PREFACE.to_vec();
        first.extend(Sv::settings(&[]));
        let h = p.headers(1, &req(), false);
        first.extend(h);
        // The client has not seen our SETTINGS: 65535 is its stream window.
        for chunk in [16_384, 16_384, 16_384, 16_383] {
            first.extend(Sv::data(1, &vec![1; chunk], false));
        }
        p.send(&first);
        let frames = p.take();
        assert!(Sv::rsts(&frames, 1).is_empty(), "{frames:?}");
        assert_eq!(p.data.values().map(Vec::len).sum::<usize>(), 65_535);
    });
}

fn initial_window_size_changes_move_open_streams_even_below_zero<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), true);
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), false)
            .unwrap();
        let body = vec![7u8; 200_000];
        let mut sent = 0;
        // Fill the stream (and connection) window of 65535.
        loop {
            let n = p.conn.send_data(s, &body[sent..], true).unwrap();
            sent += n;
            p.flush();
            if n == 0 {
                break;
            }
        }
        assert_eq!(sent, 65_535);
        let data = |frames: &[Rx]| -> usize {
            frames
                .iter()
                .map(|f| match f {
                    Rx::Data { data, .. } => data.len(),
                    _ => 0,
                })
                .sum()
        };
        assert_eq!(data(&p.take()), 65_535);
        // Open the connection window wide: the stream window still holds.
        p.send(&Sv::window_update(0, 1 << 20));
        assert_eq!(data(&p.take()), 0);
        p.events.clear();
        // 65535 → 64535: the stream window is now -1000.
        p.send(&Sv::settings(&[(Setting::INITIAL_WINDOW_SIZE, 64_535)]));
        assert_eq!(
            p.take(),
            vec![Rx::Settings {
                ack: true,
                params: vec![]
            }]
        );
        assert_eq!(p.conn.send_capacity(s), 0);
        // +1000: back to 0, still nothing to send, no wake-up.
        p.send(&Sv::window_update(1, 1000));
        assert!(p.take().is_empty());
        assert!(!p.take_events().contains(&Ev::SendReady { stream: s }));
        // +500: 500 octets may go.
        p.send(&Sv::window_update(1, 500));
        assert!(p.take_events().contains(&Ev::SendReady { stream: s }));
        let n = p.conn.send_data(s, &body[sent..], true).unwrap();
        sent += n;
        assert_eq!(n, 500);
        assert_eq!(data(&p.take()), 500);
        // 64535 → 74535: +10000 on the open stream.
        p.send(&Sv::settings(&[(Setting::INITIAL_WINDOW_SIZE, 74_535)]));
        assert!(p.take_events().contains(&Ev::SendReady { stream: s }));
        let n = p.conn.send_data(s, &body[sent..], true).unwrap();
        assert_eq!(n, 10_000);
        let frames = p.take();
        assert_eq!(data(&frames), 10_000);
    });
}

fn initial_window_size_over_the_maximum_is_a_flow_control_error<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.send(&Sv::settings(&[(
            Setting::INITIAL_WINDOW_SIZE,
            MAX_WINDOW + 1,
        )]));
        p.expect_goaway(ErrorCode::FLOW_CONTROL_ERROR);

        // A change that takes an open stream's window past 2^31-1.
        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        p.send(&Sv::window_update(1, MAX_WINDOW - 65_535));
        p.send(&Sv::settings(&[(Setting::INITIAL_WINDOW_SIZE, 65_536)]));
        p.expect_goaway(ErrorCode::FLOW_CONTROL_ERROR);
    });
}

// ---------------------------------------------------------------------------
// Floods (FloodLimits defaults: 100 per 10 s, 1000 resets per 10 s)
// ---------------------------------------------------------------------------

/// After a flood the connection has closed cleanly: one GOAWAY, one event,
/// nothing read any more; its memory is its `size_of`, whatever it read.
fn assert_calm<St: Rule>(p: &mut SvWith<St>) {
    p.expect_goaway(ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(
        std::mem::size_of_val(&*p.conn),
        std::mem::size_of::<mcpwire_core::h2::Connection<4, 4096, BUF, 64, St>>()
    );
}

fn ping_flood_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let pings: Vec<u8> = (0..100u8).flat_map(|i| Sv::ping([i; 8])).collect();
        p.send(&pings);
        let acks = p
            .take()
            .iter()
            .filter(|f| matches!(f, Rx::Ping { ack: true, .. }))
            .count();
        assert_eq!(acks, 100);
        p.send(&Sv::ping([0xff; 8]));
        assert_calm(&mut p);
    });
}

fn pings_under_the_limit_in_each_period_are_fine<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        for period in 0..3u64 {
            p.now = Instant::from_millis(period * 10_001);
            let pings: Vec<u8> = (0..100u8).flat_map(|i| Sv::ping([i; 8])).collect();
            p.send(&pings);
            assert_eq!(p.take().len(), 100);
        }
        p.now = Instant::from_millis(3 * 10_001);
        p.assert_alive();
    });
}

fn settings_flood_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        // The handshake's SETTINGS was the first of the period.
        let many: Vec<u8> = (0..99).flat_map(|_| Sv::settings(&[])).collect();
        p.send(&many);
        assert_eq!(p.take().len(), 99);
        p.send(&Sv::settings(&[]));
        assert_calm(&mut p);
    });
}

fn empty_data_flood_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        p.request(1, &req(), false);
        let empties: Vec<u8> = (0..100).flat_map(|_| Sv::data(1, &[], false)).collect();
        p.send(&empties);
        assert!(p.take().is_empty());
        p.send(&Sv::data(1, &[], false));
        assert_calm(&mut p);
    });
}

fn rapid_reset_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let mut id = 1;
        for _ in 0..10 {
            let mut b = Vec::new();
            for _ in 0..100 {
                b.extend(p.headers(id, &req(), false));
                b.extend(Sv::rst(id, ErrorCode::CANCEL));
                id += 2;
            }
            p.send(&b);
            assert!(p.take().is_empty());
        }
        assert_eq!(p.conn.open_streams(), (0, 0));
        let mut b = p.headers(id, &req(), false);
        b.extend(Sv::rst(id, ErrorCode::CANCEL));
        p.send(&b);
        assert_calm(&mut p);
    });
}

fn refused_stream_flood_is_enhance_your_calm<St: Rule>() {
    both(|split| {
        let config = Config {
            max_concurrent_streams: 1,
            ..Config::default()
        };
        let mut p = server_with::<St>(config, split);
        p.request(1, &req(), false);
        let mut id = 3;
        for _ in 0..10 {
            let mut b = Vec::new();
            for _ in 0..100 {
                b.extend(p.headers(id, &req(), true));
                id += 2;
            }
            p.send(&b);
            let frames = p.take();
            assert_eq!(frames.len(), 100);
        }
        let h = p.headers(id, &req(), true);
        p.send(&h);
        assert_calm(&mut p);
    });
}

// ---------------------------------------------------------------------------
// GOAWAY from the peer
// ---------------------------------------------------------------------------

/// A client's GOAWAY limits the streams the server would open (none, with
/// push off): the server finishes its streams and keeps serving until the
/// client closes the transport (RFC 9113 §6.8; httpwg's "goaway frame with
/// unknown error code" sends a PING afterwards and expects its ACK).
fn goaway_from_the_client_leaves_the_server_serving<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let s = p.request(1, &req(), true);
        p.send(&Sv::goaway(0, ErrorCode(0xff)));
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), true)
            .unwrap();
        let frames = p.take();
        assert!(
            matches!(frames.as_slice(), [Rx::Headers { stream: 1, .. }]),
            "{frames:?}"
        );
        assert!(
            !p.conn.is_closed(),
            "no stream left, but the client may still talk"
        );
        p.send(&Sv::ping(*b"stillthr"));
        let frames = p.take();
        assert!(
            frames.contains(&Rx::Ping {
                ack: true,
                payload: *b"stillthr"
            }),
            "{frames:?}"
        );
        assert!(
            p.log.iter().any(|e| matches!(
                e,
                Ev::GoAway {
                    code: ErrorCode(0xff),
                    ..
                }
            )),
            "the GOAWAY is reported"
        );
    });
}

// ---------------------------------------------------------------------------
// Client rules
// ---------------------------------------------------------------------------

fn push_promise_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        let s = p.conn.open_stream().unwrap();
        p.conn.send_headers(s, as_fields(&req()), true).unwrap();
        p.take();
        let block = p.block(&req());
        p.send(&Cl::frame(Frame::PushPromise {
            stream_id: 1,
            promised_id: 2,
            fragment: &block,
        }));
        let frames = p.take();
        assert!(
            matches!(frames.as_slice(), [Rx::GoAway { code, .. }] if *code == ErrorCode::PROTOCOL_ERROR),
            "{frames:?}"
        );
        assert!(p.conn.is_closed());
    });
}

fn headers_on_a_stream_the_server_cannot_open_is_a_protocol_error<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        let h = p.headers(2, &response("200", &[]), true);
        p.send(&h);
        let frames = p.take();
        assert!(
            matches!(frames.as_slice(), [Rx::GoAway { code, .. }] if *code == ErrorCode::PROTOCOL_ERROR),
            "{frames:?}"
        );
    });
}

fn client_request_response_and_trailers<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        let s = p.conn.open_stream().unwrap();
        p.conn.send_headers(s, as_fields(&req()), false).unwrap();
        assert_eq!(p.conn.send_data(s, b"hello", true), Ok(5));
        let frames = p.take();
        assert!(
            matches!(&frames[..], [Rx::Headers { stream: 1, end_stream: false, .. }, Rx::Data { stream: 1, data, end_stream: true, .. }] if data == b"hello"),
            "{frames:?}"
        );
        let mut b = p.headers(1, &response("200", &[]), false);
        b.extend(Cl::data(1, b"world", false));
        b.extend(p.headers(1, &fields(&[("grpc-status", "0")]), true));
        p.send(&b);
        let ev = p.take_events();
        assert!(
            matches!(
                &ev[..],
                [
                    Ev::Headers {
                        kind: HeadersKind::Response,
                        end_stream: false,
                        ..
                    },
                    Ev::Headers {
                        kind: HeadersKind::Trailers,
                        end_stream: true,
                        ..
                    },
                    ..
                ]
            ),
            "{ev:?}"
        );
        assert_eq!(p.data.get(&s).map(Vec::as_slice), Some(&b"world"[..]));
        assert_eq!(p.conn.open_streams(), (0, 0));
    });
}

/// The early response on the wire: the client keeps the response, then its
/// sends are accepted and dropped (binding, "Early responses").
fn client_keeps_an_early_response_and_sends_nothing_after_the_reset<St: Rule>() {
    for code in [ErrorCode::NO_ERROR, ErrorCode::CANCEL] {
        both(|split| {
            let mut p = client::<St>(split);
            let s = p.conn.open_stream().unwrap();
            p.conn.send_headers(s, as_fields(&req()), false).unwrap();
            p.take();
            let mut b = p.headers(1, &response("200", &[]), false);
            b.extend(Cl::data(1, b"no", false));
            b.extend(p.headers(1, &fields(&[("grpc-status", "16")]), true));
            b.extend(Cl::rst(1, code));
            p.send(&b);
            let ev = p.take_events();
            assert!(
                !ev.iter().any(|e| matches!(e, Ev::Reset { .. })),
                "{code:?}: {ev:?}"
            );
            assert_eq!(p.data.get(&s).map(Vec::as_slice), Some(&b"no"[..]));
            assert_eq!(p.conn.send_data(s, &[0; 70_000], false), Ok(70_000));
            assert_eq!(
                p.conn
                    .send_headers(s, as_fields(&fields(&[("x", "1")])), true),
                Ok(())
            );
            assert_eq!(p.conn.reset(s, ErrorCode::CANCEL), Ok(()));
            assert!(p.take().is_empty(), "nothing on the wire");
        });
    }
}

// ---------------------------------------------------------------------------
// Ordering and bookkeeping the sim runs into
// ---------------------------------------------------------------------------

/// A stream error must not put RST_STREAM on the wire before the frames of
/// that stream already queued: the peer would get HEADERS on a closed stream
/// (RFC 9113 §5.1: nothing but PRIORITY may follow RST_STREAM).
fn rst_stream_never_goes_out_before_queued_frames_of_its_stream<St: Rule>() {
    both(|split| {
        let mut p = server::<St>(split);
        let s = p.request(1, &request("/x", &[("content-length", "5")]), false);
        // The response head is queued, not yet written...
        p.conn
            .send_headers(s, as_fields(&response("200", &[])), false)
            .unwrap();
        // ...when the body breaks content-length.
        p.feed(&Sv::data(1, &[0; 10], true));
        let frames = p.take();
        let rst = frames
            .iter()
            .position(|f| matches!(f, Rx::Rst { stream: 1, .. }));
        let head = frames
            .iter()
            .position(|f| matches!(f, Rx::Headers { stream: 1, .. }));
        assert!(rst.is_some(), "{frames:?}");
        if let (Some(r), Some(h)) = (rst, head) {
            assert!(h < r, "HEADERS after RST_STREAM on stream 1: {frames:?}");
        }
    });
}

/// Data of a frame that was partly handed out when the application reset
/// its stream must not be handed to the stream that takes the slot next.
fn data_after_a_local_reset_mid_frame_goes_to_no_other_stream<St: Rule>() {
    both(|split| {
        let mut p = Cl1With::<St>::client(Config::default(), split);
        p.handshake();
        let a = p.conn.open_stream().unwrap();
        p.conn.send_headers(a, as_fields(&req()), true).unwrap();
        p.take();
        let head = p.headers(1, &response("200", &[]), false);
        p.send(&head);
        let frame = Cl1::data(1, &[0xaa; 1000], true);
        p.feed(&frame[..9 + 400]);
        assert_eq!(p.data.get(&a).map(Vec::len), Some(400));
        // The application gives up on the first stream and opens another,
        // which takes the only slot.
        p.conn.reset(a, ErrorCode::CANCEL).unwrap();
        // The run loop: drain events after an application call.
        p.drain();
        let b = p.conn.open_stream().unwrap();
        p.conn.send_headers(b, as_fields(&req()), false).unwrap();
        p.flush();
        p.feed(&frame[9 + 400..]);
        p.flush();
        assert_eq!(p.data.get(&b), None, "stream 3 got stream 1's bytes");
        assert_eq!(p.conn.stream_id(b), Some(3), "stream 3 still open");
        assert!(
            !p.log.contains(&Ev::DataEnd { stream: b }),
            "stream 1's END_STREAM ended stream 3"
        );
        assert_eq!(p.conn.send_data(b, b"x", true), Ok(1));
    });
}

/// Every blocked stream gets its SendReady when the connection window
/// reopens, however many there are.
fn a_connection_window_update_wakes_every_blocked_stream<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        let mut streams = Vec::new();
        for _ in 0..20 {
            let s = p.conn.open_stream().unwrap();
            p.conn.send_headers(s, as_fields(&req()), false).unwrap();
            streams.push(s);
        }
        p.take();
        // The first stream takes the whole connection window of 65535.
        let big = vec![0u8; 70_000];
        let mut sent = 0;
        while p.conn.send_window() > 0 {
            sent += p.conn.send_data(streams[0], &big[sent..], false).unwrap();
            p.flush();
        }
        assert_eq!(sent, 65_535);
        // Every other stream offers data and takes none.
        for &s in &streams[1..] {
            assert_eq!(p.conn.send_data(s, b"queued", false), Ok(0));
        }
        p.take();
        p.events.clear();
        p.send(&Cl::window_update(0, 1 << 20));
        let woken = p
            .take_events()
            .iter()
            .filter(|e| matches!(e, Ev::SendReady { .. }))
            .count();
        assert_eq!(woken, 19, "one SendReady per blocked stream with window");
    });
}

/// A GOAWAY that refuses many streams reports each of them, then itself.
fn goaway_reports_every_refused_stream<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        let mut streams = Vec::new();
        for _ in 0..20 {
            let s = p.conn.open_stream().unwrap();
            p.conn.send_headers(s, as_fields(&req()), true).unwrap();
            streams.push(s);
        }
        p.take();
        p.send(&Cl::goaway(0, ErrorCode::NO_ERROR));
        let ev = p.take_events();
        let refused = ev
            .iter()
            .filter(|e| {
                matches!(e, Ev::Reset { code, remote: true, .. } if *code == ErrorCode::REFUSED_STREAM)
            })
            .count();
        assert_eq!(refused, 20, "{ev:?}");
        assert!(ev.contains(&Ev::GoAway {
            last_stream_id: 0,
            code: ErrorCode::NO_ERROR
        }));
        assert!(ev.contains(&Ev::ConnectionClosed { error: None }), "{ev:?}");
    });
}

/// `ConnectionClosed` is "The last event", also when the peer's GOAWAY
/// refuses the last open streams and so ends the connection.
fn connection_closed_is_the_last_event_after_a_goaway<St: Rule>() {
    both(|split| {
        let mut p = client::<St>(split);
        for _ in 0..2 {
            let s = p.conn.open_stream().unwrap();
            p.conn.send_headers(s, as_fields(&req()), true).unwrap();
        }
        p.take();
        p.send(&Cl::goaway(0, ErrorCode::NO_ERROR));
        let ev = p.take_events();
        assert_eq!(ev.len(), 4, "{ev:?}");
        assert_eq!(
            ev[2..],
            [
                Ev::GoAway {
                    last_stream_id: 0,
                    code: ErrorCode::NO_ERROR
                },
                Ev::ConnectionClosed { error: None }
            ],
            "{ev:?}"
        );
        assert!(p.conn.is_closed());
    });
}

// ---------------------------------------------------------------------------
// The run loop's contract with small buffers
// ---------------------------------------------------------------------------

/// The documented loop: recv until consumed, draining events after every
/// call, and `poll_transmit` when recv consumed nothing and returned nothing
/// (the answers it owes wait to be sent). A burst of PINGs larger than the
/// answer queue goes through, and every PING gets its ACK, in order.
fn a_burst_of_pings_is_answered_through_the_documented_loop<St: Rule>() {
    let mut p = server::<St>(Split::Whole);
    // 50 PINGs: under the flood limit (100), more than the answer queue.
    let pings: Vec<u8> = (0..50u8).flat_map(|i| Sv::ping([i; 8])).collect();
    let mut input = &pings[..];
    let mut frames = Vec::new();
    for _ in 0..1000 {
        if input.is_empty() {
            break;
        }
        let r = p.conn.recv(input, Instant::ZERO);
        input = &input[r.consumed..];
        let events = p.drain();
        if r.consumed == 0 && r.data.is_none() && events == 0 {
            frames.extend(p.take());
        }
    }
    assert!(
        input.is_empty(),
        "recv stopped with {} octets left",
        input.len()
    );
    frames.extend(p.take());
    let acks: Vec<[u8; 8]> = frames
        .iter()
        .filter_map(|f| match f {
            Rx::Ping { ack: true, payload } => Some(*payload),
            _ => None,
        })
        .collect();
    let want: Vec<[u8; 8]> = (0..50u8).map(|i| [i; 8]).collect();
    assert_eq!(acks, want);
}

/// `poll_transmit` "Call until it returns 0": with a small buffer it must
/// not return 0 while it still has frames (or say how much room it needs).
fn poll_transmit_with_a_small_buffer_writes_everything<St: Rule>() {
    let mut conn = mcpwire_core::h2::Connection::<4, 4096, 16384, 64>::new(
        Role::Client,
        Config::default(),
        Instant::ZERO,
    );
    let mut out = Vec::new();
    let mut buf = [0u8; 32];
    loop {
        let n = conn.poll_transmit(&mut buf);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(
        !conn.wants_transmit(),
        "poll_transmit gave 0 with {} octets written and frames still pending",
        out.len()
    );
    assert!(out.starts_with(PREFACE));
}

fn send_headers_reports_transmit_full_and_succeeds_after_transmit<St: Rule>() {
    let mut p = client::<St>(Split::Whole);
    let a = p.conn.open_stream().unwrap();
    p.conn.send_headers(a, as_fields(&req()), false).unwrap();
    // Fill the transmit buffer with DATA.
    let n = p.conn.send_data(a, &[0; 60_000], false).unwrap();
    assert!(n > 0);
    let b = p.conn.open_stream().unwrap();
    let r = p.conn.send_headers(b, as_fields(&req()), true);
    assert_eq!(r, Err(StreamError::TransmitFull));
    p.flush();
    assert_eq!(p.conn.send_headers(b, as_fields(&req()), true), Ok(()));
}

// ---------------------------------------------------------------------------
// Every rule with each storage
// ---------------------------------------------------------------------------

// A `#[test]` per rule and storage: `inline::NAME` runs it with
// [`InlineStorage`](mcpwire_core::h2::InlineStorage), `growing::NAME` with
// [`GrowingStorage`] (stream slots, remembered resets and the HPACK table
// grown on demand; the peer's indexed fields grow the table).

each_storage!(
    server_settings_window_update_and_ack,
    client_preface_sends_enable_push_0_first,
    invalid_preface_ends_the_connection,
    first_frame_must_be_settings,
    settings_ack_timeout_sends_goaway_settings_timeout,
    a_connection_without_a_first_request_ends_at_the_handshake_timeout,
    a_connection_with_no_stream_open_ends_at_the_idle_timeout,
    an_early_response_drains_a_marked_request_up_to_the_budget,
    client_refuses_enable_push_1_from_a_server,
    ping_is_answered_with_ack_and_the_same_payload,
    a_ping_of_ours_is_written_once_and_its_ack_reported,
    control_frames_of_the_wrong_length_are_frame_size_errors,
    frames_over_max_frame_size_are_frame_size_errors,
    data_on_stream_0_is_a_protocol_error,
    headers_on_an_even_stream_from_a_client_is_a_protocol_error,
    data_on_an_idle_stream_is_a_protocol_error,
    rst_stream_and_window_update_on_an_idle_stream_are_protocol_errors,
    headers_on_a_closed_stream_is_stream_closed,
    headers_with_a_decreasing_stream_id_is_a_protocol_error,
    priority_on_an_idle_stream_is_harmless_and_self_dependency_resets,
    a_header_block_split_over_continuation_frames_decodes,
    continuation_interleaving_is_a_protocol_error,
    too_many_continuation_frames_is_enhance_your_calm,
    a_100_kb_header_field_gets_431_and_the_table_stays_in_step,
    a_header_list_over_the_limit_in_many_frames_gets_431,
    a_large_block_in_too_many_frames_is_enhance_your_calm,
    a_block_cut_at_every_octet_decodes_like_the_whole_block,
    hpack_garbage_is_a_compression_error,
    a_truncated_string_over_max_field_size_ends_the_connection,
    a_block_ending_before_a_string_length_is_a_compression_error,
    malformed_requests_are_reset_and_the_connection_goes_on,
    content_length_mismatches_are_reset,
    a_header_list_over_the_limit_gets_431_and_the_next_block_decodes,
    a_field_over_max_field_size_gets_431_too,
    oversize_trailers_after_the_response_started_reset_the_stream,
    trailers_on_a_stream_we_reset_are_decoded_and_ignored,
    dropped_data_returns_to_the_connection_window_exactly_once,
    late_frames_on_the_last_64_streams_reset_are_ignored,
    frames_on_a_reset_stream_past_the_last_64_end_the_connection,
    window_update_of_zero,
    window_overflow_past_2_31_minus_1,
    data_beyond_the_stream_window_is_a_flow_control_error,
    data_beyond_the_connection_window_is_a_flow_control_error,
    a_smaller_initial_window_tolerates_data_sent_before_the_settings_arrived,
    initial_window_size_changes_move_open_streams_even_below_zero,
    initial_window_size_over_the_maximum_is_a_flow_control_error,
    ping_flood_is_enhance_your_calm,
    pings_under_the_limit_in_each_period_are_fine,
    settings_flood_is_enhance_your_calm,
    empty_data_flood_is_enhance_your_calm,
    rapid_reset_is_enhance_your_calm,
    refused_stream_flood_is_enhance_your_calm,
    goaway_from_the_client_leaves_the_server_serving,
    push_promise_is_a_protocol_error,
    headers_on_a_stream_the_server_cannot_open_is_a_protocol_error,
    client_request_response_and_trailers,
    client_keeps_an_early_response_and_sends_nothing_after_the_reset,
    rst_stream_never_goes_out_before_queued_frames_of_its_stream,
    data_after_a_local_reset_mid_frame_goes_to_no_other_stream,
    a_connection_window_update_wakes_every_blocked_stream,
    goaway_reports_every_refused_stream,
    connection_closed_is_the_last_event_after_a_goaway,
    a_burst_of_pings_is_answered_through_the_documented_loop,
    poll_transmit_with_a_small_buffer_writes_everything,
    send_headers_reports_transmit_full_and_succeeds_after_transmit,
);
