//! Our HTTP/2 connection against the `h2` crate, in process: its client
//! against our echo server, and its server for our client. Bodies are larger
//! than the windows of both sides, in both directions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use mcpwire_interop::client::{self, Request};
use mcpwire_interop::{Config, echo};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

/// Sends `body` on `send` as the peer's windows allow, then ends the stream.
async fn send_body(mut send: h2::SendStream<Bytes>, body: Bytes) -> Result<(), h2::Error> {
    let mut rest = body;
    while !rest.is_empty() {
        send.reserve_capacity(rest.len().min(64 << 10));
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(n) => n?,
            None => break,
        };
        let chunk = rest.split_to(granted.min(rest.len()));
        send.send_data(chunk, rest.is_empty())?;
    }
    if rest.is_empty() {
        Ok(())
    } else {
        Err(h2::Error::from(h2::Reason::CANCEL))
    }
}

/// Reads a whole body, returning each chunk to the windows once read.
async fn read_body(mut body: h2::RecvStream) -> Result<Vec<u8>, h2::Error> {
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        got.extend_from_slice(&chunk);
        body.flow_control().release_capacity(chunk.len())?;
    }
    Ok(got)
}

/// One POST through an `h2` client; returns (status, content-type, body).
async fn h2_post(
    client: &mut h2::client::SendRequest<Bytes>,
    addr: &str,
    body: Vec<u8>,
) -> (u16, Option<String>, Vec<u8>) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/echo"))
        .header("content-type", "application/x-mcpwire-test")
        .body(())
        .expect("request");
    let mut ready = client.clone().ready().await.expect("client ready");
    let (response, send) = ready.send_request(request, false).expect("send request");
    let sending = tokio::spawn(send_body(send, Bytes::from(body)));
    let response = response.await.expect("response head");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let got = read_body(response.into_body())
        .await
        .expect("response body");
    sending.await.expect("sender task").expect("request body");
    (status, content_type, got)
}

/// Windows as small as the protocol's defaults, so that a 3 MiB body waits
/// on them many times.
fn small_windows() -> Config {
    Config {
        initial_window_size: 65_535,
        connection_window_size: 65_535,
        ..Config::default()
    }
}

#[tokio::test]
async fn h2_client_against_our_server() {
    h2_client_against_our_server_with(small_windows()).await;
}

/// A stream window below the default 65,535: until the client has our
/// SETTINGS it may send up to the default (RFC 9113 §6.5.3, §6.9.2), and
/// the h2 crate does, in its first flight.
#[tokio::test]
async fn h2_client_against_our_server_with_16k_stream_window() {
    h2_client_against_our_server_with(Config {
        initial_window_size: 16 << 10,
        ..small_windows()
    })
    .await;
}

async fn h2_client_against_our_server_with(config: Config) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(echo::serve(listener, config));

    let run = async {
        let tcp = TcpStream::connect(&addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let (mut client, connection) = h2::client::Builder::new()
            .initial_window_size(65_535)
            .initial_connection_window_size(65_535)
            .handshake::<_, Bytes>(tcp)
            .await
            .expect("h2 handshake");
        let conn_task = tokio::spawn(connection);

        let body = echo::pattern_body(3 << 20);
        let (status, content_type, got) = h2_post(&mut client, &addr, body.clone()).await;
        assert_eq!(status, 200);
        assert_eq!(content_type.as_deref(), Some("application/x-mcpwire-test"));
        assert!(
            got == body,
            "echo of {} octets differs from the {} sent",
            got.len(),
            body.len()
        );
        println!("h2 client: {} octets echoed by our server", got.len());

        // Several at once, each larger than our stream window.
        let mut calls = Vec::new();
        for k in 0..8 {
            let mut c = client.clone();
            let a = addr.clone();
            let body = common_body(100_000 + k * 1000);
            calls.push(tokio::spawn(async move {
                let got = h2_post(&mut c, &a, body.clone()).await;
                (body, got)
            }));
        }
        let mut total = 0;
        for call in calls {
            let (body, (status, _, got)) = call.await.expect("call task");
            assert_eq!(status, 200);
            assert!(got == body, "concurrent echo differs");
            total += got.len();
        }
        println!("h2 client: 8 concurrent streams, {total} octets echoed");
        drop(client);
        let _ = timeout(Duration::from_secs(5), conn_task).await;
    };
    timeout(LIMIT, run)
        .await
        .expect("h2 client against our server timed out");
    server.abort();
}

fn common_body(n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    echo::fill_pattern(&mut v, n as u64);
    v
}

/// An echo server on the `h2` crate with small windows: the body goes back
/// as it arrives, and its octets are released once their echo is queued.
async fn h2_echo_server(listener: TcpListener) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        // Without it, Nagle's algorithm and delayed ACKs add 40 ms a round.
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let mut conn = match h2::server::Builder::new()
                .initial_window_size(16 << 10)
                .initial_connection_window_size(65_535)
                .handshake::<_, Bytes>(tcp)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("h2 server handshake: {e}");
                    return;
                }
            };
            while let Some(request) = conn.accept().await {
                let Ok((request, mut respond)) = request else {
                    return;
                };
                tokio::spawn(async move {
                    let mut body = request.into_body();
                    let response = http::Response::builder()
                        .status(200)
                        .body(())
                        .expect("response");
                    let mut send = respond.send_response(response, false)?;
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk?;
                        let n = chunk.len();
                        let mut rest = chunk;
                        while !rest.is_empty() {
                            send.reserve_capacity(rest.len());
                            let granted = poll_fn(|cx| send.poll_capacity(cx))
                                .await
                                .ok_or_else(|| h2::Error::from(h2::Reason::CANCEL))??;
                            send.send_data(rest.split_to(granted.min(rest.len())), false)?;
                        }
                        body.flow_control().release_capacity(n)?;
                    }
                    send.send_data(Bytes::new(), true)?;
                    Ok::<(), h2::Error>(())
                });
            }
        });
    }
}

#[tokio::test]
async fn our_client_against_h2_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(h2_echo_server(listener));

    let run = async {
        // Our windows small too: the h2 server waits on them.
        let body = echo::pattern_body(3 << 20);
        let responses = client::run(
            &addr,
            small_windows(),
            vec![Request::post("/echo", body.clone())],
        )
        .await
        .expect("our client");
        let r = &responses[0];
        assert_eq!(r.error, None);
        assert_eq!(r.status, Some(200));
        assert!(
            r.body == body,
            "echo of {} octets differs from the {} sent",
            r.body.len(),
            body.len()
        );
        println!(
            "our client: {} octets echoed by the h2 server",
            r.body.len()
        );

        let requests: Vec<Request> = (0..8)
            .map(|k| Request::post("/echo", common_body(100_000 + k * 1000)))
            .collect();
        let responses = client::run(&addr, Config::default(), requests.clone())
            .await
            .expect("our client, concurrent");
        let mut total = 0;
        for (req, r) in requests.iter().zip(&responses) {
            assert_eq!(r.error, None);
            assert_eq!(r.status, Some(200));
            assert!(r.body == req.body, "concurrent echo differs");
            total += r.body.len();
        }
        println!("our client: 8 concurrent streams, {total} octets echoed by the h2 server");
    };
    timeout(LIMIT, run)
        .await
        .expect("our client against the h2 server timed out");
    server.abort();
}
