//! Reading server-sent events (WHATWG HTML §9.2.6, "Interpreting an event
//! stream"), incrementally over octets that arrive in any pieces: the
//! body runs of an HTTP/1.1 response or the DATA frames of an HTTP/2
//! stream. Writing them is [`write`](super::write)'s.
//!
//! An event's data goes straight into the caller's buffer (a call's
//! receive buffer), its lines joined with LF; the buffer's length is the
//! event's limit, so a larger event is an error and memory stays bounded.
//! The event type is kept up to [`MAX_EVENT_NAME`] octets and the last
//! event ID up to [`MAX_EVENT_ID`]; `retry` is parsed and reported.
//! Comments and unknown fields are skipped without being kept.

/// Longest event type kept (`event:`); a longer one is an error.
pub const MAX_EVENT_NAME: usize = 32;
/// Longest event ID kept (`id:`); a longer one leaves the last event ID
/// unknown.
pub const MAX_EVENT_ID: usize = 64;

/// The UTF-8 byte order mark, dropped once at the start of a stream.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
/// Longest field name the parser knows (`event`, `retry`).
const NAME: usize = 5;

/// Why a stream cannot be read on; the parser stays failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// An event's data does not fit the caller's buffer of `limit` octets.
    EventTooLarge { limit: usize },
    /// An event type over [`MAX_EVENT_NAME`] octets.
    EventNameTooLong,
}

impl SseError {
    /// Why, in a few words.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::EventTooLarge { .. } => "server-sent event larger than the receive buffer",
            Self::EventNameTooLong => "server-sent event type too long",
        }
    }
}

/// One event dispatched: its data is `out[..data_len]` of the buffer
/// given to [`SseParser::feed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent {
    pub data_len: usize,
    name: [u8; MAX_EVENT_NAME],
    name_len: u8,
}

impl SseEvent {
    /// The event type: `message` when the event named none.
    pub fn name(&self) -> &[u8] {
        match self.name.get(..usize::from(self.name_len)) {
            Some(name) if !name.is_empty() => name,
            _ => b"message",
        }
    }

    /// Whether it is a `message` event (named so, or unnamed).
    pub fn is_message(&self) -> bool {
        self.name() == b"message"
    }
}

/// What one [`SseParser::feed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseFeed {
    /// Octets of the input taken.
    pub consumed: usize,
    /// The event the input completed, if any (at most one per call: call
    /// again with the rest, after using the event's data).
    pub event: Option<SseEvent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    Id,
    Retry,
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Reading the field name: `len` octets so far (0: the line is empty
    /// so far), the first [`NAME`] of them in `name`.
    Name {
        len: u8,
        name: [u8; NAME],
    },
    /// The colon came: one space may follow before the value.
    Colon(Field),
    Value(Field),
}

const LINE_START: Line = Line::Name {
    len: 0,
    name: [0; NAME],
};

/// What the stream's `id:` fields left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id {
    None,
    Known,
    TooLong,
}

/// An incremental parser of one event stream.
#[derive(Debug, Clone)]
pub struct SseParser {
    /// BOM octets matched at the stream's start; `BOM.len()` once past it.
    bom: u8,
    /// The last octet was a CR: an LF now completes that line end.
    cr: bool,
    line: Line,
    /// Data octets of the pending event written to the caller's buffer.
    data_len: usize,
    /// A `data` field came for the pending event (its data may be empty).
    data_lines: bool,
    name: [u8; MAX_EVENT_NAME],
    name_len: u8,
    /// The `id:` value being read, and whether it is over the bound or
    /// holds a NUL (then it is ignored).
    value: [u8; MAX_EVENT_ID],
    value_len: u8,
    value_long: bool,
    value_nul: bool,
    id: [u8; MAX_EVENT_ID],
    id_len: u8,
    id_state: Id,
    /// The `retry:` value being read (`None` once a non-digit came), and
    /// whether any octet came.
    number: Option<u32>,
    number_seen: bool,
    retry: Option<u32>,
    failed: Option<SseError>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    pub const fn new() -> Self {
        Self {
            bom: 0,
            cr: false,
            line: LINE_START,
            data_len: 0,
            data_lines: false,
            name: [0; MAX_EVENT_NAME],
            name_len: 0,
            value: [0; MAX_EVENT_ID],
            value_len: 0,
            value_long: false,
            value_nul: false,
            id: [0; MAX_EVENT_ID],
            id_len: 0,
            id_state: Id::None,
            number: None,
            number_seen: false,
            retry: None,
            failed: None,
        }
    }

    /// The reconnection time (`retry:`, in milliseconds) the stream set
    /// last, if any.
    pub fn retry(&self) -> Option<u32> {
        self.retry
    }

    /// The last event ID the stream set (empty when it reset it); `None`
    /// when it set none, or the last one was over [`MAX_EVENT_ID`] octets.
    pub fn last_event_id(&self) -> Option<&[u8]> {
        match self.id_state {
            Id::Known => self.id.get(..usize::from(self.id_len)),
            Id::None | Id::TooLong => None,
        }
    }

    /// Whether part of an event came that no empty line has dispatched
    /// yet: a stream ending now loses it (WHATWG: it is discarded).
    pub fn mid_event(&self) -> bool {
        self.data_lines || self.line != LINE_START
    }

    /// Reads `input` up to the end of the next event, writing its data into
    /// `out` (the same buffer on every call until the event comes, as the
    /// data of one event may span many inputs). After an error the parser
    /// stays failed: the stream must be dropped.
    pub fn feed(&mut self, input: &[u8], out: &mut [u8]) -> Result<SseFeed, SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let fed = self.read(input, out);
        if let Err(e) = fed {
            self.failed = Some(e);
        }
        fed
    }

    fn read(&mut self, input: &[u8], out: &mut [u8]) -> Result<SseFeed, SseError> {
        let mut pos = 0;
        while let Some(&b) = input.get(pos) {
            if usize::from(self.bom) < BOM.len() {
                if BOM.get(usize::from(self.bom)) == Some(&b) {
                    self.bom += 1;
                    pos += 1;
                    continue;
                }
                if self.bom > 0 {
                    // Part of a BOM starts the first line: no known field
                    // name starts so, the line is ignored.
                    self.line = Line::Name {
                        len: u8::MAX,
                        name: [0; NAME],
                    };
                }
                self.bom = BOM.len() as u8;
            }
            if core::mem::take(&mut self.cr) && b == b'\n' {
                pos += 1;
                continue;
            }
            if b == b'\r' || b == b'\n' {
                pos += 1;
                self.cr = b == b'\r';
                if let Some(event) = self.end_line(out)? {
                    return Ok(SseFeed {
                        consumed: pos,
                        event: Some(event),
                    });
                }
                continue;
            }
            match self.line {
                Line::Name { len, mut name } => {
                    pos += 1;
                    if b == b':' {
                        let field = field(len, &name);
                        self.start_value(field, out)?;
                        self.line = Line::Colon(field);
                    } else {
                        if let Some(slot) = name.get_mut(usize::from(len)) {
                            *slot = b;
                        }
                        self.line = Line::Name {
                            len: len.saturating_add(1),
                            name,
                        };
                    }
                }
                Line::Colon(field) => {
                    if b == b' ' {
                        pos += 1;
                    }
                    self.line = Line::Value(field);
                }
                Line::Value(field) => {
                    let rest = input.get(pos..).unwrap_or_default();
                    let run = rest
                        .iter()
                        .position(|&c| c == b'\r' || c == b'\n')
                        .unwrap_or(rest.len());
                    self.value_run(field, rest.get(..run).unwrap_or_default(), out)?;
                    pos += run;
                }
            }
        }
        Ok(SseFeed {
            consumed: pos,
            event: None,
        })
    }

    /// A field's value starts (after its colon, or at the end of a line
    /// that is only a field name).
    fn start_value(&mut self, field: Field, out: &mut [u8]) -> Result<(), SseError> {
        match field {
            Field::Data => {
                if self.data_lines {
                    self.write(b"\n", out)?;
                }
                self.data_lines = true;
            }
            Field::Event => self.name_len = 0,
            Field::Id => {
                self.value_len = 0;
                self.value_long = false;
                self.value_nul = false;
            }
            Field::Retry => {
                self.number = Some(0);
                self.number_seen = false;
            }
            Field::Ignore => {}
        }
        Ok(())
    }

    fn value_run(&mut self, field: Field, run: &[u8], out: &mut [u8]) -> Result<(), SseError> {
        match field {
            Field::Data => self.write(run, out)?,
            Field::Event => {
                let at = usize::from(self.name_len);
                let dst = self
                    .name
                    .get_mut(at..at + run.len())
                    .ok_or(SseError::EventNameTooLong)?;
                dst.copy_from_slice(run);
                self.name_len += run.len() as u8;
            }
            Field::Id => {
                self.value_nul |= run.contains(&0);
                let at = usize::from(self.value_len);
                match self.value.get_mut(at..at + run.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(run);
                        self.value_len += run.len() as u8;
                    }
                    None => self.value_long = true,
                }
            }
            Field::Retry => {
                self.number_seen |= !run.is_empty();
                for &b in run {
                    self.number = self.number.and_then(|n| {
                        b.is_ascii_digit()
                            .then(|| n.saturating_mul(10).saturating_add(u32::from(b - b'0')))
                    });
                }
            }
            Field::Ignore => {}
        }
        Ok(())
    }

    /// A line ended: its field takes effect, or an empty line dispatches
    /// the pending event.
    fn end_line(&mut self, out: &mut [u8]) -> Result<Option<SseEvent>, SseError> {
        let line = core::mem::replace(&mut self.line, LINE_START);
        let field = match line {
            Line::Name { len: 0, .. } => return Ok(self.dispatch()),
            Line::Name { len, name } => {
                let field = field(len, &name);
                self.start_value(field, out)?;
                field
            }
            Line::Colon(field) | Line::Value(field) => field,
        };
        match field {
            Field::Id if !self.value_nul => {
                if self.value_long {
                    self.id_state = Id::TooLong;
                } else {
                    self.id = self.value;
                    self.id_len = self.value_len;
                    self.id_state = Id::Known;
                }
            }
            Field::Retry if self.number_seen => {
                if let Some(n) = self.number {
                    self.retry = Some(n);
                }
            }
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = SseEvent {
            data_len: self.data_len,
            name: self.name,
            name_len: self.name_len,
        };
        let any = core::mem::take(&mut self.data_lines);
        self.data_len = 0;
        self.name_len = 0;
        any.then_some(event)
    }

    fn write(&mut self, octets: &[u8], out: &mut [u8]) -> Result<(), SseError> {
        let limit = out.len();
        let dst = out
            .get_mut(self.data_len..self.data_len + octets.len())
            .ok_or(SseError::EventTooLarge { limit })?;
        dst.copy_from_slice(octets);
        self.data_len += octets.len();
        Ok(())
    }
}

/// The field a name of `len` octets (the first of them in `name`) is.
fn field(len: u8, name: &[u8; NAME]) -> Field {
    match name.get(..usize::from(len)) {
        Some(b"data") => Field::Data,
        Some(b"event") => Field::Event,
        Some(b"id") => Field::Id,
        Some(b"retry") => Field::Retry,
        _ => Field::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Every event of `stream` fed whole: (type, data).
    fn events(stream: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut p = SseParser::new();
        let mut out = [0u8; 64];
        let mut got = Vec::new();
        let mut rest = stream;
        loop {
            let f = p.feed(rest, &mut out).unwrap();
            rest = &rest[f.consumed..];
            match f.event {
                Some(e) => got.push((e.name().to_vec(), out[..e.data_len].to_vec())),
                None => return got,
            }
        }
    }

    #[test]
    fn joins_data_lines_and_names_events() {
        let got = events(b"data: a\ndata:b\r\ndata\r\n\r\nevent: ping\ndata:  x\n\n");
        assert_eq!(
            got,
            [
                (b"message".to_vec(), b"a\nb\n".to_vec()),
                (b"ping".to_vec(), b" x".to_vec())
            ]
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert!(events(b"event: x\n\n: comment\n\nid: 1\n\n").is_empty());
        assert_eq!(events(b"data\n\n"), [(b"message".to_vec(), Vec::new())]);
    }

    #[test]
    fn the_event_name_and_the_data_are_bounded() {
        let mut p = SseParser::new();
        let mut out = [0u8; 4];
        assert_eq!(
            p.feed(b"data: 12345\n\n", &mut out),
            Err(SseError::EventTooLarge { limit: 4 })
        );
        assert_eq!(
            p.feed(b"\n", &mut out),
            Err(SseError::EventTooLarge { limit: 4 })
        );
        let mut long = b"event: ".to_vec();
        long.resize(7 + MAX_EVENT_NAME + 1, b'e');
        assert_eq!(
            SseParser::new().feed(&long, &mut out),
            Err(SseError::EventNameTooLong)
        );
    }
}
