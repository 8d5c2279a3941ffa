//! The device tools under the tokio driver: the code the embassy firmware
//! runs, served by `App::portable_tools` and called through our `Channel`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use mcpwire_core::grpc::Code;
use mcpwire_device_tools::{Board, INSTRUCTIONS, SERVER_NAME, SERVER_VERSION, SimBoard, tools};
use mcpwire_tokio::{App, Client, Server, StreamMessage, client::grpc};
use serde_json::{Value, json};

static BOARD: SimBoard = SimBoard::new(21_500);

async fn serve() -> (Client, tokio::sync::oneshot::Sender<()>) {
    let app = App::new(SERVER_NAME, SERVER_VERSION)
        .instructions(INSTRUCTIONS)
        .portable_tools(tools(&BOARD));
    let server = Server::bind("127.0.0.1:0").await.expect("bind");
    let addr = server.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve_with_shutdown(app, async {
        let _ = stopped.await;
    }));
    (
        Client::grpc(grpc::Config::new(addr.to_string()))
            .await
            .unwrap(),
        stop,
    )
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn device_tools_run_under_tokio() {
    let (channel, _stop) = serve().await;

    let list = channel
        .request("tools/list", json!({}))
        .await
        .expect("list");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["read_sensor", "toggle_output", "slow_task"]);

    BOARD.set_temperature(23_250);
    let r = channel
        .call(call("read_sensor", json!({})))
        .await
        .expect("call")
        .response()
        .await
        .expect("read_sensor");
    let result = &r["result"];
    assert_eq!(result["content"][0]["text"], "temperature 23.250 °C", "{r}");
    assert_eq!(result["structuredContent"]["millicelsius"], 23_250, "{r}");

    let r = channel
        .call(call("toggle_output", json!({"on": true})))
        .await
        .expect("call")
        .response()
        .await
        .expect("toggle_output");
    assert_eq!(r["result"]["structuredContent"], json!({"on": true}), "{r}");
    assert!(BOARD.output());
    let r = channel
        .call(call("toggle_output", json!({})))
        .await
        .expect("call")
        .response()
        .await
        .expect("toggle_output");
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"on": false}),
        "{r}"
    );
    assert!(!BOARD.output());

    // Bad arguments: the tool's JSON-RPC error, in band.
    let r = channel
        .call(call("slow_task", json!({"steps": 0})))
        .await
        .expect("call")
        .response()
        .await
        .expect("slow_task");
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[tokio::test]
async fn slow_task_progress_cancel_and_deadline() {
    let (channel, _stop) = serve().await;
    channel
        .request("tools/list", json!({}))
        .await
        .expect("list");

    // Progress: one notification a step, then the result.
    let mut request = call("slow_task", json!({"steps": 3, "delay_ms": 20}));
    request["params"]["_meta"] = json!({"progressToken": "t1"});
    let mut stream = channel.call(request).await.expect("call");
    let mut progress = Vec::new();
    let response = loop {
        match stream.next().await.expect("next") {
            Some(StreamMessage::Notification(n)) => {
                assert_eq!(n["method"], "notifications/progress");
                assert_eq!(n["params"]["progressToken"], "t1");
                assert_eq!(n["params"]["total"], 3);
                progress.push(n["params"]["progress"].as_u64().expect("progress"));
            }
            Some(StreamMessage::Response(r)) => break r,
            None => panic!("no response"),
        }
    };
    assert_eq!(progress, [1, 2, 3]);
    assert_eq!(
        response["result"]["content"][0]["text"],
        "done after 3 steps"
    );

    // Cancel: drop the stream after the first step (RST_STREAM CANCEL);
    // the connection goes on serving.
    let mut request = call("slow_task", json!({"steps": 50, "delay_ms": 50}));
    request["params"]["_meta"] = json!({"progressToken": "t2"});
    let mut stream = channel.call(request).await.expect("call");
    match stream.next().await.expect("next") {
        Some(StreamMessage::Notification(n)) => assert_eq!(n["params"]["progress"], 1),
        other => panic!("{other:?}"),
    }
    drop(stream);
    let r = channel
        .call(call("read_sensor", json!({})))
        .await
        .expect("call")
        .response()
        .await
        .expect("after cancel");
    assert!(r["result"].is_object(), "{r}");

    // Deadline: the server ends the call with DEADLINE_EXCEEDED.
    let started = Instant::now();
    let e = channel
        .call_with_timeout(
            call("slow_task", json!({"steps": 10, "delay_ms": 200})),
            Some(Duration::from_millis(300)),
        )
        .await
        .expect("call")
        .response()
        .await
        .expect_err("deadline");
    assert_eq!(e.status, Code::DeadlineExceeded, "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Counts its steps, to see that a cancelled call stops.
struct Ticker;

static TICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl mcpwire_core::mcp::tool::Tool for Ticker {
    const INFO: mcpwire_core::mcp::registry::ToolInfo<'static> =
        mcpwire_core::mcp::registry::ToolInfo {
            name: "ticker",
            title: None,
            description: "Ticks every 20 ms, 500 times.",
            input_schema: r#"{"type":"object"}"#,
        };

    async fn call<C: mcpwire_core::mcp::tool::ToolContext>(
        &self,
        _args: mcpwire_core::mcp::tool::Arguments<'_>,
        cx: &C,
        out: &mut mcpwire_core::mcp::tool::ToolOutput<'_>,
    ) -> Result<(), mcpwire_core::mcp::RpcError> {
        for i in 1..=500 {
            cx.sleep(Duration::from_millis(20)).await;
            TICKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            cx.progress(i, None, None).await;
        }
        out.text("ticked");
        Ok(())
    }
}

#[tokio::test]
async fn a_cancelled_portable_tool_stops() {
    let app = App::new("ticker", "0").portable_tools((Ticker,));
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let channel = Client::grpc(grpc::Config::new(server.local_addr().unwrap().to_string()))
        .await
        .unwrap();
    tokio::spawn(server.serve(app));
    let mut request = call("ticker", json!({}));
    request["params"]["_meta"] = json!({"progressToken": 1});
    let mut stream = channel.call(request).await.unwrap();
    assert!(matches!(
        stream.next().await.unwrap(),
        Some(StreamMessage::Notification(_))
    ));
    drop(stream);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after_cancel = TICKS.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = TICKS.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        after_cancel, later,
        "the tool went on ticking after the cancel"
    );
}
