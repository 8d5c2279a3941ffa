//! Error codes (RFC 9113 §7) and the errors of the HTTP/2 layer, each with
//! the level it applies to.

/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: Self = Self(0x0);
    pub const PROTOCOL_ERROR: Self = Self(0x1);
    pub const INTERNAL_ERROR: Self = Self(0x2);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const SETTINGS_TIMEOUT: Self = Self(0x4);
    pub const STREAM_CLOSED: Self = Self(0x5);
    pub const FRAME_SIZE_ERROR: Self = Self(0x6);
    pub const REFUSED_STREAM: Self = Self(0x7);
    pub const CANCEL: Self = Self(0x8);
    pub const COMPRESSION_ERROR: Self = Self(0x9);
    pub const CONNECT_ERROR: Self = Self(0xa);
    pub const ENHANCE_YOUR_CALM: Self = Self(0xb);
    pub const INADEQUATE_SECURITY: Self = Self(0xc);
    pub const HTTP_1_1_REQUIRED: Self = Self(0xd);

    /// The RFC's name for the code, if it has one.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => return None,
        })
    }
}

impl core::fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "ErrorCode({:#x})", self.0),
        }
    }
}

impl core::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// Why a connection ended: the GOAWAY code and who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionError {
    /// This endpoint found an error and sent GOAWAY with `code`.
    Local {
        code: ErrorCode,
        reason: &'static str,
    },
    /// The peer sent GOAWAY with an error code other than NO_ERROR.
    Remote {
        code: ErrorCode,
        last_stream_id: u32,
    },
    /// The peer did not acknowledge our SETTINGS in time.
    SettingsTimeout,
}

impl ConnectionError {
    /// The GOAWAY code.
    pub const fn code(&self) -> ErrorCode {
        match self {
            Self::Local { code, .. } | Self::Remote { code, .. } => *code,
            Self::SettingsTimeout => ErrorCode::SETTINGS_TIMEOUT,
        }
    }
}

impl core::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Local { code, reason } => write!(f, "connection error {code}: {reason}"),
            Self::Remote {
                code,
                last_stream_id,
            } => {
                write!(f, "peer sent GOAWAY {code} (last stream {last_stream_id})")
            }
            Self::SettingsTimeout => f.write_str("peer did not acknowledge SETTINGS in time"),
        }
    }
}

impl core::error::Error for ConnectionError {}

/// Why an operation on a stream was refused. The connection is unaffected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    /// The handle names no stream (it ended and its slot was reused).
    UnknownStream,
    /// The stream was reset with this code, by either side.
    Reset(ErrorCode),
    /// This side already ended the stream.
    AlreadyEnded,
    /// Headers must come first, or trailers were already sent.
    InvalidState,
    /// The header block can never fit in the transmit buffer: it needs
    /// this many bytes.
    HeadersTooLarge { needed: usize },
    /// The transmit buffer is too full for this header block now: write
    /// out with `poll_transmit`, then try again.
    TransmitFull,
    /// The peer's MAX_CONCURRENT_STREAMS is reached: send again after
    /// [`Event::StreamsAvailable`](super::Event).
    ConcurrencyLimit,
    /// The connection is closing or closed; no new work is accepted.
    ConnectionClosed,
    /// All stream slots are in use.
    NoCapacity,
}

impl core::fmt::Display for StreamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownStream => f.write_str("unknown stream"),
            Self::Reset(code) => write!(f, "stream reset with {code}"),
            Self::AlreadyEnded => f.write_str("stream already ended by this side"),
            Self::InvalidState => f.write_str("operation not valid in the stream's state"),
            Self::HeadersTooLarge { needed } => {
                write!(f, "header block needs {needed} bytes of transmit buffer")
            }
            Self::TransmitFull => f.write_str("transmit buffer full"),
            Self::ConcurrencyLimit => f.write_str("peer's concurrent stream limit reached"),
            Self::ConnectionClosed => f.write_str("connection closed"),
            Self::NoCapacity => f.write_str("no free stream slot"),
        }
    }
}

impl core::error::Error for StreamError {}
