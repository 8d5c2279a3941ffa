//! Portable tools: a tool written once against this module runs under every
//! driver (`mcpwire-embassy` on a microcontroller, `mcpwire-tokio` on a
//! host), with no allocator.
//!
//! A [`Tool`] has a static description ([`Tool::INFO`], the `tools/list`
//! entry, kept in flash) and an async `call` that gets the raw JSON
//! `arguments` ([`Arguments`]), a [`ToolContext`] from the driver (progress
//! notifications, a clock, cancellation) and a [`ToolOutput`] that writes
//! the `tools/call` result into a buffer the driver owns. A set of tools is
//! a [`Tools`]: any tuple of up to eight tools is one, or implement it by
//! hand with a `match` over the index.
//!
//! Drivers are generic over the [`Tools`] and the context, so nothing is
//! boxed or dynamically dispatched: each driver runs one future type per
//! set of tools. A driver drops a tool's future when its call is cancelled
//! (client reset, deadline, connection end); [`ToolContext::is_cancelled`]
//! serves tools that work between awaits.
//!
//! ```
//! use mcpwire_core::mcp::error::RpcError;
//! use mcpwire_core::mcp::registry::ToolInfo;
//! use mcpwire_core::mcp::tool::{Arguments, Tool, ToolContext, ToolOutput};
//!
//! struct Add;
//!
//! impl Tool for Add {
//!     const INFO: ToolInfo<'static> = ToolInfo {
//!         name: "add",
//!         title: None,
//!         description: "Adds a and b.",
//!         input_schema: r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}"#,
//!     };
//!
//!     async fn call<C: ToolContext>(
//!         &self,
//!         args: Arguments<'_>,
//!         _cx: &C,
//!         out: &mut ToolOutput<'_>,
//!     ) -> Result<(), RpcError> {
//!         let a = args.i64(b"a").ok_or(RpcError::new(-32602, "a must be an integer"))?;
//!         let b = args.i64(b"b").unwrap_or(0);
//!         out.text_fmt(format_args!("{}", a.saturating_add(b)));
//!         Ok(())
//!     }
//! }
//! ```

use core::fmt;
use core::future::Future;
use core::time::Duration;

use super::error::{INVALID_PARAMS, RpcError};
use super::json;
use super::registry::ToolInfo;
use super::writer::{JsonWriter, Overflow};

/// What a running tool can ask of the driver that runs it.
pub trait ToolContext {
    /// Sends `notifications/progress` on the call's stream with the
    /// request's `progressToken`; does nothing when the request carried
    /// none. Waits while the driver's output for the call is busy; a
    /// notification that cannot be sent (the call is over, it is larger
    /// than the driver's buffer) is dropped.
    fn progress(
        &self,
        progress: u64,
        total: Option<u64>,
        message: Option<&str>,
    ) -> impl Future<Output = ()>;

    /// Waits `duration` on the driver's clock (embassy-time, tokio).
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()>;

    /// Whether the call is over (client reset, deadline, connection end).
    /// The driver also drops the tool's future at its next await; this is
    /// for work done between awaits.
    fn is_cancelled(&self) -> bool;
}

/// One tool.
pub trait Tool {
    /// Its `tools/list` entry. The input schema's `x-mcp-header`
    /// annotations are enforced by the engine before the tool runs.
    const INFO: ToolInfo<'static>;

    /// Runs the tool: reads `args`, writes the result into `out`.
    ///
    /// `Err` answers the call with a JSON-RPC error (a protocol error, such
    /// as -32602 for bad arguments); a failure the model should see is a
    /// result with [`ToolOutput::set_error`].
    fn call<C: ToolContext>(
        &self,
        args: Arguments<'_>,
        cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> impl Future<Output = Result<(), RpcError>>;
}

/// A set of tools, addressed by their index in [`Tools::TOOLS`].
pub trait Tools {
    /// The `tools/list` entries, in index order.
    const TOOLS: &'static [ToolInfo<'static>];

    /// Runs tool `index` (see [`Tool::call`]). An index out of range is
    /// -32602 "Unknown tool".
    fn call<C: ToolContext>(
        &self,
        index: usize,
        args: Arguments<'_>,
        cx: &C,
        out: &mut ToolOutput<'_>,
    ) -> impl Future<Output = Result<(), RpcError>>;

    /// The index of the tool called `name`, a raw JSON string (as in the
    /// request's `params.name`).
    fn find(name: &[u8]) -> Option<usize> {
        Self::TOOLS
            .iter()
            .position(|t| json::str_eq(name, t.name.as_bytes()))
    }
}

/// -32602 for a tool index no tool has.
pub const UNKNOWN_TOOL: RpcError = RpcError::new(INVALID_PARAMS, "Unknown tool");

macro_rules! tuple_tools {
    ($($index:tt $name:ident),+) => {
        impl<$($name: Tool),+> Tools for ($($name,)+) {
            const TOOLS: &'static [ToolInfo<'static>] = &[$($name::INFO),+];

            async fn call<Cx: ToolContext>(
                &self,
                index: usize,
                args: Arguments<'_>,
                cx: &Cx,
                out: &mut ToolOutput<'_>,
            ) -> Result<(), RpcError> {
                match index {
                    $($index => self.$index.call(args, cx, out).await,)+
                    _ => Err(UNKNOWN_TOOL),
                }
            }
        }
    };
}

tuple_tools!(0 A);
tuple_tools!(0 A, 1 B);
tuple_tools!(0 A, 1 B, 2 C);
tuple_tools!(0 A, 1 B, 2 C, 3 D);
tuple_tools!(0 A, 1 B, 2 C, 3 D, 4 E);
tuple_tools!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F);
tuple_tools!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G);
tuple_tools!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H);

// ----------------------------------------------------------------------
// Arguments
// ----------------------------------------------------------------------

/// A call's `params.arguments`: a JSON object as raw bytes (`{}` when the
/// request had none). The engine validated it; the accessors read members
/// without building anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arguments<'a>(&'a [u8]);

impl<'a> Arguments<'a> {
    /// Wraps raw JSON; anything but an object reads as `{}`.
    pub fn new(raw: &'a [u8]) -> Self {
        let raw = json::trim(raw);
        if json::kind(raw) == Some(json::Kind::Object) {
            Self(raw)
        } else {
            Self(b"{}")
        }
    }

    /// The object's raw JSON.
    pub fn raw(&self) -> &'a [u8] {
        self.0
    }

    /// The raw JSON of member `key`.
    pub fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        json::get(self.0, key)
    }

    /// Member `key` as an integer (±2^63, no fraction or exponent).
    pub fn i64(&self, key: &[u8]) -> Option<i64> {
        self.get(key).and_then(json::as_i64)
    }

    /// Member `key` as a non-negative integer.
    pub fn u64(&self, key: &[u8]) -> Option<u64> {
        self.i64(key).and_then(|v| u64::try_from(v).ok())
    }

    /// Member `key` as a boolean.
    pub fn bool(&self, key: &[u8]) -> Option<bool> {
        match self.get(key)? {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// The arguments deserialized into `T` with serde-json-core, straight
    /// from the request's bytes and without an allocator (feature `serde`).
    /// A `&str` field borrows the request when the string has no escapes;
    /// a string with escapes needs an owned field (`heapless::String<N>`),
    /// and is unescaped through `scratch` (as long as the longest such
    /// string). Arguments that do not fit `T` are -32602, as MCP names
    /// invalid params.
    ///
    /// The core's own scanner stays the engine's reader: it validates and
    /// locates members without building anything, which a per-type
    /// deserializer cannot do for the engine's checks; this is for the
    /// tool, which wants its arguments typed.
    #[cfg(feature = "serde")]
    pub fn parse<T: serde::Deserialize<'a>>(&self, scratch: &mut [u8]) -> Result<T, RpcError> {
        serde_json_core::from_slice_escaped(self.0, scratch)
            .map(|(value, _)| value)
            .map_err(|_| {
                RpcError::new(
                    INVALID_PARAMS,
                    "arguments do not match the tool's input schema",
                )
            })
    }

    /// Member `key` as a string, unescaped into `buf`; `None` when it is
    /// not a string or does not fit.
    pub fn str<'b>(&self, key: &[u8], buf: &'b mut [u8]) -> Option<&'b str> {
        let raw = self.get(key)?;
        if json::kind(raw) != Some(json::Kind::String) {
            return None;
        }
        let bytes = json::unescape(raw, buf)?;
        core::str::from_utf8(bytes).ok()
    }
}

// ----------------------------------------------------------------------
// The result
// ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Inside `content`; how many blocks so far.
    Content(usize),
    /// `structuredContent` was written: `content` is closed.
    Structured,
}

/// The result of a `tools/call` (MCP 2026-07-28 §10), written as the tool
/// goes into a buffer the driver owns:
/// `{"resultType":"complete","content":[…],"structuredContent":…,"isError":true}`.
///
/// Content blocks come first ([`ToolOutput::text`], [`ToolOutput::text_fmt`],
/// [`ToolOutput::content`]), `structuredContent` last: a block added after
/// [`ToolOutput::structured`] is not written, and
/// [`ToolOutput::finish`] reports it ([`OutputError::Order`]). Running out of
/// room is reported by `finish` as well, with the size needed.
#[derive(Debug)]
pub struct ToolOutput<'b> {
    w: JsonWriter<'b>,
    part: Part,
    is_error: bool,
    misordered: bool,
}

/// Why [`ToolOutput::finish`] has no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputError {
    /// The buffer was too small.
    Overflow(Overflow),
    /// A content block came after `structuredContent`.
    Order,
}

impl<'b> ToolOutput<'b> {
    /// A result written into `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        let mut w = JsonWriter::new(buf);
        w.raw(b"{\"resultType\":\"complete\",\"content\":[");
        Self {
            w,
            part: Part::Content(0),
            is_error: false,
            misordered: false,
        }
    }

    /// Starts a content block: the separator, or nothing when not allowed.
    fn block(&mut self) -> bool {
        match self.part {
            Part::Content(n) => {
                if n > 0 {
                    self.w.raw(b",");
                }
                self.part = Part::Content(n + 1);
                true
            }
            Part::Structured => {
                self.misordered = true;
                false
            }
        }
    }

    /// Adds a text block.
    pub fn text(&mut self, text: &str) -> &mut Self {
        if self.block() {
            self.w
                .raw(b"{\"type\":\"text\",\"text\":")
                .string(text.as_bytes());
            self.w.raw(b"}");
        }
        self
    }

    /// Adds a text block formatted in place (`format_args!`), with no
    /// intermediate buffer.
    pub fn text_fmt(&mut self, args: fmt::Arguments<'_>) -> &mut Self {
        if self.block() {
            self.w.raw(b"{\"type\":\"text\",\"text\":\"");
            // Our writer never fails; running out of room shows at finish.
            let _ = fmt::write(&mut Escaper(&mut self.w), args);
            self.w.raw(b"\"}");
        }
        self
    }

    /// Adds any other content block (image, audio, resource link): `f`
    /// writes one JSON object.
    pub fn content(&mut self, f: impl FnOnce(&mut JsonWriter<'b>)) -> &mut Self {
        if self.block() {
            f(&mut self.w);
        }
        self
    }

    /// Writes `structuredContent`: `f` writes one JSON object. Call it once,
    /// after the content blocks.
    pub fn structured(&mut self, f: impl FnOnce(&mut JsonWriter<'b>)) -> &mut Self {
        if self.part == Part::Structured {
            self.misordered = true;
            return self;
        }
        self.part = Part::Structured;
        self.w.raw(b"],\"structuredContent\":");
        f(&mut self.w);
        self
    }

    /// Marks the result as a tool failure the model sees (`isError: true`),
    /// not a protocol error.
    pub fn set_error(&mut self) -> &mut Self {
        self.is_error = true;
        self
    }

    /// Octets written so far (or needed, past the end of the buffer).
    pub fn len(&self) -> usize {
        self.w.len()
    }

    /// Whether nothing was written (never: the result's head is there).
    pub fn is_empty(&self) -> bool {
        self.w.is_empty()
    }

    /// Closes the result; its JSON, or why there is none.
    pub fn finish(mut self) -> Result<&'b [u8], OutputError> {
        if let Part::Content(_) = self.part {
            self.w.raw(b"]");
        }
        if self.is_error {
            self.w.raw(b",\"isError\":true");
        }
        self.w.raw(b"}");
        if self.misordered {
            return Err(OutputError::Order);
        }
        self.w.finish().map_err(OutputError::Overflow)
    }
}

/// Formats into a JSON string body, escaping as it goes.
struct Escaper<'w, 'b>(&'w mut JsonWriter<'b>);

impl fmt::Write for Escaper<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.escaped(s.as_bytes());
        Ok(())
    }
}

/// Writes the `params` of `notifications/progress`:
/// `{"progressToken":…,"progress":…,"total":…,"message":…}`. `token` is the
/// request's raw JSON `progressToken`.
pub fn write_progress(
    w: &mut JsonWriter<'_>,
    token: &[u8],
    progress: u64,
    total: Option<u64>,
    message: Option<&str>,
) {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    w.raw(b"{\"progressToken\":")
        .raw(token)
        .raw(b",\"progress\":")
        .int(int(progress));
    if let Some(total) = total {
        w.raw(b",\"total\":").int(int(total));
    }
    if let Some(message) = message {
        w.raw(b",\"message\":").string(message.as_bytes());
    }
    w.raw(b"}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "serde")]
    #[test]
    fn arguments_parse_into_a_typed_struct() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Args<'a> {
            pin: u8,
            on: bool,
            label: &'a str,
            note: heapless::String<8>,
        }
        let mut scratch = [0u8; 64];
        let raw = br#"{"pin":13,"on":true,"label":"led","note":"a\"b"}"#;
        let args: Args<'_> = Arguments::new(raw).parse(&mut scratch).unwrap();
        assert_eq!((args.pin, args.on, args.label), (13, true, "led"));
        assert_eq!(args.note.as_str(), "a\"b");
        let out_of_range = br#"{"pin":300,"on":true,"label":"","note":""}"#;
        let wrong = Arguments::new(out_of_range).parse::<Args<'_>>(&mut scratch);
        assert_eq!(wrong.unwrap_err().code, INVALID_PARAMS);
        let missing = Arguments::new(br#"{"pin":1}"#).parse::<Args<'_>>(&mut scratch);
        assert_eq!(missing.unwrap_err().code, INVALID_PARAMS);
    }
    use core::cell::Cell;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};

    /// Polls a future that never waits.
    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the future waited"),
        }
    }

    #[derive(Default)]
    struct Recorder {
        progress: Cell<u64>,
        slept: Cell<u64>,
    }

    impl ToolContext for Recorder {
        async fn progress(&self, progress: u64, _total: Option<u64>, _message: Option<&str>) {
            self.progress.set(progress);
        }
        async fn sleep(&self, duration: Duration) {
            self.slept
                .set(self.slept.get() + u64::try_from(duration.as_millis()).unwrap_or(0));
        }
        fn is_cancelled(&self) -> bool {
            false
        }
    }

    struct Echo;
    impl Tool for Echo {
        const INFO: ToolInfo<'static> = ToolInfo {
            name: "echo",
            title: None,
            description: "Echoes text.",
            input_schema: r#"{"type":"object"}"#,
        };
        async fn call<C: ToolContext>(
            &self,
            args: Arguments<'_>,
            cx: &C,
            out: &mut ToolOutput<'_>,
        ) -> Result<(), RpcError> {
            let mut buf = [0u8; 64];
            let text = args
                .str(b"text", &mut buf)
                .ok_or(RpcError::new(INVALID_PARAMS, "text"))?;
            cx.progress(1, Some(1), None).await;
            cx.sleep(Duration::from_millis(5)).await;
            out.text(text);
            Ok(())
        }
    }

    struct Count;
    impl Tool for Count {
        const INFO: ToolInfo<'static> = ToolInfo {
            name: "count",
            title: None,
            description: "Counts.",
            input_schema: r#"{"type":"object"}"#,
        };
        async fn call<C: ToolContext>(
            &self,
            args: Arguments<'_>,
            _cx: &C,
            out: &mut ToolOutput<'_>,
        ) -> Result<(), RpcError> {
            let n = args.i64(b"n").unwrap_or(0);
            out.text_fmt(format_args!("n=\"{n}\"\n"))
                .structured(|w| {
                    w.raw(b"{\"n\":").int(n).raw(b"}");
                })
                .set_error();
            Ok(())
        }
    }

    #[test]
    fn tuples_dispatch_by_index_and_name() {
        type Set = (Echo, Count);
        assert_eq!(Set::TOOLS.len(), 2);
        assert_eq!(Set::find(b"\"count\""), Some(1));
        assert_eq!(Set::find(b"\"c\\u006funt\""), Some(1));
        assert_eq!(Set::find(b"\"nope\""), None);
        let tools = (Echo, Count);
        let cx = Recorder::default();

        let mut buf = [0u8; 256];
        let mut out = ToolOutput::new(&mut buf);
        let args = Arguments::new(br#"{"text":"h\u00e9 \"x\""}"#);
        ready(tools.call(0, args, &cx, &mut out)).unwrap();
        assert_eq!(
            out.finish().unwrap(),
            r#"{"resultType":"complete","content":[{"type":"text","text":"hé \"x\""}]}"#.as_bytes()
        );
        assert_eq!((cx.progress.get(), cx.slept.get()), (1, 5));

        let mut buf = [0u8; 256];
        let mut out = ToolOutput::new(&mut buf);
        ready(tools.call(1, Arguments::new(br#"{"n":-3}"#), &cx, &mut out)).unwrap();
        let text = out.finish().unwrap();
        assert_eq!(
            text,
            r#"{"resultType":"complete","content":[{"type":"text","text":"n=\"-3\"\n"}],"structuredContent":{"n":-3},"isError":true}"#.as_bytes()
        );
        assert_eq!(json::validate(text, 8), Ok(()));

        let mut buf = [0u8; 64];
        let mut out = ToolOutput::new(&mut buf);
        assert_eq!(
            ready(tools.call(2, Arguments::new(b"{}"), &cx, &mut out)),
            Err(UNKNOWN_TOOL)
        );
    }

    #[test]
    fn output_reports_overflow_and_order() {
        let mut buf = [0u8; 40];
        let mut out = ToolOutput::new(&mut buf);
        out.text("a longer text than the buffer holds");
        match out.finish() {
            Err(OutputError::Overflow(o)) => assert!(o.needed > 40),
            other => panic!("{other:?}"),
        }
        let mut buf = [0u8; 128];
        let mut out = ToolOutput::new(&mut buf);
        out.structured(|w| {
            w.raw(b"{}");
        })
        .text("late");
        assert_eq!(out.finish(), Err(OutputError::Order));
        let mut buf = [0u8; 128];
        let out = ToolOutput::new(&mut buf);
        assert_eq!(
            out.finish().unwrap(),
            br#"{"resultType":"complete","content":[]}"#
        );
    }

    #[test]
    fn arguments_read_members() {
        let a = Arguments::new(br#" {"on":true,"n":7,"neg":-1,"s":"x\ny","o":{}} "#);
        assert_eq!(a.bool(b"on"), Some(true));
        assert_eq!(a.u64(b"n"), Some(7));
        assert_eq!(a.u64(b"neg"), None);
        assert_eq!(a.i64(b"neg"), Some(-1));
        let mut buf = [0u8; 8];
        assert_eq!(a.str(b"s", &mut buf), Some("x\ny"));
        assert_eq!(a.str(b"o", &mut buf), None);
        assert_eq!(Arguments::new(b"null").raw(), b"{}");
        let mut buf = [0u8; 128];
        let mut w = JsonWriter::new(&mut buf);
        write_progress(&mut w, b"\"t\"", 2, Some(4), Some("step 2"));
        assert_eq!(
            w.finish().unwrap(),
            br#"{"progressToken":"t","progress":2,"total":4,"message":"step 2"}"#
        );
    }
}
