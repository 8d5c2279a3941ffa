//! The stdio binding over an in-memory serial link (two pipes, the input
//! one closable): a client writes JSON-RPC lines to [`Server::serve_stdio`]
//! and reads its lines back, with handler tasks running the tools. What a
//! client sees: the core's answers (`tools/list`, an unknown tool, a bad
//! line), a tool's progress before its result, a cancelled call that gets
//! no answer, more requests than calls waiting their turn, and the end of
//! input ending the link once every call is answered.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::convert::Infallible;
use core::sync::atomic::{AtomicBool, Ordering};

use embassy_futures::block_on;
use embassy_futures::join::join;
use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_sync::signal::Signal;
use embassy_time::{Duration, Timer, with_timeout};
use embedded_io_async::{ErrorType, Read, Write};
use mcpwire_embassy::{Config, ConnectionError, Server, SlabStore};
use serde_json::{Value, json};

mod support;

use support::{Count, INFO, Sleep, request};

type Wire = Pipe<CriticalSectionRawMutex, 4096>;
/// Two handler slots, 256 octets of arguments, 1 KiB of result.
type Mcp = Server<'static, (Count, Sleep), 2, 256, 1024>;
/// Two requests at a time, each line in a 1 KiB buffer.
type Store = SlabStore<1024, 2>;
const CALLS: usize = 2;

/// The device's end of the link: reads `rx` until the client closes it
/// (then 0, end of file), writes `tx`.
struct Device<'p> {
    rx: &'p Wire,
    tx: &'p Wire,
    closed: &'p AtomicBool,
    close: &'p Signal<CriticalSectionRawMutex, ()>,
}

impl ErrorType for Device<'_> {
    type Error = Infallible;
}

impl Read for Device<'_> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        loop {
            if let Ok(n) = self.rx.try_read(buf) {
                return Ok(n);
            }
            if self.closed.load(Ordering::SeqCst) {
                return Ok(0);
            }
            // Both are cancel-safe: a read dropped here loses nothing.
            if let Either::First(n) = select(self.rx.read(buf), self.close.wait()).await {
                return Ok(n);
            }
        }
    }
}

impl Write for Device<'_> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        Ok(self.tx.write(buf).await)
    }

    async fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

/// The client's end: writes lines, reads lines.
struct Host<'p> {
    tx: &'p Wire,
    rx: &'p Wire,
    closed: &'p AtomicBool,
    close: &'p Signal<CriticalSectionRawMutex, ()>,
    /// Read but not yet a whole line.
    pending: Vec<u8>,
}

impl Host<'_> {
    async fn send(&mut self, text: &str) {
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let n = self.tx.write(rest).await;
            rest = &rest[n..];
        }
    }

    async fn send_json(&mut self, message: &Value) {
        self.send(&(message.to_string() + "\n")).await;
    }

    /// The next line the device wrote, as JSON.
    async fn line(&mut self) -> Value {
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return serde_json::from_slice(&line[..i]).expect("a JSON line");
            }
            let mut buf = [0u8; 512];
            let n = self.rx.read(&mut buf).await;
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Ends the device's input.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.close.signal(());
    }

    /// Every line the device wrote until now (call after it ended).
    fn rest(&mut self) -> Vec<Value> {
        let mut buf = [0u8; 512];
        while let Ok(n) = self.rx.try_read(&mut buf) {
            self.pending.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8(std::mem::take(&mut self.pending)).expect("UTF-8");
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "a cut line: {text}"
        );
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

fn call(id: i64, tool: &str, arguments: Value) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({ "name": tool, "arguments": arguments }),
    )
}

/// Runs `client` against `serve_stdio` on an in-memory link with two
/// handler tasks; the client ends by closing the input, and the device
/// must then end with Ok. Fails after 10 s. The lines written after the
/// client returned.
fn run<F>(client: impl FnOnce(Host<'static>) -> F) -> Vec<Value>
where
    F: core::future::Future<Output = Host<'static>>,
{
    run_with_server(|host, _| client(host))
}

/// [`run`], the client given the server too.
fn run_with_server<F>(client: impl FnOnce(Host<'static>, &'static Mcp) -> F) -> Vec<Value>
where
    F: core::future::Future<Output = Host<'static>>,
{
    run_at_boot(&[], true, client)
}

/// [`run_with_server`], with `early` already on the link before anything
/// runs, and the handler tasks polled first or after the link's task (at
/// boot an executor may run them in either order).
fn run_at_boot<F>(
    early: &[u8],
    handlers_first: bool,
    client: impl FnOnce(Host<'static>, &'static Mcp) -> F,
) -> Vec<Value>
where
    F: core::future::Future<Output = Host<'static>>,
{
    let up: &'static Wire = Box::leak(Box::new(Wire::new()));
    assert_eq!(up.try_write(early), Ok(early.len()));
    let down: &'static Wire = Box::leak(Box::new(Wire::new()));
    let closed: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let close: &'static Signal<CriticalSectionRawMutex, ()> = Box::leak(Box::new(Signal::new()));
    let server: &'static Mcp = Box::leak(Box::new(
        Mcp::new(INFO, (Count, Sleep), Config::default()).expect("a valid schema"),
    ));
    let host = Host {
        tx: up,
        rx: down,
        closed,
        close,
        pending: Vec::new(),
    };
    let serve = async {
        let mut io = Device {
            rx: up,
            tx: down,
            closed,
            close,
        };
        let mut staging = [0u8; 256];
        server
            .serve_stdio::<Store, CALLS, _>(&mut io, &mut staging)
            .await
    };
    let client = async {
        let host = client(host, server).await;
        host.close();
        host
    };
    // The handlers attach to their slots at their first poll.
    let handlers = join(server.run_handler(), server.run_handler());
    let link = with_timeout(Duration::from_secs(10), join(serve, client));
    let ended = if handlers_first {
        match block_on(select(handlers, link)) {
            Either::First(never) => match never {},
            Either::Second(ended) => ended,
        }
    } else {
        match block_on(select(link, handlers)) {
            Either::First(ended) => ended,
            Either::Second(never) => match never {},
        }
    };
    match ended {
        Ok((served, mut host)) => {
            assert_eq!(served, Ok::<(), ConnectionError>(()));
            host.rest()
        }
        Err(_) => panic!("the link did not end in 10 s"),
    }
}

/// At boot the link's task may run before the handler tasks, with the
/// host's requests already waiting on the link: they are served, not
/// answered busy.
#[test]
fn requests_waiting_at_boot_wait_for_the_handlers() {
    let mut early = Vec::new();
    for id in 1..=2 {
        early.extend_from_slice(call(id, "count", json!({ "n": 1 })).to_string().as_bytes());
        early.push(b'\n');
    }
    let rest = run_at_boot(&early, false, |mut h, _| async move {
        let mut ids = Vec::new();
        while ids.len() < 2 {
            let line = h.line().await;
            if line.get("method").is_some() {
                continue;
            }
            assert!(line.get("error").is_none(), "{line}");
            assert!(line["result"].is_object(), "{line}");
            ids.push(line["id"].as_i64().expect("an id"));
        }
        ids.sort_unstable();
        assert_eq!(ids, [1, 2]);
        h
    });
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn tools_list_is_answered_by_the_core() {
    let rest = run(|mut h| async move {
        h.send_json(&request(json!("a"), "tools/list", json!({})))
            .await;
        let line = h.line().await;
        assert_eq!(line["id"], "a");
        let names: Vec<_> = line["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(names, [json!("count"), json!("sleep")]);
        h
    });
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_tool_runs_on_a_handler_with_its_progress_before_its_result() {
    run(|mut h| async move {
        let mut count = call(1, "count", json!({ "n": 2 }));
        count["params"]["_meta"]["progressToken"] = json!("p");
        h.send_json(&count).await;
        for i in 1..=2 {
            let line = h.line().await;
            assert_eq!(line["method"], "notifications/progress", "{line}");
            assert_eq!(line["params"]["progressToken"], "p");
            assert_eq!(line["params"]["progress"], i);
        }
        let last = h.line().await;
        assert_eq!(last["id"], 1);
        assert_eq!(last["result"]["content"][0]["text"], "counted 2");
        h
    });
}

#[test]
fn an_unknown_tool_is_answered_by_the_core() {
    run(|mut h| async move {
        h.send_json(&call(7, "nope", json!({}))).await;
        let line = h.line().await;
        assert_eq!(line["id"], 7);
        assert_eq!(line["error"]["code"], -32602);
        assert_eq!(line["error"]["message"], "Unknown tool");
        h
    });
}

/// The cancelled call gets no line, and its handler is free again: were
/// it still sleeping, one of the next two calls would find both handlers
/// busy.
#[test]
fn a_cancelled_call_stops_its_handler_and_gets_no_answer() {
    let rest = run(|mut h| async move {
        h.send_json(&call(1, "sleep", json!({}))).await;
        h.send_json(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": { "requestId": 1 },
        }))
        .await;
        // The handler stops at its next poll.
        Timer::after(Duration::from_millis(20)).await;
        h.send_json(&call(2, "sleep", json!({ "ms": 50 }))).await;
        h.send_json(&call(3, "sleep", json!({ "ms": 50 }))).await;
        let mut slept = Vec::new();
        for _ in 0..2 {
            let line = h.line().await;
            assert_eq!(line["result"]["content"][0]["text"], "slept", "{line}");
            slept.push(line["id"].as_i64().expect("an id"));
        }
        slept.sort_unstable();
        assert_eq!(slept, [2, 3]);
        h
    });
    // Nothing for call 1, even once the input ended.
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_bad_line_is_a_parse_error_and_the_link_goes_on() {
    run(|mut h| async move {
        h.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\"\n").await;
        let line = h.line().await;
        assert_eq!(line["id"], Value::Null);
        assert_eq!(line["error"]["code"], -32700);
        h.send_json(&call(2, "count", json!({}))).await;
        let line = h.line().await;
        assert_eq!(line["id"], 2);
        assert_eq!(line["result"]["content"][0]["text"], "counted 0");
        h
    });
}

/// The engine has two calls: a third request waits, unread, until a
/// handler answers, and is then answered too.
#[test]
fn requests_beyond_the_calls_wait_for_an_answer() {
    run(|mut h| async move {
        let lines = [
            call(1, "sleep", json!({ "ms": 100 })),
            call(2, "sleep", json!({ "ms": 200 })),
            request(json!(3), "tools/list", json!({})),
        ]
        .map(|m| m.to_string() + "\n");
        h.send(&lines.concat()).await;
        let ids: Vec<_> = [h.line().await, h.line().await, h.line().await]
            .iter()
            .map(|l| l["id"].clone())
            .collect();
        assert_eq!(ids, [json!(1), json!(3), json!(2)]);
        h
    });
}

/// The end of input ends `serve_stdio` with Ok, after the call in progress
/// is answered.
#[test]
fn the_end_of_input_ends_the_link_after_the_calls_in_progress() {
    let rest = run(|mut h| async move {
        h.send_json(&call(1, "sleep", json!({ "ms": 100 }))).await;
        h
    });
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], 1);
    assert_eq!(rest[0]["result"]["content"][0]["text"], "slept");
}

/// [`Server::shutdown`] ends a listen stream on stdio as the end of input
/// does: its result (the response to the listen request) is written, and
/// `serve_stdio` ends with Ok without the input ending.
#[test]
fn shutdown_ends_a_listen_stream_with_its_result() {
    let rest = run_with_server(|mut h, server| async move {
        let listen = request(
            json!("sub-1"),
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
        );
        h.send_json(&listen).await;
        let ack = h.line().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        server.shutdown();
        let result = h.line().await;
        assert_eq!(result["id"], "sub-1", "{result}");
        assert!(result.get("result").is_some(), "{result}");
        h
    });
    assert!(rest.is_empty(), "{rest:?}");
}
