//! The page through a connection with the `cosi:reader` role: a sensitive
//! type counts as nothing, its listing and its resources are refused (403),
//! and the event stream leaves it out, while an admin's connection sees it.
//! And the page's own hiding of sensitive types, whatever its state reads.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use cosi::prelude::*;
use cosi::resource::{ResourceDefinition, Sensitivity};
use cosi::state::{META_OWNER, Registry};
use cosi_grpc::testing::Pki;
use cosi_grpc::{ADMIN_ROLE, Client, ClientSecurity, READER_ROLE, Security, Server};
use cosi_ui::{Config, Ui};
use support::{EventClient, Number, get, json};

/// A secret: sensitive, so that readers never see it.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Secrets.ui-test.cosi.dev", namespace = "default", sensitive)]
struct Secret {
    value: String,
}

/// The speller's program with one secret, served over mutual TLS; the page
/// of a reader's connection and of an admin's, and the state itself.
async fn pages() -> (Ui, Ui, Arc<dyn State>, Runtime) {
    let (state, runtime) = support::program().await;
    Registry::new(&*state).register::<Secret>().await.expect("register the secret's definition");
    let token = Secret { value: "hunter2".into() };
    state.create(Typed::new("token", token), CreateOptions::default()).await.expect("create a secret");

    let pki = Pki::new("cosi-ui test CA");
    let listening = Server::new(Arc::clone(&state))
        .bind(&"tcp://127.0.0.1:0".parse().expect("an endpoint"), Security::MutualTls(pki.server_tls()))
        .await
        .expect("the TLS server binds");
    let endpoint = listening.endpoint().clone();
    tokio::spawn(listening.serve());
    let page = async |role: &str| {
        let client = Client::connect(&endpoint, ClientSecurity::MutualTls(pki.client_tls(&[role])))
            .await
            .expect("the client connects");
        let client: Arc<dyn State> = Arc::new(client);
        // The page would hide sensitive types itself: here the server refuses them.
        Ui::new(client, Config::default().show_sensitive(true))
    };
    (page(READER_ROLE).await, page(ADMIN_ROLE).await, state, runtime)
}

/// The count the summary gives `type`.
fn count(summary: &serde_json::Value, r#type: &str) -> serde_json::Value {
    let counts = summary["counts"].as_array().expect("counts");
    let count = counts.iter().find(|count| count["type"] == r#type);
    count.unwrap_or_else(|| panic!("no count of {type} in {summary}"))["count"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_sees_no_sensitive_type_and_an_admin_does() {
    let (reader, admin, _state, _runtime) = pages().await;

    let (status, _, summary) = get(&reader, "/api/summary").await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let summary = json(&summary);
    assert_eq!((count(&summary, Secret::TYPE), count(&summary, Number::TYPE)), (0.into(), 1.into()));
    let (status, _, summary) = get(&admin, "/api/summary").await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(count(&json(&summary), Secret::TYPE), 1);

    let listing = format!("/api/types/{}?namespace=default", Secret::TYPE);
    let resource = format!("/api/resources/default/{}/token", Secret::TYPE);
    for path in [&listing, &resource] {
        let (status, _, body) = get(&reader, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert!(!body.contains("hunter2"), "{path}: {body}");
        let (status, _, body) = get(&admin, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains("token"), "{path}: {body}");
    }
    assert!(get(&admin, &resource).await.2.contains("hunter2"), "the admin reads the spec");
    let (status, _, numbers) = get(&reader, &format!("/api/types/{}?namespace=default", Number::TYPE)).await;
    assert_eq!(status, StatusCode::OK, "{numbers}");
    assert!(numbers.contains("answer"), "{numbers}");
}

/// Whatever its state lets it read, the page hides sensitive types unless
/// told to show them: anyone on the machine can reach a loopback port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_hides_sensitive_types_unless_told_to_show_them() {
    let (_reader, _admin, state, _runtime) = pages().await;
    let hiding = Ui::new(Arc::clone(&state), Config::default());
    let showing = Ui::new(Arc::clone(&state), Config::default().show_sensitive(true));

    let (status, _, summary) = get(&hiding, "/api/summary").await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let summary = json(&summary);
    assert_eq!((count(&summary, Secret::TYPE), count(&summary, Number::TYPE)), (0.into(), 1.into()));
    assert_eq!(count(&json(&get(&showing, "/api/summary").await.2), Secret::TYPE), 1);

    let listing = format!("/api/types/{}?namespace=default", Secret::TYPE);
    let resource = format!("/api/resources/default/{}/token", Secret::TYPE);
    for path in [&listing, &resource] {
        let (status, _, body) = get(&hiding, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert!(body.contains("sensitive") && !body.contains("hunter2"), "{path}: {body}");
        let (status, _, body) = get(&showing, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    assert!(get(&showing, &resource).await.2.contains("hunter2"));
    // A type no definition describes might be sensitive: hidden too.
    let (status, _, body) = get(&hiding, "/api/resources/default/Unknowns.ui-test.cosi.dev/x").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // The event stream leaves the hidden type out.
    stream_leaves_secrets_out(&hiding, &state, "later").await;
}

/// Anyone who may write `meta` can add a definition of a type under
/// another ID: one that says not sensitive does not make a sensitive type
/// shown, whichever of the two comes last by ID (the rule the gRPC server
/// applies to readers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_definition_does_not_make_a_sensitive_type_shown() {
    let (_reader, _admin, state, _runtime) = pages().await;
    let hiding = Ui::new(Arc::clone(&state), Config::default());
    let says = |sensitivity| ResourceDefinition { sensitivity, ..Secret::definition() };

    // The type's own definition says sensitive; one after it by ID says not.
    let after = Typed::new("zzz-secrets", says(Sensitivity::NonSensitive));
    state.create(after, CreateOptions::owner(META_OWNER)).await.expect("a second definition");
    hidden(&hiding, &state, "later").await;

    // The type's own says not sensitive; one before it by ID says it is.
    let registry = Registry::new(&*state);
    registry.register_definition(says(Sensitivity::NonSensitive)).await.expect("the type's own says not sensitive");
    let before = Typed::new("aaa-secrets", says(Sensitivity::Sensitive));
    state.create(before, CreateOptions::owner(META_OWNER)).await.expect("a second definition");
    hidden(&hiding, &state, "latest").await;
}

/// Whether `page` counts no secret, refuses their listing and resources,
/// and leaves them out of its event stream (creating a secret and a number `id`).
async fn hidden(page: &Ui, state: &Arc<dyn State>, id: &str) {
    let (status, _, summary) = get(page, "/api/summary").await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(count(&json(&summary), Secret::TYPE), 0, "{summary}");
    let listing = format!("/api/types/{}?namespace=default", Secret::TYPE);
    let resource = format!("/api/resources/default/{}/token", Secret::TYPE);
    for path in [&listing, &resource] {
        let (status, _, body) = get(page, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert!(body.contains("sensitive") && !body.contains("hunter2"), "{path}: {body}");
    }
    stream_leaves_secrets_out(page, state, id).await;
}

/// A note: not sensitive, until a test says it is.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Notes.ui-test.cosi.dev", namespace = "default")]
struct Note {
    text: String,
}

/// A stream already open when a definition change makes a shown type
/// sensitive sends nothing of it any more, as the gRPC server ends a
/// reader's watch: its count goes to 0, and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_stops_sending_a_type_that_became_sensitive() {
    let (_reader, _admin, state, _runtime) = pages().await;
    let registry = Registry::new(&*state);
    registry.register::<Note>().await.expect("register the note's definition");
    let before = Note { text: "public".into() };
    state.create(Typed::new("before", before), CreateOptions::default()).await.expect("create a note");
    let page = Ui::new(Arc::clone(&state), Config::default());
    let listening = page.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());
    let mut events = EventClient::open(address, &page).await;
    events.until("count", |count| count["type"] == Note::TYPE && count["count"] == 1).await;
    events.until("ready", |_| true).await;

    let sensitive = ResourceDefinition { sensitivity: Sensitivity::Sensitive, ..Note::definition() };
    registry.register_definition(sensitive).await.expect("the note's definition says sensitive");
    let after = Note { text: "hunter4".into() };
    state.create(Typed::new("after", after), CreateOptions::default()).await.expect("create a note");
    let hidden = async {
        loop {
            let (name, data) = events.next().await.expect("the stream goes on");
            let note = name == "resource" && data["type"] == Note::TYPE;
            assert!(
                !note && !data.to_string().contains("hunter4"),
                "a note came after it became sensitive: {name} {data}"
            );
            if name == "count" && data["type"] == Note::TYPE {
                assert_eq!(data["count"], 0, "{data}");
                return;
            }
        }
    };
    // A bound against a hang, not a timing assertion.
    tokio::time::timeout(Duration::from_secs(20), hidden).await.expect("the note's count goes to 0");
    // The stream goes on with the rest.
    state.create(Typed::new("after", Number { value: 4 }), CreateOptions::default()).await.expect("create a number");
    events.until("resource", |change| change["type"] == Number::TYPE && change["id"] == "after").await;
    let (status, _, body) = get(&page, &format!("/api/resources/default/{}/after", Note::TYPE)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_event_stream_leaves_sensitive_types_out() {
    let (reader, _admin, state, _runtime) = pages().await;
    stream_leaves_secrets_out(&reader, &state, "later").await;
}

/// Serves `page`, then creates a secret and a number `id` in `state`: the
/// number's event comes on the page's event stream, the secret's never.
async fn stream_leaves_secrets_out(page: &Ui, state: &Arc<dyn State>, id: &str) {
    let listening = page.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());
    let mut events = EventClient::open(address, page).await;
    events.until("ready", |_| true).await;

    let later = Secret { value: "hunter3".into() };
    state.create(Typed::new(id, later), CreateOptions::default()).await.expect("create a secret");
    state.create(Typed::new(id, Number { value: 3 }), CreateOptions::default()).await.expect("create a number");
    loop {
        let (name, data) = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the number's event")
            .expect("the stream goes on");
        assert!(data["type"] != Secret::TYPE && !data.to_string().contains("hunter"), "a secret came: {name} {data}");
        if name == "resource" && data["type"] == Number::TYPE && data["id"] == id {
            break;
        }
    }
    server.abort();
}
