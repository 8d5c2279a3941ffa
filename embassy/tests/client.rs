//! The embassy client over an in-memory `embedded-io-async` connection (two
//! pipes, no network, through [`Staged`]): it talks to the core's server
//! engine, run by a small loop in the test. What a user sees: `tools/list`
//! answered; a call whose stream the server refuses once is sent once more
//! and answered; a call refused twice fails visibly as refused, and the
//! connection still serves the next call; a call whose server asks for
//! input gets it, and its answer goes in the next round.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use embassy_futures::block_on;
use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_time::{Duration, with_timeout};
use embedded_io_async::{Read, Write};
use mcpwire_core::drive::{self, Feed};
use mcpwire_core::grpc::Code;
use mcpwire_core::h2::InlineStorage;
use mcpwire_core::mcp::client::{CallOptions, ClientConfig};
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{Server as Engine, ServerConfig, ServerEvent};
use mcpwire_core::mcp::{CallStore, SlabStore};
use mcpwire_embassy::client::{self, Client, ClientError, Staged, Step};
use serde_json::{Value, json};

mod support;

use support::{INFO, now, request};

type Wire = Pipe<CriticalSectionRawMutex, 4096>;
/// One end of the connection: reads one pipe, writes the other.
type End<'p> = support::End<'p, 4096>;
type ClientEngine = mcpwire_core::mcp::client::Client<
    SlabStore<8192, 4>,
    2,
    4096,
    16384,
    InlineStorage<16384>,
    2048,
>;
type ServerEngine = Engine<'static, Refusing, 4, 4096, 16384>;

const ECHO: ToolInfo<'static> = ToolInfo {
    name: "echo",
    title: None,
    description: "Returns its text.",
    input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
};
/// Asks for input once (no `requestState` yet), then answers `echo`'s way.
const ASK: ToolInfo<'static> = ToolInfo {
    name: "ask",
    title: None,
    description: "Asks once.",
    input_schema: r#"{"type":"object"}"#,
};
const TOOLS: [ToolInfo<'static>; 2] = [ECHO, ASK];

fn registry() -> Registry<'static> {
    Registry::new(INFO, &TOOLS)
}

/// A slab store that refuses its first `refuse` buffers: the server engine
/// then refuses the call's stream (REFUSED_STREAM) unprocessed.
struct Refusing {
    inner: SlabStore<8192, 8>,
    refuse: usize,
    refused: usize,
}

impl CallStore for Refusing {
    type Buf = <SlabStore<8192, 8> as CallStore>::Buf;
    fn max_len(&self) -> usize {
        self.inner.max_len()
    }
    fn take(&mut self, len: usize) -> Option<Self::Buf> {
        if self.refused < self.refuse {
            self.refused += 1;
            return None;
        }
        self.inner.take(len)
    }
    fn grow(&mut self, buf: &mut Self::Buf, len: usize) -> bool {
        self.inner.grow(buf, len)
    }
    fn bytes<'a>(&'a self, buf: &'a Self::Buf) -> &'a [u8] {
        self.inner.bytes(buf)
    }
    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Self::Buf) -> &'a mut [u8] {
        self.inner.bytes_mut(buf)
    }
    fn put(&mut self, buf: Self::Buf) {
        self.inner.put(buf)
    }
}

/// Answers every tool call `echo`'s way (its `params` as text), keeping
/// the `params` it was asked with in `seen`; `ask` without a
/// `requestState` asks for input first.
fn answer(engine: &mut ServerEngine, seen: &mut Vec<String>) {
    while let Some(e) = engine.poll_event() {
        if let ServerEvent::Request { call } = e {
            let params = engine.request(call).expect("its request").params;
            let params = String::from_utf8_lossy(params).into_owned();
            let parsed: Value = serde_json::from_str(&params).expect("json");
            let result = if parsed["name"] == "ask" && parsed.get("requestState").is_none() {
                json!({"resultType": "input_required",
                    "inputRequests": {"ok": {"method": "elicitation/create",
                        "params": {"mode": "form", "message": "Proceed?",
                            "requestedSchema": {"type": "object"}}}},
                    "requestState": "s1"})
            } else {
                json!({ "content": [{ "type": "text", "text": params }] })
            };
            engine
                .respond(call, &serde_json::to_vec(&result).expect("json"))
                .expect("answered");
            seen.push(params);
        }
    }
}

/// The server side: the core's engine over `io`, until the input ends.
async fn serve(engine: &mut ServerEngine, mut io: End<'_>, seen: &mut Vec<String>) {
    let mut input = [0u8; 2048];
    let mut out = [0u8; 2048];
    loop {
        while engine.wants_transmit() {
            let n = drive::fill(engine, &mut out);
            assert!(n > 0, "output owed, nothing written");
            io.write_all(&out[..n]).await.expect("write");
        }
        let n = io.read(&mut input).await.expect("read");
        if n == 0 {
            return;
        }
        let mut feed = Feed::new(&input[..n]);
        loop {
            let step = feed.step(engine, now());
            answer(engine, seen);
            match step {
                drive::Step::Consumed => {}
                drive::Step::Transmit => {
                    while engine.wants_transmit() {
                        let n = engine.poll_transmit(&mut out);
                        io.write_all(&out[..n]).await.expect("write");
                    }
                }
                drive::Step::Done => break,
                drive::Step::Wait | drive::Step::Stuck => panic!("server engine: {step:?}"),
            }
        }
    }
}

/// What one call gave.
#[derive(Debug, Default)]
struct Outcome {
    /// What the server asked, at each `InputRequired`.
    inputs: Vec<Value>,
    response: Option<Value>,
    /// The code, `grpc-status`, transport failure, refused, retried and
    /// the JSON-RPC error response.
    failed: Option<(i32, Option<Code>, bool, bool, bool, Value)>,
}

type McpClient<'s> =
    Client<'s, SlabStore<8192, 4>, 2, 4096, 16384, InlineStorage<16384>, 2048, Staged<'s, End<'s>>>;

async fn run_call(client: &mut McpClient<'_>, body: &Value) -> Result<Outcome, ClientError> {
    run_call_with(client, body, CallOptions::default(), &[]).await
}

/// A call with `options`, each of its `InputRequired` answered with the
/// next of `answers`.
async fn run_call_with(
    client: &mut McpClient<'_>,
    body: &Value,
    options: CallOptions,
    answers: &[Value],
) -> Result<Outcome, ClientError> {
    let body = serde_json::to_vec(body).expect("json");
    let mut out = vec![0u8; 8192];
    let mut call = client.call_with(&body, options).await?;
    let mut seen = Outcome::default();
    loop {
        match call.next(&mut out).await? {
            Step::Notification(_) => {}
            Step::InputRequired(requests) => {
                seen.inputs
                    .push(serde_json::from_slice(requests).expect("json"));
                let answer = &answers[seen.inputs.len() - 1];
                call.answer_input(&serde_json::to_vec(answer).expect("json"))
                    .await?;
            }
            Step::Response(j) => seen.response = Some(serde_json::from_slice(j).expect("json")),
            Step::Failed {
                code,
                response,
                diagnostics: d,
            } => {
                seen.failed = Some((
                    code,
                    d.grpc_status,
                    d.transport,
                    d.refused,
                    d.retried,
                    serde_json::from_slice(response).expect("json"),
                ))
            }
            Step::Done => return Ok(seen),
        }
    }
}

fn echo(id: u64, text: &str) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({ "name": "echo", "arguments": { "text": text } }),
    )
}

/// Runs `script` with a client connected to a server engine whose store
/// refuses its first `refuse` buffers; the script's result, how many
/// buffers the server refused and the `params` of the calls it ran.
fn with_server<T>(
    refuse: usize,
    script: impl AsyncFnOnce(&mut McpClient<'_>) -> T,
) -> (T, usize, Vec<String>) {
    let up = Wire::new();
    let down = Wire::new();
    let mut server = Box::new(ServerEngine::new(
        registry(),
        ServerConfig::default(),
        Refusing {
            inner: SlabStore::new(),
            refuse,
            refused: 0,
        },
        now(),
    ));
    let mut engine = Box::new(ClientEngine::new(
        ClientConfig::default(),
        SlabStore::new(),
        client::now(),
    ));
    let mut staging = vec![0u8; 4096];
    let mut seen = Vec::new();
    let out = block_on(with_timeout(Duration::from_secs(10), async {
        let mut client = Client::over(End { rx: &down, tx: &up }, &mut staging, &mut engine);
        let io = End { rx: &up, tx: &down };
        match select(script(&mut client), serve(&mut server, io, &mut seen)).await {
            Either::First(out) => out,
            Either::Second(()) => panic!("the server's input ended first"),
        }
    }))
    .expect("within 10 s");
    (out, server.store().refused, seen)
}

#[test]
fn tools_list_over_an_in_memory_connection() {
    let (o, refused, _) = with_server(0, async |client| {
        run_call(client, &request(json!(1), "tools/list", json!({}))).await
    });
    let o = o.expect("the call ran");
    assert_eq!(refused, 0);
    let r = o.response.expect("a response");
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["tools"][0]["name"], "echo", "{r}");
}

#[test]
fn a_refused_call_is_sent_once_more_and_answered() {
    let (o, refused, seen) =
        with_server(1, async |client| run_call(client, &echo(50, "again")).await);
    let o = o.expect("the call ran");
    // The first stream was refused unprocessed; the second one ran.
    assert_eq!(refused, 1);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(o.failed.is_none(), "{o:?}");
    let r = o.response.expect("a response");
    assert_eq!(r["id"], 50);
    let text = r["result"]["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("again"), "{r}");
}

#[test]
fn a_call_refused_twice_fails_as_refused() {
    let ((first, next), refused, seen) = with_server(2, async |client| {
        let first = run_call(client, &echo(51, "no")).await;
        let next = run_call(client, &echo(52, "yes")).await;
        (first, next)
    });
    let first = first.expect("the call ran");
    // Sent twice, refused twice, never a third time, never run.
    assert_eq!(refused, 2);
    assert!(first.response.is_none(), "{first:?}");
    let (code, status, transport, was_refused, retried, response) =
        first.failed.expect("a failure");
    assert_eq!(status, Some(Code::Unavailable));
    assert!(transport && was_refused && retried, "{response}");
    assert_eq!(response["id"], 51);
    assert_eq!(response["error"]["code"], code);
    // The connection still serves: the next call runs.
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("yes"));
    let next = next.expect("the next call ran");
    assert_eq!(next.response.expect("a response")["id"], 52);
}

/// A call that answers input gets what the server asks; its answer goes in
/// the next round's request (a new id, `inputResponses`, the
/// `requestState` echoed), whose result ends the call. Without
/// `answers_input` the `input_required` result is the response.
#[test]
fn a_server_that_asks_for_input_gets_the_answer_in_the_next_round() {
    let ((asked, plain), _, seen) = with_server(0, async |client| {
        let call = request(json!(60), "tools/call", json!({ "name": "ask" }));
        let answers = [json!({ "ok": { "action": "accept" } })];
        let asked = run_call_with(client, &call, CallOptions::answering_input(), &answers).await;
        let plain = run_call(client, &call).await;
        (asked, plain)
    });
    let asked = asked.expect("the call ran");
    assert_eq!(asked.inputs.len(), 1, "{asked:?}");
    assert_eq!(asked.inputs[0]["ok"]["params"]["message"], "Proceed?");
    let r = asked.response.expect("a response");
    assert_eq!(r["id"], "60#1", "{r}");
    let text = r["result"]["content"][0]["text"].as_str().expect("text");
    let params: Value = serde_json::from_str(text).expect("json");
    assert_eq!(
        params["inputResponses"],
        json!({ "ok": { "action": "accept" } })
    );
    assert_eq!(params["requestState"], "s1");
    assert_eq!(seen.len(), 3, "{seen:?}");
    let plain = plain.expect("the call ran");
    assert!(plain.inputs.is_empty());
    assert_eq!(
        plain.response.expect("a response")["result"]["resultType"],
        "input_required"
    );
}
