//! Calls the device tools through our tokio `Channel` (one connection, the
//! tunnel binding), as a host program would call a board.
//!
//! ```text
//! mcpwire-device-probe HOST:PORT [scenario...]
//! ```
//!
//! `MCPWIRE_TOKEN`, if set, is sent with every call as a bearer token (the
//! device app requires one unless it runs with `--no-auth`).
//!
//! Scenarios (all by default): discover, tools-list, read-sensor, toggle,
//! progress, cancel, deadline, unknown-tool, listen. Each prints one JSON
//! line of what it saw; the last line is "N passed, N failed". Exit status
//! 0 when all passed, 1 otherwise, 2 on a usage error.
//!
//! `cancel` and `deadline` run one call more than the device has handler
//! slots, then a call that must complete: a handler that did not stop on
//! the reset or the deadline would still hold its slot, and the device
//! would answer "server busy".

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpwire_core::grpc::Code;
use mcpwire_device_tools::app::HANDLERS;
use mcpwire_tokio::{CallError, Client, StreamMessage, client::grpc};
use serde_json::{Value, json};

const SCENARIOS: &[&str] = &[
    "discover",
    "tools-list",
    "read-sensor",
    "toggle",
    "progress",
    "cancel",
    "deadline",
    "unknown-tool",
    "listen",
];

type Outcome = Result<Value, String>;

fn tool(name: &str, arguments: Value, token: Option<&str>) -> Value {
    let mut r = json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}});
    if let Some(t) = token {
        r["params"]["_meta"] = json!({"progressToken": t});
    }
    r
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(what()) }
}

async fn result_of(channel: &Client, request: Value) -> Outcome {
    let r = channel
        .call(request)
        .await
        .map_err(|e| e.to_string())?
        .response()
        .await
        .map_err(|e| e.to_string())?;
    match r.get("result") {
        Some(v) => Ok(v.clone()),
        None => Err(format!("error response {r}")),
    }
}

async fn discover(ch: &Client) -> Outcome {
    let r = ch
        .request("server/discover", json!({}))
        .await
        .map_err(|e| e.to_string())?;
    let result = &r["result"];
    let versions = &result["supportedVersions"];
    check(
        versions
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        || format!("supportedVersions {versions}"),
    )?;
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    check(info["name"] == "mcpwire-device", || {
        format!("serverInfo {info}")
    })?;
    Ok(json!({"serverInfo": info, "capabilities": result["capabilities"]}))
}

async fn tools_list(ch: &Client) -> Outcome {
    let r = ch
        .request("tools/list", json!({}))
        .await
        .map_err(|e| e.to_string())?;
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .ok_or("no tools")?
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    check(
        names == ["read_sensor", "toggle_output", "slow_task"],
        || format!("tools {names:?}"),
    )?;
    Ok(json!({"tools": names}))
}

async fn read_sensor(ch: &Client) -> Outcome {
    let result = result_of(ch, tool("read_sensor", json!({}), None)).await?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    check(text.starts_with("temperature "), || {
        format!("text {text:?}")
    })?;
    let mc = &result["structuredContent"]["millicelsius"];
    check(mc.is_i64(), || format!("structuredContent {result}"))?;
    Ok(json!({"text": text, "millicelsius": mc}))
}

async fn toggle(ch: &Client) -> Outcome {
    let on = result_of(ch, tool("toggle_output", json!({"on": true}), None)).await?;
    check(on["structuredContent"] == json!({"on": true}), || {
        format!("set on: {on}")
    })?;
    let off = result_of(ch, tool("toggle_output", json!({}), None)).await?;
    check(off["structuredContent"] == json!({"on": false}), || {
        format!("toggle: {off}")
    })?;
    Ok(json!({"set": on["structuredContent"], "toggled": off["structuredContent"]}))
}

async fn progress(ch: &Client) -> Outcome {
    let started = Instant::now();
    let mut call = ch
        .call(tool(
            "slow_task",
            json!({"steps": 4, "delay_ms": 50}),
            Some("probe-progress"),
        ))
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    let response = loop {
        match call.next().await.map_err(|e| e.to_string())? {
            Some(StreamMessage::Notification(n)) => {
                check(n["method"] == "notifications/progress", || {
                    format!("notification {n}")
                })?;
                check(n["params"]["progressToken"] == "probe-progress", || {
                    format!("token in {n}")
                })?;
                seen.push(n["params"]["progress"].clone());
            }
            Some(StreamMessage::Response(r)) => break r,
            None => return Err("no response".into()),
        }
    };
    check(seen == [json!(1), json!(2), json!(3), json!(4)], || {
        format!("progress {seen:?}")
    })?;
    let text = &response["result"]["content"][0]["text"];
    check(text == "done after 4 steps", || {
        format!("response {response}")
    })?;
    Ok(json!({"progress": seen, "text": text, "elapsed_ms": started.elapsed().as_millis()}))
}

/// A slow task that must run to its end: the device has a free handler.
async fn completes(ch: &Client) -> Result<(), String> {
    let r = result_of(
        ch,
        tool("slow_task", json!({"steps": 2, "delay_ms": 10}), None),
    )
    .await?;
    check(r["content"][0]["text"] == "done after 2 steps", || {
        format!("after: {r}")
    })
}

async fn cancel(ch: &Client) -> Outcome {
    let mut cancelled = Vec::new();
    for i in 0..=HANDLERS {
        let token = format!("probe-cancel-{i}");
        let mut call = ch
            .call(tool(
                "slow_task",
                json!({"steps": 100, "delay_ms": 100}),
                Some(&token),
            ))
            .await
            .map_err(|e| e.to_string())?;
        match call.next().await.map_err(|e| e.to_string())? {
            Some(StreamMessage::Notification(n)) => check(n["params"]["progress"] == 1, || {
                format!("first message {n}")
            })?,
            other => return Err(format!("first message {other:?}")),
        }
        // Dropping the stream resets it with CANCEL.
        drop(call);
        cancelled.push(token);
    }
    completes(ch).await?;
    Ok(
        json!({"cancelled_after_first_progress": cancelled.len(), "handlers": HANDLERS, "then": "a slow_task completed"}),
    )
}

async fn deadline(ch: &Client) -> Outcome {
    let mut elapsed = Vec::new();
    for _ in 0..=HANDLERS {
        let started = Instant::now();
        let e: CallError = match ch
            .call_with_timeout(
                tool("slow_task", json!({"steps": 20, "delay_ms": 100}), None),
                Some(Duration::from_millis(300)),
            )
            .await
        {
            Ok(call) => match call.response().await {
                Ok(r) => return Err(format!("answered past the deadline: {r}")),
                Err(e) => e,
            },
            Err(e) => e,
        };
        check(e.status == Code::DeadlineExceeded, || format!("{e:?}"))?;
        let ms = started.elapsed().as_millis();
        check(ms < 1500, || format!("ended after {ms} ms"))?;
        elapsed.push(ms);
    }
    completes(ch).await?;
    Ok(
        json!({"status": "DEADLINE_EXCEEDED", "elapsed_ms": elapsed, "then": "a slow_task completed"}),
    )
}

/// The core's answer to a tool the device does not have.
async fn unknown_tool(ch: &Client) -> Outcome {
    let r = ch
        .call(tool("no_such_tool", json!({}), None))
        .await
        .map_err(|e| e.to_string())?
        .response()
        .await
        .map_err(|e| e.to_string())?;
    let error = &r["error"];
    check(
        error["code"] == -32602 && error["message"] == "Unknown tool",
        || format!("response {r}"),
    )?;
    Ok(json!({"error": error}))
}

/// `subscriptions/listen` on a device without a listen source: the core
/// acknowledges with an empty filter and the subscription id; the stream
/// stays open until the client ends it.
async fn listen(ch: &Client) -> Outcome {
    let mut call = ch
        .call(json!({
            "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}},
        }))
        .await
        .map_err(|e| e.to_string())?;
    let id = call.id().clone();
    let ack = match call.next().await.map_err(|e| e.to_string())? {
        Some(StreamMessage::Notification(n)) => n,
        other => return Err(format!("first message {other:?}")),
    };
    let params = &ack["params"];
    check(
        ack["method"] == "notifications/subscriptions/acknowledged"
            && params["notifications"] == json!({})
            && params["_meta"]["io.modelcontextprotocol/subscriptionId"] == id,
        || format!("acknowledgement {ack} (id {id})"),
    )?;
    // Dropping the stream resets it with CANCEL.
    drop(call);
    Ok(json!({"acknowledged": params}))
}

async fn run(ch: &Client, scenario: &str) -> Outcome {
    let work = async {
        match scenario {
            "discover" => discover(ch).await,
            "tools-list" => tools_list(ch).await,
            "read-sensor" => read_sensor(ch).await,
            "toggle" => toggle(ch).await,
            "progress" => progress(ch).await,
            "cancel" => cancel(ch).await,
            "deadline" => deadline(ch).await,
            "unknown-tool" => unknown_tool(ch).await,
            "listen" => listen(ch).await,
            _ => Err(format!("unknown scenario {scenario}")),
        }
    };
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .unwrap_or_else(|_| Err("did not finish within 30 s".into()))
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(addr) = args.next().filter(|a| !a.starts_with('-')) else {
        eprintln!(
            "usage: mcpwire-device-probe HOST:PORT [scenario...]\nscenarios: {}",
            SCENARIOS.join(" ")
        );
        return ExitCode::from(2);
    };
    let mut selected: Vec<String> = args.collect();
    if let Some(bad) = selected.iter().find(|s| !SCENARIOS.contains(&s.as_str())) {
        eprintln!("unknown scenario {bad}; scenarios: {}", SCENARIOS.join(" "));
        return ExitCode::from(2);
    }
    if selected.is_empty() {
        selected = SCENARIOS.iter().map(|s| (*s).to_owned()).collect();
    }
    let mut config = grpc::Config::new(addr);
    config.bearer = std::env::var("MCPWIRE_TOKEN").ok();
    let channel = match Client::grpc(config).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("mcpwire-device-probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The Client mirrors the tools' x-mcp-header annotations from the
    // last tools/list.
    let _ = channel.request("tools/list", json!({})).await;
    let (mut passed, mut failed) = (0, 0);
    for scenario in &selected {
        let line = match run(&channel, scenario).await {
            Ok(seen) => {
                passed += 1;
                json!({"client": "channel", "scenario": scenario, "ok": true, "seen": seen})
            }
            Err(reason) => {
                failed += 1;
                json!({"client": "channel", "scenario": scenario, "ok": false, "reason": reason})
            }
        };
        println!("{line}");
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
