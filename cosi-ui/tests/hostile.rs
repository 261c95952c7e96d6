//! Clients that do not play along: one that stops reading its event stream
//! while the state changes, one that never finishes its request, many that
//! connect and say nothing, a web page elsewhere that rebinds its name to
//! loopback. The page stays up for everyone else, stops when asked, and
//! answers no one but its own origin.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use cosi::prelude::*;
use cosi_grpc::{Client, Endpoint, Security, Server};
use cosi_ui::{Config, Ui};
use support::{EventClient, Number, eventually, get};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A bound against a hang, not a timing assertion.
const HANG: Duration = Duration::from_secs(20);

/// The speller's program served over gRPC on a unix socket, and a client
/// of it: one connection, which a page shares among all its users, as
/// `cosictl ui` does. Its connection window (256 KiB) is smaller than what
/// one watch may leave unread (1 MiB), as the defaults' (5 MiB, 2 MiB) are
/// with three busy kinds, so that a few thousand changes show what a
/// watch nobody reads does to the others.
async fn over_grpc() -> (Arc<dyn State>, Arc<dyn State>, Runtime, tempfile::TempDir) {
    let (state, runtime) = support::program().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let socket = dir.path().join("cosi.sock");
    let endpoint = Endpoint::Unix(socket.clone());
    let listening = Server::new(Arc::clone(&state)).bind(&endpoint, Security::Insecure).await.expect("bind");
    tokio::spawn(listening.serve());
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .initial_connection_window_size(256 << 10)
        .initial_stream_window_size(1 << 20)
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move { tokio::net::UnixStream::connect(socket).await.map(hyper_util::rt::TokioIo::new) }
        }))
        .await
        .expect("connect");
    (state, Arc::new(Client::from_channel(channel)), runtime, dir)
}

/// A client that asks for the event stream, then reads nothing until
/// [`drain`](Stalled::drain): its receive buffer is small, so what the
/// server sends piles up on the server's side.
struct Stalled {
    stream: TcpStream,
}

impl Stalled {
    async fn open(address: SocketAddr, ui: &Ui) -> Stalled {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket.set_recv_buffer_size(4096).expect("a small receive buffer");
        let mut stream = socket.connect(address).await.expect("connect");
        let cookie = support::cookie(ui);
        let request = format!(
            "GET /api/events HTTP/1.0\r\nHost: {address}\r\nAccept: text/event-stream\r\nCookie: {cookie}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("request");
        Stalled { stream }
    }

    /// Reads everything until the server ends the stream; the events read.
    async fn drain(mut self) -> usize {
        let mut received = Vec::new();
        self.stream.read_to_end(&mut received).await.expect("read");
        String::from_utf8_lossy(&received).matches("\nevent:").count()
    }
}

/// Updates one number `changes` times, waiting every 100 changes until
/// `live` has seen the last, so that the writer goes as fast as a client
/// that reads, and no faster. The number's ID is long (1,000 bytes), so
/// that each change is a large event.
async fn churn(state: &Arc<dyn State>, live: &mut EventClient, changes: i64) {
    let id = "n".repeat(1000);
    state.create(Typed::new(id.clone(), Number { value: 0 }), CreateOptions::default()).await.expect("create");
    for value in 1..=changes {
        let updated =
            state.modify::<Number>(&id, UpdateOptions::default(), |number| number.value = value).await.expect("update");
        if value % 100 == 0 || value == changes {
            let version = updated.metadata().version().to_string();
            live.until("resource", |change| {
                change["type"] == Number::TYPE && change["id"] == id.as_str() && change["version"] == version.as_str()
            })
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_hurts_only_itself() {
    let (state, remote, _runtime, _dir) = over_grpc().await;
    let ui = Ui::new(remote, Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());

    let stalled = Stalled::open(address, &ui).await;
    let mut live = EventClient::open(address, &ui).await;
    live.until("ready", |_| true).await;
    // About twice what the stalled client's buffers (the kernel's and the
    // server's) hold; the live client sees every change as it comes.
    churn(&state, &mut live, 6_000).await;

    // The state behind the page still answers, through the same connection.
    let (status, _, body) = tokio::time::timeout(HANG, get(&ui, "/api/summary")).await.expect("the summary");
    assert_eq!(status, StatusCode::OK, "{body}");
    // The stalled client, once it reads, finds its stream ended (after the
    // events it had been sent): its EventSource reconnects and starts over.
    let events = tokio::time::timeout(HANG, stalled.drain()).await.expect("the stalled stream ends");
    assert!(events > 0, "{events} events");
    live.close();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_stops_while_a_client_reads_nothing() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), Config::default().shutdown_grace(Duration::from_secs(1)));
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listening.serve_with_shutdown(async {
        let _ = stopped.await;
    }));

    let stalled = Stalled::open(address, &ui).await;
    let mut live = EventClient::open(address, &ui).await;
    live.until("ready", |_| true).await;
    // Until the server cannot write to the stalled client any more.
    churn(&state, &mut live, 6_000).await;

    stop.send(()).expect("the server runs");
    let served = tokio::time::timeout(HANG, server).await.expect("the server stops");
    served.expect("no panic").expect("a clean stop");
    // The feeds' tasks end on the server's stop, soon after it.
    eventually("every stream and watch ends", || (ui.open_streams(), ui.open_watches()) == (0, 0)).await;
    // Both streams ended with the server.
    while live.next().await.is_some() {}
    tokio::time::timeout(HANG, stalled.drain()).await.expect("the stalled stream ends");
}

/// The page of the speller's program, served with `config`: where, and the page's cookie.
struct Served {
    address: SocketAddr,
    cookie: String,
    _runtime: Runtime,
    server: tokio::task::JoinHandle<Result<(), cosi_ui::Error>>,
}

async fn serve(config: Config) -> Served {
    let (state, runtime) = support::program().await;
    let ui = Ui::new(state, config);
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    Served { address, cookie: support::cookie(&ui), _runtime: runtime, server: tokio::spawn(listening.serve()) }
}

/// `GET /api/summary` on `stream` with `cookie`, and the status line of the answer.
async fn summary_on(stream: TcpStream, address: SocketAddr, cookie: &str) -> String {
    response_on(stream, address, cookie).await.0
}

/// `GET /api/summary` on `stream` with `cookie`: the status line and the body of the answer.
async fn response_on(mut stream: TcpStream, address: SocketAddr, cookie: &str) -> (String, String) {
    let request = format!("GET /api/summary HTTP/1.0\r\nHost: {address}\r\nCookie: {cookie}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("response");
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_never_finished_is_closed() {
    let Served { address, cookie, server, .. } =
        serve(Config::default().header_read_timeout(Duration::from_millis(300))).await;
    let mut partial = TcpStream::connect(address).await.expect("connect");
    partial.write_all(b"GET /api/summary HTTP/1.1\r\nHost: 127.0.0.1").await.expect("part of a request");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(HANG, partial.read_to_end(&mut answer)).await.expect("the connection is closed");
    // Closed, with a 408 or without a word.
    assert!(read.is_err() || answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"), "{answer:?}");
    // The page still serves others.
    let status = summary_on(TcpStream::connect(address).await.expect("connect"), address, &cookie).await;
    assert!(status.contains(" 200 "), "{status}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_for_a_free_one() {
    let Served { address, cookie, server, .. } = serve(Config::default().max_connections(2)).await;
    // Two connections that say nothing hold both places.
    let first = TcpStream::connect(address).await.expect("connect");
    let _second = TcpStream::connect(address).await.expect("connect");
    let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let third = TcpStream::connect(address).await.expect("connect");
    let answered = tokio::spawn({
        let freed = Arc::clone(&freed);
        async move {
            let status = summary_on(third, address, &cookie).await;
            (status, freed.load(std::sync::atomic::Ordering::SeqCst))
        }
    });
    // Time for the third to be served, were it not waiting (not a bound on anything).
    tokio::time::sleep(Duration::from_millis(500)).await;
    freed.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(first);
    let (status, after) = tokio::time::timeout(HANG, answered).await.expect("the third is served").expect("no panic");
    assert!(status.contains(" 200 "), "{status}");
    assert!(after, "the third connection was served while two others held both places");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_connection() {
    let Served { address, cookie, server, .. } = serve(Config::default().max_connections_per_address(2)).await;
    // Two connections from 127.0.0.1 that say nothing hold its share.
    let first = TcpStream::connect(address).await.expect("connect");
    let _second = TcpStream::connect(address).await.expect("connect");
    let third = TcpStream::connect(address).await.expect("connect");
    let (status, body) = response_on(third, address, &cookie).await;
    assert!(status.contains(" 503 "), "{status}");
    assert!(body.contains("too many connections from 127.0.0.1") && body.contains("at most 2"), "{body}");
    // Another address is served meanwhile.
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).expect("bind 127.0.0.2");
    let (status, body) = response_on(socket.connect(address).await.expect("connect"), address, &cookie).await;
    assert!(status.contains(" 200 "), "{status} {body}");
    // Once one of the two closes, 127.0.0.1 is served again (when the
    // server has seen it close: bounded polling).
    drop(first);
    let mut served = false;
    for _ in 0..500 {
        let (status, _) = response_on(TcpStream::connect(address).await.expect("connect"), address, &cookie).await;
        if status.contains(" 200 ") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served, "a place of 127.0.0.1 was freed");
    server.abort();
}

/// A client that reads nothing is dropped once a write has waited the
/// write timeout: its place is free for another, while a client that
/// reads keeps its stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_loses_its_connection() {
    let config = Config::default().max_connections(2).write_timeout(Duration::from_millis(500));
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), config);
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());

    // The two places: one client that stops reading, one that reads.
    let stalled = Stalled::open(address, &ui).await;
    let mut live = EventClient::open(address, &ui).await;
    live.until("ready", |_| true).await;
    // Until the server cannot write to the stalled client any more.
    churn(&state, &mut live, 6_000).await;
    // A third is served once the stalled client's connection is closed.
    let cookie = support::cookie(&ui);
    let third =
        tokio::spawn(
            async move { summary_on(TcpStream::connect(address).await.expect("connect"), address, &cookie).await },
        );
    let status =
        tokio::time::timeout(HANG, third).await.expect("the stalled client's place is freed").expect("no panic");
    assert!(status.contains(" 200 "), "{status}");
    // The reading client still has its stream.
    state.create(Typed::new("later", Number { value: 5 }), CreateOptions::default()).await.expect("create");
    live.until("resource", |change| change["type"] == Number::TYPE && change["id"] == "later").await;
    drop(stalled);
    server.abort();
}

/// `GET path` through the router with `Host: host`: the status and the body.
async fn get_for_host(ui: &Ui, path: &str, host: &str) -> (StatusCode, String) {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    let request = axum::http::Request::get(path)
        .header("host", host)
        .header("cookie", support::cookie(ui))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = ui.router().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_loopback_names_are_answered() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    // A page of evil.example whose name now resolves to 127.0.0.1: the
    // browser sends its own name.
    for host in ["evil.example:8080", "evil.example", "192.168.1.7:8080", "localhost.evil.example:8080", "[::2]:80"] {
        for path in ["/", "/api/summary", "/api/events", "/nope"] {
            let (status, body) = get_for_host(&ui, path, host).await;
            assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host} {path}: {body}");
            let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON error");
            assert!(error["error"].as_str().unwrap_or_default().contains("loopback"), "{body}");
        }
    }
    // Any port: a tunnel (`ssh -L 9000:127.0.0.1:PORT`) reaches the page
    // under the tunnel's port.
    for host in ["127.0.0.1:8080", "localhost:8080", "LocalHost", "[::1]:9000", "127.1.2.3", "page.localhost:80"] {
        let (status, body) = get_for_host(&ui, "/api/summary", host).await;
        assert_eq!(status, StatusCode::OK, "{host}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_listens_on_loopback_only() {
    let (state, _runtime) = support::program().await;
    for address in ["0.0.0.0:0", "[::]:0"] {
        let address: SocketAddr = address.parse().expect("an address");
        let ui = Ui::new(Arc::clone(&state), Config::default().listen(address));
        let error = ui.bind().await.expect_err("refused");
        assert!(error.to_string().contains("loopback"), "{error}");
    }
    let ui = Ui::new(state, Config::default().listen("[::1]:0".parse().expect("an address")));
    // Where the machine has no IPv6 loopback, binding fails, but is not refused.
    if let Err(error) = ui.bind().await {
        assert!(!error.to_string().contains("refusing"), "{error}");
    }
}

/// Headers of a request, as (name, value).
type Headers<'a> = &'a [(&'a str, &'a str)];

/// `GET path` through the router with `headers` (and nothing else): the
/// status, the headers and the body.
async fn request(ui: &Ui, path: &str, headers: &[(&str, &str)]) -> (StatusCode, axum::http::HeaderMap, String) {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    let mut request = axum::http::Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response =
        ui.router().oneshot(request.body(axum::body::Body::empty()).expect("request")).await.expect("infallible");
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// The `error` of a JSON error body.
fn error(body: &str) -> String {
    let error: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("a JSON error: {body}"));
    error["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_forbids_sniffing_and_loading_from_elsewhere() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let cookie = support::cookie(&ui);
    let cases: [(&str, Headers<'_>, StatusCode); 7] = [
        ("/", &[("cookie", &cookie)], StatusCode::OK),
        ("/app.js", &[("cookie", &cookie)], StatusCode::OK),
        ("/api/summary", &[("cookie", &cookie)], StatusCode::OK),
        ("/nope", &[("cookie", &cookie)], StatusCode::NOT_FOUND),
        ("/api/summary", &[], StatusCode::UNAUTHORIZED),
        ("/", &[("host", "evil.example")], StatusCode::MISDIRECTED_REQUEST),
        ("/", &[("cookie", &cookie), ("sec-fetch-site", "cross-site")], StatusCode::FORBIDDEN),
    ];
    for (path, headers, expected) in cases {
        let (status, answer, body) = request(&ui, path, headers).await;
        assert_eq!(status, expected, "{path} {headers:?}: {body}");
        assert_eq!(answer.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]), "{path}");
        let policy = answer.get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or_default();
        for directive in ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "{path}: {policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{path}: {policy}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_another_site_or_origin_are_refused() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let cookie = support::cookie(&ui);
    let host = ("host", "localhost:8080");
    // Another site's page (which has no token) cannot have the user's
    // browser fetch the page, nor can another page on this machine (another
    // port is another origin of the same site), even with the cookie.
    let refused: [&[(&str, &str)]; 5] = [
        &[("sec-fetch-site", "cross-site")],
        &[("sec-fetch-site", "same-site")],
        &[("origin", "http://evil.example")],
        &[("origin", "http://localhost:9999"), host],
        &[("origin", "null"), host],
    ];
    for headers in refused {
        for path in ["/", "/api/summary", "/api/events"] {
            let all: Vec<(&str, &str)> = headers.iter().copied().chain([("cookie", cookie.as_str())]).collect();
            let (status, _, body) = request(&ui, path, &all).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path} {headers:?}: {body}");
            assert!(error(&body).contains("this page answers only"), "{body}");
        }
    }
    // The page's own requests, the user opening it, and programs are answered.
    let answered: [&[(&str, &str)]; 4] = [
        &[("sec-fetch-site", "same-origin"), ("origin", "http://localhost:8080"), host],
        &[("sec-fetch-site", "none")],
        &[("origin", "HTTP://LocalHost:8080"), host],
        &[],
    ];
    for headers in answered {
        let all: Vec<(&str, &str)> = headers.iter().copied().chain([("cookie", cookie.as_str())]).collect();
        let (status, _, body) = request(&ui, "/api/summary", &all).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {body}");
    }
}

/// Another user of the machine can reach the port, but not the token the
/// page's URL carries: without it or the cookie that keeps it, nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_answers_only_with_its_token() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let token = ui.token().expect("a token").to_owned();
    assert_eq!(token.len(), 32, "128 bits in hexadecimal: {token}");
    assert_ne!(Ui::new(state, Config::default()).token(), Some(token.as_str()), "each page its own");

    // Neither the token nor the cookie: 401, for the page and for every route.
    for path in [
        "/",
        "/app.js",
        "/api/graph",
        "/api/summary",
        "/api/events",
        "/api/resources/default/Words.ui-test.cosi.dev/answer",
        "/nope",
    ] {
        let (status, _, body) = request(&ui, path, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
        assert!(error(&body).contains("?token="), "{path}: {body}");
        assert!(!body.contains(&token), "{path}: {body}");
    }
    // A wrong token, in the URL or in a cookie.
    let wrong = "0".repeat(32);
    for (path, headers) in [
        (format!("/?token={wrong}"), vec![]),
        (format!("/api/summary?token={wrong}"), vec![]),
        ("/api/summary".to_owned(), vec![("cookie", format!("cosi-ui-8080={wrong}"))]),
        ("/api/summary".to_owned(), vec![("cookie", format!("cosi-ui-8080={}", &token[..31]))]),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
        let (status, _, body) = request(&ui, &path, &headers).await;
        assert!(status == StatusCode::FORBIDDEN || status == StatusCode::UNAUTHORIZED, "{path}: {status} {body}");
        assert!(!body.contains(&token), "{path}: {body}");
    }

    // Opening the page's URL: the cookie keeps the token (no script reads
    // it, no other site's request carries it), and the browser goes on to
    // the page without the token in its address.
    let (status, answer, _) = request(&ui, &format!("/?token={token}"), &[("host", "localhost:8080")]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(answer.get("location").map(|v| v.as_bytes()), Some(&b"/"[..]));
    let cookie = answer.get("set-cookie").and_then(|v| v.to_str().ok()).expect("a cookie").to_owned();
    assert_eq!(cookie, format!("cosi-ui-8080={token}; HttpOnly; SameSite=Strict; Path=/"));
    let kept = cookie.split(';').next().expect("name=value");
    let (status, content_type, _) = {
        let (status, answer, body) = request(&ui, "/", &[("host", "localhost:8080"), ("cookie", kept)]).await;
        (status, answer.get("content-type").cloned(), body)
    };
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_ref().map(|v| v.as_bytes()), Some(&b"text/html; charset=utf-8"[..]));
    // Among the browser's other cookies for localhost.
    let (status, _, body) = request(&ui, "/api/summary", &[("cookie", &format!("other=1; {kept}; more=2"))]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A program passes the token in the URL.
    let (status, _, body) = request(&ui, &format!("/api/summary?token={token}"), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The URL the server prints carries the token.
    let listening = ui.bind().await.expect("bind");
    assert_eq!(listening.url(), format!("http://{}/?token={token}", listening.local_addr()));
}
