//! `cosictl graph` and `cosictl ui` end to end: a runtime publishes its
//! controllers' statuses to a remote state, `cosictl graph` draws them, and
//! `cosictl ui` serves the live page of them.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use cosi::prelude::*;
use cosi::runtime::{ControllerStatus, RUNTIME_NAMESPACE};
use cosi::state::Registry;
use cosi_grpc::{Client, ClientSecurity, Security, Server};

const COSICTL: &str = env!("CARGO_BIN_EXE_cosictl");

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Greetings.graph.test.cosi.dev", namespace = "default")]
pub struct Greeting {
    pub text: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Shouts.graph.test.cosi.dev", namespace = "default")]
pub struct Shout {
    pub text: String,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Echoes.graph.test.cosi.dev", namespace = "default")]
pub struct Echo {
    pub text: String,
}

#[controller(inputs = [Weak<Greeting>, DestroyReady<Shout>], outputs = [Exclusive<Shout>], inventory = false)]
async fn shout(ctx: &mut Ctx) -> cosi::Result<()> {
    for greeting in ctx.list::<Greeting>(&ListOptions::default()).await? {
        ctx.modify::<Shout>(greeting.id(), |shout| shout.text = greeting.text.to_uppercase()).await?;
    }
    ctx.cleanup_outputs::<Shout>().await
}

/// Always fails: its status is unhealthy.
#[controller(inputs = [Strong<Shout>], outputs = [Shared<Echo>], inventory = false)]
async fn echo(ctx: &mut Ctx) -> cosi::Result<()> {
    ctx.list::<Shout>(&ListOptions::default()).await?;
    Err(cosi::Error::InvalidArgument("the canyon is closed".into()))
}

async fn graph(endpoint: &str, format: &str) -> String {
    let output = tokio::process::Command::new(COSICTL)
        .args(["graph", "-o", format, "--endpoint", endpoint])
        .output()
        .await
        .expect("cosictl graph runs");
    assert!(output.status.success(), "cosictl graph failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_draws_the_controllers_a_remote_runtime_publishes() {
    let state = cosi::state::memory();
    Registry::new(&state).register_defaults().await.expect("defaults");
    let listening = Server::new(state)
        .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::Insecure)
        .await
        .expect("the server binds");
    let endpoint = listening.endpoint().clone();
    let server = tokio::spawn(listening.serve());

    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect");
    let runtime = Runtime::new(client.clone());
    runtime.register(shout {}).expect("register shout");
    runtime.register(echo {}).expect("register echo");
    runtime.start().expect("the runtime starts");

    // Wait until both statuses are out, echo's after its first failure.
    let published = async {
        loop {
            let statuses = client
                .list_in::<ControllerStatus>(RUNTIME_NAMESPACE, &ListOptions::default())
                .await
                .unwrap_or_default();
            let healthy = |name: &str| statuses.iter().find(|status| status.id() == name).map(|status| status.healthy);
            if healthy("shout").is_some() && healthy("echo") == Some(false) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), published).await.expect("the runtime publishes both statuses");

    let endpoint = endpoint.to_string();
    let json: serde_json::Value = serde_json::from_str(&graph(&endpoint, "json").await).expect("JSON");
    let controllers = json["controllers"].as_array().expect("a controller list");
    let names: Vec<&str> = controllers.iter().filter_map(|controller| controller["name"].as_str()).collect();
    assert_eq!(names, ["echo", "shout"], "{json}");
    let [echo, shout] = controllers.as_slice() else { unreachable!("two controllers") };
    assert_eq!(shout["inputs"][0]["type"], Greeting::TYPE, "{json}");
    assert_eq!(shout["inputs"][0]["kind"], "weak", "{json}");
    assert_eq!(shout["outputs"][0]["type"], Shout::TYPE, "{json}");
    assert_eq!(shout["outputs"][0]["kind"], "exclusive", "{json}");
    assert_eq!(echo["inputs"][0]["type"], Shout::TYPE, "{json}");
    assert_eq!(echo["inputs"][0]["kind"], "strong", "{json}");
    assert_eq!(echo["outputs"][0]["type"], Echo::TYPE, "{json}");
    assert_eq!(echo["outputs"][0]["kind"], "shared", "{json}");
    assert_eq!(json["unhealthy"][0]["name"], "echo", "{json}");
    assert!(json["unhealthy"][0]["last_error"].as_str().is_some_and(|error| error.contains("canyon")), "{json}");

    // DOT, the default: boxes for controllers, edges labelled with their kinds, echo in red.
    let dot = graph(&endpoint, "dot").await;
    for expected in [
        "c0 [shape=box, style=rounded, label=\"echo\"]",
        "c1 [shape=box, style=rounded, label=\"shout\"]",
        "label=\"Greetings.graph.test.cosi.dev\"",
        "label=\"Shouts.graph.test.cosi.dev\"",
        "label=\"Echoes.graph.test.cosi.dev\"",
        "[label=\"strong default\", style=bold]",
        "[label=\"weak default\"]",
        "[label=\"exclusive\"]",
        "[label=\"shared\"]",
        "// echo is unhealthy: ",
        "c0 [color=red, fontcolor=red];",
    ] {
        assert!(dot.contains(expected), "{expected:?} missing from:\n{dot}");
    }

    let mermaid = graph(&endpoint, "mermaid").await;
    for expected in [
        "c0[\"echo\"]",
        "c1[\"shout\"]",
        "([\"Shouts.graph.test.cosi.dev\"])",
        "== \"strong default\" ==> c0",
        "-- \"weak default\" --> c1",
        "c0 -- \"shared\" -->",
        "c1 -- \"exclusive\" -->",
        "style c0 stroke:#d00,color:#d00",
    ] {
        assert!(mermaid.contains(expected), "{expected:?} missing from:\n{mermaid}");
    }

    // The live page of the same endpoint: `cosictl ui` prints its URL, and
    // the page's graph and summary show both controllers, echo failing.
    let mut ui = tokio::process::Command::new(COSICTL)
        .args(["ui", "--endpoint", &endpoint])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cosictl ui runs");
    let mut lines = BufReader::new(ui.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("cosictl ui prints its URL")
        .expect("read")
        .expect("a line");
    let url = line.split_whitespace().last().unwrap_or_default();
    let (address, token) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once("/?token="))
        .unwrap_or_else(|| panic!("an http:// URL with the page's token: {line}"));
    assert!(address.starts_with("127.0.0.1:"), "loopback by default: {line}");
    assert_eq!(token.len(), 32, "{line}");
    // Without the token, the page answers nothing.
    let refused = http_get_status(address, "/api/graph").await;
    assert!(refused.starts_with("HTTP/1.0 401") || refused.starts_with("HTTP/1.1 401"), "{refused}");
    let page: serde_json::Value =
        serde_json::from_str(&http_get(address, &format!("/api/graph?token={token}")).await).expect("JSON");
    let mut nodes: Vec<&str> =
        page["nodes"].as_array().expect("nodes").iter().filter_map(|node| node["id"].as_str()).collect();
    nodes.sort_unstable();
    assert_eq!(
        nodes,
        [
            "c:echo",
            "c:shout",
            "t:Echoes.graph.test.cosi.dev",
            "t:Greetings.graph.test.cosi.dev",
            "t:Shouts.graph.test.cosi.dev"
        ]
    );
    let summary: serde_json::Value =
        serde_json::from_str(&http_get(address, &format!("/api/summary?token={token}")).await).expect("JSON");
    assert_eq!(summary["controllers"][0]["name"], "echo", "{summary}");
    assert_eq!(summary["controllers"][0]["state"], "failing", "{summary}");
    ui.kill().await.expect("cosictl ui stops");

    runtime.shutdown().await;
    server.abort();
}

/// The status line of a GET over HTTP/1.0.
async fn http_get_status(address: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    response.lines().next().unwrap_or_default().to_owned()
}

/// The body of a GET over HTTP/1.0, which must answer 200.
async fn http_get(address: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}
