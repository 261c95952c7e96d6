//! The page's HTTP endpoints against a small running program: status codes,
//! content types, errors for bad paths, and the event stream, including its
//! cleanup when the client goes and when the server stops.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use cosi::prelude::*;
use cosi::resource::{DynamicResource, EncodedSpec, Metadata, ResourceDefinition};
use cosi::runtime::{ControllerStatus, RUNTIME_NAMESPACE, RUNTIME_OWNER};
use cosi::state::{META_NAMESPACE, META_OWNER};
use cosi_ui::{Config, Ui};
use support::{EventClient, Number, Word, eventually, get, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_are_built_in() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let (status, content_type, index) = get(&ui, "/").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/html; charset=utf-8"));
    assert!(index.contains(r#"<script src="/app.js">"#) && index.contains(r#"href="/app.css""#), "{index}");
    let (status, content_type, script) = get(&ui, "/app.js").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/javascript; charset=utf-8"));
    assert!(script.contains("new EventSource(\"/api/events\")"));
    let (status, content_type, _) = get(&ui, "/app.css").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/css; charset=utf-8"));
    // Offline: nothing is loaded from elsewhere (the SVG namespace is a name, not a load).
    for asset in [&index, &script] {
        let elsewhere: Vec<&str> =
            asset.match_indices("://").map(|(at, _)| &asset[at.saturating_sub(12)..at + 24]).collect();
        assert!(elsewhere.iter().all(|url| url.contains("www.w3.org/2000/svg")), "{elsewhere:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_has_every_controller_and_type_with_their_edges() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let (status, content_type, body) = get(&ui, "/api/graph").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/json"));
    let graph = json(&body);
    let ids: Vec<&str> =
        graph["nodes"].as_array().expect("nodes").iter().filter_map(|node| node["id"].as_str()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    for id in ["c:speller", "t:Numbers.ui-test.cosi.dev", "t:Words.ui-test.cosi.dev"] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let edges = graph["edges"].as_array().expect("edges");
    let input = edges.iter().find(|edge| edge["to"] == "c:speller").expect("the input edge");
    assert_eq!((input["kind"].as_str(), input["style"].as_str()), (Some("strong"), Some("bold")));
    let output = edges.iter().find(|edge| edge["from"] == "c:speller").expect("the output edge");
    assert_eq!((output["kind"].as_str(), output["to"].as_str()), (Some("exclusive"), Some("t:Words.ui-test.cosi.dev")));
    assert_eq!(graph["bands"][0]["namespace"], "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_counts_resources_and_shows_controllers() {
    let (state, runtime) = support::program().await;
    state.create(Typed::new("seven", Number { value: 7 }), CreateOptions::default()).await.expect("create");
    runtime.settled().await;
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let (status, _, body) = get(&ui, "/api/summary").await;
    assert_eq!(status, StatusCode::OK);
    let summary = json(&body);
    let count = |r#type: &str| {
        summary["counts"].as_array().expect("counts").iter().find(|count| count["type"] == r#type).expect(r#type)["count"]
            .clone()
    };
    assert_eq!(count(Number::TYPE), 2);
    assert_eq!(count(Word::TYPE), 2);
    let speller = &summary["controllers"][0];
    assert_eq!((speller["name"].as_str(), speller["state"].as_str()), (Some("speller"), Some("running")));
    assert_eq!((speller["longPolls"].as_u64(), speller.get("longestPollMs")), (Some(0), None), "{speller}");

    // A controller whose polls held their thread, as its status says.
    let status = Pointer::new(RUNTIME_NAMESPACE, ControllerStatus::TYPE, "speller");
    let options = UpdateOptions::owner(RUNTIME_OWNER);
    runtime.shutdown().await;
    let reported = |status: &mut Typed<ControllerStatus>| {
        status.long_polls = 3;
        status.longest_poll_ms = Some(42);
    };
    state.modify::<ControllerStatus>(&status, options, reported).await.expect("the status");
    let (_, _, body) = get(&ui, "/api/summary").await;
    let speller = json(&body)["controllers"][0].clone();
    assert_eq!((speller["longPolls"].as_u64(), speller["longestPollMs"].as_u64()), (Some(3), Some(42)), "{speller}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_lists_its_resources_with_its_print_columns() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let (status, content_type, body) = get(&ui, "/api/types/Numbers.ui-test.cosi.dev").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/json"));
    let listing = json(&body);
    assert_eq!(listing["namespace"], "default");
    assert_eq!(listing["columns"], serde_json::json!(["Value"]));
    assert_eq!(listing["rows"][0]["id"], "answer");
    assert_eq!(listing["rows"][0]["cells"], serde_json::json!(["42"]));

    let (status, _, body) = get(&ui, "/api/types/Numbers.ui-test.cosi.dev?namespace=elsewhere").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)["rows"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_is_yaml() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let (status, content_type, body) = get(&ui, "/api/resources/default/Words.ui-test.cosi.dev/answer").await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/yaml; charset=utf-8"));
    let document: serde_json::Value = serde_yaml_ng::from_str(&body).expect("YAML");
    assert_eq!(document["metadata"]["owner"], "speller");
    assert_eq!(document["spec"]["text"], "#42");

    // The ID in the query, as the page asks: `..` is an ID like any other.
    state.create(Typed::new("..", Number { value: 2 }), CreateOptions::default()).await.expect("create");
    for path in [
        "/api/resources/default/Numbers.ui-test.cosi.dev?id=..",
        "/api/resources/default/Words.ui-test.cosi.dev?id=answer",
    ] {
        let (status, _, body) = get(&ui, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let document: serde_json::Value = serde_yaml_ng::from_str(&body).expect("YAML");
        assert!(document["metadata"]["id"] == ".." || document["metadata"]["id"] == "answer", "{body}");
    }
}

/// What the page cannot read is an error that says so, not a page with
/// less in it: here the controller statuses, for a type's listing (which
/// shows the namespaces controllers read the type in) as for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_that_cannot_be_read_are_an_error() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::new(StatusesFail(state)), Config::default());
    for path in ["/api/types/Numbers.ui-test.cosi.dev", "/api/summary", "/api/graph"] {
        let (status, _, body) = get(&ui, path).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{path}: {body}");
        let error = json(&body)["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains("cannot read the controller statuses in the namespace \"runtime\""), "{path}: {error}");
        assert!(error.contains("injected"), "{path}: {error}");
    }
}

/// A state whose listings of controller statuses fail, as a backend that
/// went away would fail them.
struct StatusesFail(Arc<dyn State>);

#[async_trait::async_trait]
impl State for StatusesFail {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.0.get_dynamic(pointer).await
    }
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        if kind.r#type() == <cosi::runtime::ControllerStatus as Resource>::TYPE {
            return Err(cosi::Error::backend(std::io::Error::other("injected: the backend went away")));
        }
        self.0.list_dynamic(kind, options).await
    }
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.0.create_dynamic(resource, options).await
    }
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.0.update_dynamic(resource, options).await
    }
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.0.destroy_dynamic(pointer, options).await
    }
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<cosi::state::Watch> {
        self.0.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<cosi::state::Watch> {
        self.0.watch_kind_dynamic(kind, options).await
    }
}

/// A definition that does not decode is reported to the operator, once
/// (not at every request that reads the definitions).
#[tokio::test]
async fn an_undecodable_definition_is_logged_once() {
    let (state, _runtime) = support::program().await;
    let logs = support::Logs::default();
    let _capture = logs.capture();
    let metadata = Metadata::new(META_NAMESPACE, ResourceDefinition::TYPE, "broken.ui-test.cosi.dev");
    let spec = EncodedSpec { proto: vec![0xff; 4], yaml: Some("type: [unclosed".into()) };
    state
        .create_dynamic(DynamicResource::encoded(metadata, spec), CreateOptions::owner(META_OWNER))
        .await
        .expect("create");
    let ui = Ui::new(state, Config::default());
    for _ in 0..3 {
        let (status, _, body) = get(&ui, "/api/summary").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let warnings = logs.lines(&["WARN", "broken.ui-test.cosi.dev", "does not decode"]);
    assert_eq!(warnings.len(), 1, "{:?}", logs.all());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paths_have_clear_errors() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    // As long as a state takes: not found, not invalid.
    let long = format!("/api/resources/default/Words.ui-test.cosi.dev/{}", "a".repeat(1000));
    let cases = [
        (long.as_str(), StatusCode::NOT_FOUND, "aaaa"),
        // axum's own refusals, as JSON too.
        ("/api/resources/default/Words.ui-test.cosi.dev/a%FFb", StatusCode::BAD_REQUEST, "UTF-8"),
        ("/api/types/Numbers.ui-test.cosi.dev?namespace=a&namespace=b", StatusCode::BAD_REQUEST, "duplicate field"),
        ("/nope", StatusCode::NOT_FOUND, "no such page: /nope"),
        ("/api/nope", StatusCode::NOT_FOUND, "no such page: /api/nope"),
        ("/api/types/Nopes.ui-test.cosi.dev", StatusCode::NOT_FOUND, "no resource definition for the type"),
        ("/api/resources/default/Words.ui-test.cosi.dev/missing", StatusCode::NOT_FOUND, "missing"),
        ("/api/resources/default/Words.ui-test.cosi.dev/a%01b", StatusCode::BAD_REQUEST, "invalid ID"),
        ("/api/types/Numbers.ui-test.cosi.dev?namespace=", StatusCode::BAD_REQUEST, "invalid namespace"),
        ("/api/resources/default/Words.ui-test.cosi.dev", StatusCode::BAD_REQUEST, "missing field `id`"),
        ("/api/resources/default/Words.ui-test.cosi.dev?id=..", StatusCode::NOT_FOUND, "(default/..)"),
    ];
    for (path, expected, message) in cases {
        let (status, content_type, body) = get(&ui, path).await;
        assert_eq!(status, expected, "{path}: {body}");
        assert_eq!(content_type, "application/json", "{path}");
        let error = json(&body)["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(message), "{path}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_pushes_changes_and_failing_controllers() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    assert!(address.ip().is_loopback(), "loopback by default");
    let server = tokio::spawn(listening.serve());

    let mut events = EventClient::open(address, &ui).await;
    let count = events.until("count", |count| count["type"] == Number::TYPE).await;
    assert_eq!(count["count"], 1);
    events.until("ready", |_| true).await;

    state.create(Typed::new("seven", Number { value: 7 }), CreateOptions::default()).await.expect("create");
    // The number's events, in order, and the word the controller writes; the
    // kinds' watches are separate, so the word's event may come at any point.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let (name, data) = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the events of the new number")
            .expect("the stream goes on");
        match (name.as_str(), data["type"].as_str()) {
            ("resource", Some(Number::TYPE)) => seen.push(format!("number {} {}", data["id"], data["change"])),
            ("count", Some(Number::TYPE)) => seen.push(format!("numbers {}", data["count"])),
            ("resource", Some(Word::TYPE)) if data["id"] == "seven" => seen.push("word".to_owned()),
            _ => (),
        }
    }
    seen.retain(|event| event != "word");
    assert_eq!(seen, [r#"number "seven" "created""#, "numbers 2"]);

    state.modify::<Number>("seven", UpdateOptions::default(), |number| number.value = -7).await.expect("update");
    let failing = events.until("controller", |controller| controller["state"] == "failing").await;
    assert_eq!(failing["name"], "speller");
    assert!(failing["lastError"].as_str().unwrap_or_default().contains("cannot spell -7"), "{failing}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    let retry = failing["nextRetryMs"].as_u64().expect("a failing controller has its next retry");
    // Within the backoff's bounds around now (20 ms at first, never more than a minute).
    let now = u64::try_from(now.as_millis()).expect("ms");
    assert!(retry + 60_000 > now && retry < now + 60_000, "{retry} against {now}");

    state.modify::<Number>("seven", UpdateOptions::default(), |number| number.value = 8).await.expect("update");
    let running = events.until("controller", |controller| controller["state"] == "running").await;
    assert!(running.get("nextRetryMs").is_none(), "{running}");
    server.abort();
}

/// The counts and `ready` a stream starts with, by name.
async fn start_of(events: &mut EventClient) -> Vec<String> {
    let mut start = Vec::new();
    loop {
        let (name, data) = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the start of the stream")
            .expect("the stream goes on");
        match name.as_str() {
            "count" => start.push(format!("{} {}", data["type"].as_str().unwrap_or_default(), data["count"])),
            "ready" => break,
            _ => (),
        }
    }
    start.sort();
    start
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_share_one_watch_per_kind_and_the_last_to_close_ends_it() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());

    let mut first = EventClient::open(address, &ui).await;
    let first_start = start_of(&mut first).await;
    // One watch per kind: the speller's two, its status, and `meta`'s two.
    let per_kind = ui.open_watches();
    assert!(per_kind >= 5, "{per_kind} watches");

    // A stream joining later starts from the kinds as they are now.
    state.create(Typed::new("nine", Number { value: 9 }), CreateOptions::default()).await.expect("create");
    first.until("count", |count| count["type"] == Number::TYPE && count["count"] == 2).await;
    let mut second = EventClient::open(address, &ui).await;
    let second_start = start_of(&mut second).await;
    assert_eq!(ui.open_streams(), 2);
    assert_eq!(ui.open_watches(), per_kind, "the second stream shares the first's watches");
    let numbers = |start: &[String]| start.iter().find(|count| count.starts_with(Number::TYPE)).cloned();
    assert_eq!(numbers(&first_start), Some(format!("{} 1", Number::TYPE)));
    assert_eq!(numbers(&second_start), Some(format!("{} 2", Number::TYPE)), "{second_start:?}");

    // Both see the next change.
    state.create(Typed::new("ten", Number { value: 10 }), CreateOptions::default()).await.expect("create");
    for events in [&mut first, &mut second] {
        events.until("resource", |change| change["id"] == "ten" && change["change"] == "created").await;
    }

    first.close();
    eventually("the closed stream ends", || ui.open_streams() == 1).await;
    assert_eq!(ui.open_watches(), per_kind, "the other stream still holds every watch");
    state.create(Typed::new("eleven", Number { value: 11 }), CreateOptions::default()).await.expect("create");
    second.until("resource", |change| change["id"] == "eleven").await;
    second.close();
    eventually("every watch ends", || ui.open_streams() == 0 && ui.open_watches() == 0).await;

    // A stream after them all opens the watches afresh.
    let mut third = EventClient::open(address, &ui).await;
    let third_start = start_of(&mut third).await;
    assert_eq!(numbers(&third_start), Some(format!("{} 4", Number::TYPE)), "{third_start:?}");
    assert_eq!(ui.open_watches(), per_kind);
    third.close();
    server.abort();
}

/// A kind of more resources than a stream may fall behind its feed by, in
/// changes: the first stream, and those joining while the feed loads, start
/// from all of them (the speller fails on the first negative number, so it
/// writes no words for them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_start_from_a_kind_of_thousands() {
    let (state, _runtime) = support::program().await;
    for n in 0..3000 {
        let number = Typed::new(format!("n{n:04}"), Number { value: -1 });
        state.create(number, CreateOptions::default()).await.expect("create");
    }
    let ui = Ui::new(Arc::clone(&state), Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());

    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(EventClient::open(address, &ui).await);
    }
    for events in &mut streams {
        let start = start_of(events).await;
        assert!(start.contains(&format!("{} 3001", Number::TYPE)), "{start:?}");
    }
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_server_ends_open_event_streams() {
    let (state, _runtime) = support::program().await;
    let ui = Ui::new(state, Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listening.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    let mut events = EventClient::open(address, &ui).await;
    events.until("ready", |_| true).await;
    stop.send(()).expect("the server runs");
    // A bound against a hang: a stream left open would keep the server waiting.
    let served = tokio::time::timeout(Duration::from_secs(20), server).await.expect("the server stops");
    served.expect("no panic").expect("a clean stop");
    let mut rest = 0;
    while events.next().await.is_some() {
        rest += 1;
        assert!(rest < 1000, "the stream goes on");
    }
    // The feeds' tasks end on the server's stop, soon after it.
    eventually("every stream and watch ends", || (ui.open_streams(), ui.open_watches()) == (0, 0)).await;
}
