//! What the HTTP tests and the benchmark share: a small program (numbers
//! spelled out by one controller, which fails on negative numbers) and a
//! server-sent events client over a plain TCP connection.

#![allow(dead_code, unreachable_pub, reason = "each test binary uses part of it")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cosi::prelude::*;
use cosi::resource::ResourceDefinition;
use cosi::runtime::RuntimeOptions;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use cosi_ui::Ui;
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

/// A number to spell out.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(
    type = "Numbers.ui-test.cosi.dev",
    namespace = "default",
    print_columns(name = "Value", json_path = "{.value}")
)]
pub struct Number {
    pub value: i64,
}

/// The number, spelled out.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Words.ui-test.cosi.dev", namespace = "default")]
pub struct Word {
    pub text: String,
}

/// Spells numbers out; fails on a negative one.
#[controller(inputs = [Strong<Number>], outputs = [Exclusive<Word>], inventory = false)]
async fn speller(ctx: &mut Ctx) -> cosi::Result<()> {
    for number in ctx.list::<Number>(&ListOptions::default()).await? {
        if number.value < 0 {
            return Err(cosi::Error::InvalidArgument(format!("cannot spell {}", number.value)));
        }
        ctx.modify::<Word>(number.id(), |word| word.text = format!("#{}", number.value)).await?;
    }
    Ok(())
}

/// A state with the speller running, its statuses published every 20 ms,
/// and one number, `answer`, spelled out.
pub async fn program() -> (Arc<dyn State>, Runtime) {
    let state = cosi::state::memory();
    let mut options = RuntimeOptions::default();
    options.status_interval = Duration::from_millis(20);
    options.backoff.initial = Duration::from_millis(20);
    let runtime = Runtime::with_options(Arc::clone(&state), options);
    runtime.register(speller {}).expect("register");
    runtime.start().expect("start");
    state.create(Typed::new("answer", Number { value: 42 }), CreateOptions::default()).await.expect("create");
    runtime.settled().await;
    // Bounded polling: until the status and the definitions are published.
    for _ in 0..500 {
        let statuses = state.list_in::<cosi::runtime::ControllerStatus>("runtime", &ListOptions::default()).await;
        let definitions = state.list::<ResourceDefinition>(&ListOptions::default()).await;
        let published = statuses.is_ok_and(|statuses| statuses.iter().any(|status| status.reconciles > 0))
            && definitions.is_ok_and(|definitions| definitions.iter().any(|d| d.r#type == Number::TYPE));
        if published {
            return (state, runtime);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the runtime published no status");
}

/// Bounded polling until `done`.
pub async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}");
}

/// A server-sent events client: HTTP/1.0, so that the body comes without chunked framing.
pub struct EventClient {
    reader: BufReader<TcpStream>,
}

impl EventClient {
    /// Opens `/api/events` of `ui`, served at `address`, with its token in
    /// the cookie a browser keeps it in; fails unless the answer is a 200 event stream.
    pub async fn open(address: SocketAddr, ui: &Ui) -> EventClient {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        let request = format!(
            "GET /api/events HTTP/1.0\r\nHost: localhost\r\nAccept: text/event-stream\r\nCookie: {}\r\n\r\n",
            cookie(ui)
        );
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut reader = BufReader::new(stream);
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.expect("read a header");
            if line.trim_end().is_empty() {
                break;
            }
            headers.push(line.trim_end().to_lowercase());
        }
        assert!(headers[0].contains(" 200 "), "{headers:?}");
        assert!(headers.iter().any(|header| header == "content-type: text/event-stream"), "{headers:?}");
        EventClient { reader }
    }

    /// The next event: its name and its data; `None` when the stream ends.
    pub async fn next(&mut self) -> Option<(String, serde_json::Value)> {
        let mut name = String::new();
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).await.ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !name.is_empty() {
                    let value = serde_json::from_str(&data).expect("JSON data");
                    return Some((name, value));
                }
                continue;
            }
            if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
    }

    /// Reads events until one named `name` whose data satisfies `matches`, and returns its data.
    pub async fn until(&mut self, name: &str, matches: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let wait = async {
            loop {
                match self.next().await {
                    Some((event, data)) if event == name && matches(&data) => return data,
                    Some(_) => (),
                    None => panic!("the event stream ended before a {name} event"),
                }
            }
        };
        // A bound against a hang, not a timing assertion.
        tokio::time::timeout(Duration::from_secs(20), wait).await.unwrap_or_else(|_| panic!("no {name} event"))
    }

    /// Closes the connection.
    pub fn close(self) {
        drop(self.reader);
    }
}

/// The cookie that carries `ui`'s token, as a browser sends it once it opened the page's URL.
pub fn cookie(ui: &Ui) -> String {
    format!("cosi-ui-8080={}", ui.token().expect("the page has a token"))
}

/// One request through the router, with the page's cookie: the status, the
/// content type and the body.
pub async fn get(ui: &Ui, path: &str) -> (StatusCode, String, String) {
    let request = Request::get(path).header(header::COOKIE, cookie(ui)).body(Body::empty()).expect("request");
    let response = ui.router().oneshot(request).await.expect("infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, content_type, String::from_utf8(body.to_vec()).expect("UTF-8"))
}

/// The body as JSON; panics with the body when it is not.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// The log lines of one test, as the operator would read them.
#[derive(Clone, Default)]
pub struct Logs {
    lines: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Logs {
    /// Captures the logs of this thread until the guard drops.
    pub fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_writer(move || LogWriter(logs.clone()))
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// The lines that contain every one of `parts`.
    pub fn lines(&self, parts: &[&str]) -> Vec<String> {
        self.lines.lock().iter().filter(|line| parts.iter().all(|part| line.contains(part))).cloned().collect()
    }

    /// Every line.
    pub fn all(&self) -> Vec<String> {
        self.lines.lock().clone()
    }
}

struct LogWriter(Logs);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lines.lock().push(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
