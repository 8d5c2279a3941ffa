//! gRPC status codes.

/// A gRPC status code, as carried in `grpc-status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code for a number; unknown numbers are `Unknown`, as gRPC says.
    pub fn from_u32(n: u32) -> Self {
        Self::ALL.get(n as usize).copied().unwrap_or(Code::Unknown)
    }

    /// Parses a `grpc-status` value.
    pub fn parse(value: &[u8]) -> Option<Self> {
        if value.is_empty() || value.len() > 3 || !value.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = value
            .iter()
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'));
        Some(Self::from_u32(n))
    }

    /// The decimal text of the code, as `grpc-status` carries it.
    pub const fn as_bytes(self) -> &'static [u8] {
        const TEXT: [&[u8]; 17] = [
            b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"10", b"11", b"12", b"13",
            b"14", b"15", b"16",
        ];
        TEXT[self as usize]
    }

    /// The canonical name (`DEADLINE_EXCEEDED`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The status gRPC clients derive from a non-200 HTTP status
    /// ("HTTP to gRPC Status Code Mapping").
    pub const fn from_http_status(status: u16) -> Self {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

impl core::fmt::Display for Code {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        for n in 0..17u32 {
            let c = Code::from_u32(n);
            assert_eq!(c as u32, n);
            assert_eq!(Code::parse(c.as_bytes()), Some(c));
        }
        assert_eq!(Code::parse(b"99"), Some(Code::Unknown));
        assert_eq!(Code::parse(b""), None);
        assert_eq!(Code::parse(b"1a"), None);
    }
}
