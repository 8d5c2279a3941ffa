//! Keepalive PINGs on the tokio `Channel`: a server that answers the
//! handshake and then goes silent (no FIN, no RST: a host that died behind
//! its interface) fails the call in bounded time; `mcpwire serve`'s demo
//! app answers the PINGs and the calls go on; no PING without keepalive.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually_every, start_on_with_tick};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::{Client, Keepalive, client::grpc};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS, and the ACK of the client's.
const SERVER_HELLO: [u8; 18] = [0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0];

/// (type, flags) of each whole frame of one direction of a connection,
/// after the client preface when it starts with one.
fn frames(bytes: &[u8]) -> Vec<(u8, u8)> {
    let mut b = bytes.strip_prefix(PREFACE).unwrap_or(bytes);
    let mut v = Vec::new();
    while b.len() >= 9 {
        let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
        if b.len() < 9 + len {
            break;
        }
        v.push((b[3], b[4]));
        b = &b[9 + len..];
    }
    v
}

/// PINGs (not acknowledgements) in `bytes`.
fn pings(bytes: &[u8]) -> usize {
    frames(bytes)
        .iter()
        .filter(|(t, f)| *t == 6 && f & 1 == 0)
        .count()
}

fn ping_acks(bytes: &[u8]) -> usize {
    frames(bytes)
        .iter()
        .filter(|(t, f)| *t == 6 && f & 1 == 1)
        .count()
}

/// A server that answers the HTTP/2 handshake, then reads everything and
/// answers nothing, never closing. Keeps what each connection wrote.
struct Silent {
    addr: String,
    accepted: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Silent {
    /// What the first connection wrote, once `done` holds for it (the
    /// server's task reads on its own time), or after 10 s what came.
    async fn first_once(&self, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let received = Arc::clone(&self.received);
        eventually_every(ms(10), Duration::from_secs(10), || {
            received.lock().unwrap().first().is_some_and(|b| done(b))
        })
        .await;
        self.received
            .lock()
            .unwrap()
            .first()
            .cloned()
            .unwrap_or_default()
    }
}

async fn silent() -> Silent {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(Mutex::new(Vec::new()));
    let (a, r) = (accepted.clone(), received.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let n = a.fetch_add(1, Ordering::SeqCst);
            r.lock().unwrap().push(Vec::new());
            let r = r.clone();
            tokio::spawn(async move {
                let mut hello = false;
                let mut buf = vec![0u8; 16 << 10];
                // Reads until the client gives up; the socket is held open
                // (dropped only then).
                while let Ok(k) = sock.read(&mut buf).await {
                    if k == 0 {
                        break;
                    }
                    r.lock().unwrap()[n].extend_from_slice(&buf[..k]);
                    if !hello {
                        hello = true;
                        let _ = sock.write_all(&SERVER_HELLO).await;
                    }
                }
                // The client closed its side: hold ours, silent, a while.
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(sock);
            });
        }
    });
    Silent {
        addr,
        accepted,
        received,
    }
}

fn config(addr: &str, keepalive: Option<Keepalive>) -> grpc::Config {
    let mut c = grpc::Config::new(addr);
    c.keepalive = keepalive;
    c
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_fails_the_call_unavailable_within_a_second() {
    let s = silent().await;
    let channel = Client::grpc(config(&s.addr, Some(Keepalive::new(ms(200), ms(200)))))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let e = tokio::time::timeout(
        Duration::from_secs(5),
        channel.request("tools/list", json!({})),
    )
    .await
    .expect("the call ends")
    .unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    assert!(e.message.contains("stopped answering pings"), "{e:?}");
    assert!(took >= ms(350) && took < ms(1000), "{took:?}");
    // Wait for the PING, then count.
    assert_eq!(pings(&s.first_once(|b| pings(b) >= 1).await), 1);

    // The next call connects anew (and meets the same silence).
    let e = tokio::time::timeout(
        Duration::from_secs(5),
        channel.request("tools/list", json!({})),
    )
    .await
    .expect("the second call ends")
    .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    let accepted = Arc::clone(&s.accepted);
    eventually_every(ms(10), Duration::from_secs(10), || {
        accepted.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keepalive_no_ping_goes_out() {
    let s = silent().await;
    let mut c = config(&s.addr, None);
    c.request_timeout = ms(800);
    let channel = Client::grpc(c).await.unwrap();
    let e = channel.request("tools/list", json!({})).await.unwrap_err();
    // Only the deadline ends it.
    assert_eq!(e.status, Code::DeadlineExceeded, "{e:?}");
    // Wait for the call's HEADERS.
    let got = s
        .first_once(|b| frames(b).iter().any(|(t, _)| *t == 1))
        .await;
    assert!(
        frames(&got).iter().any(|(t, _)| *t == 1),
        "the call went out"
    );
    assert_eq!(pings(&got), 0, "{:?}", frames(&got));
}

/// Forwards one connection at a time to `to`, keeping a copy of each
/// direction: (listening address, client to server, server to client).
async fn tap(to: String) -> (String, Arc<Mutex<Vec<u8>>>, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let up = Arc::new(Mutex::new(Vec::new()));
    let down = Arc::new(Mutex::new(Vec::new()));
    let (u, d) = (up.clone(), down.clone());
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = TcpStream::connect(to).await.unwrap();
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        let a = tokio::spawn(async move {
            let mut buf = vec![0u8; 16 << 10];
            while let Ok(n @ 1..) = cr.read(&mut buf).await {
                u.lock().unwrap().extend_from_slice(&buf[..n]);
                if sw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        let mut buf = vec![0u8; 16 << 10];
        while let Ok(n @ 1..) = sr.read(&mut buf).await {
            d.lock().unwrap().extend_from_slice(&buf[..n]);
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = a.await;
    });
    (addr, up, down)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_server_answers_pings_and_calls_go_on() {
    let h = start_on_with_tick("127.0.0.1:0", Duration::from_secs(3600)).await;
    let (addr, up, down) = tap(h.addr.to_string()).await;
    let keepalive = Keepalive {
        while_idle: true,
        ..Keepalive::new(ms(100), ms(200))
    };
    let channel = Client::grpc(config(&addr, Some(keepalive))).await.unwrap();
    let r = channel.request("server/discover", json!({})).await.unwrap();
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    // A call that stays silent over several intervals.
    let r = channel
        .request(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 700}}),
        )
        .await
        .unwrap();
    assert!(r.get("result").is_some(), "{r}");
    // Idle over several intervals: pinged (while_idle), still connected.
    tokio::time::sleep(ms(500)).await;
    let r = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "still here"}}),
        )
        .await
        .unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "still here", "{r}");
    let sent = pings(&up.lock().unwrap());
    // Acknowledgements still on their way through the tap come first.
    let d = Arc::clone(&down);
    eventually_every(ms(10), Duration::from_secs(10), || {
        ping_acks(&d.lock().unwrap()) + 1 >= sent
    })
    .await;
    let acked = ping_acks(&down.lock().unwrap());
    assert!(sent >= 6, "{sent} PINGs in 1.2 s of quiet");
    assert!(acked + 1 >= sent, "{acked} of {sent} acknowledged");
    h.stop().await;
}
