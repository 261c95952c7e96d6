//! Connection security against a real etcd: TLS with client certificates,
//! and etcd's user authentication with tokens that etcd drops.
//!
//! Each test starts an etcd of its own (certificates are generated for it);
//! without an etcd binary they pass without running and say how to install
//! etcd, except under `CI=true`.

use std::time::Duration;

use cosi::prelude::*;
use cosi::state::EventType;
use cosi_etcd::testing::{EtcdServer, ROOT_USER, Raw};
use cosi_etcd::{Credentials, ElectionOptions, EtcdState, Options};

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Counters.test.cosi.dev", namespace = "default")]
struct Counter {
    count: u64,
}

/// A guard against hangs; never a measurement.
const LIMIT: Duration = Duration::from_secs(30);

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Writes, reads, watches and an election: everything the state asks of etcd.
async fn exercise(state: &EtcdState, id: &str) {
    let mut watch = state.watch_kind::<Counter>(WatchKindOptions::default()).await.unwrap();
    state.create(Typed::new(id, Counter { count: 1 }), CreateOptions::default()).await.unwrap();
    assert_eq!(state.get::<Counter>(id).await.unwrap().count, 1);
    let listed = state.list::<Counter>(&ListOptions::default()).await.unwrap();
    assert!(listed.iter().any(|counter| counter.id() == id), "{listed:?}");
    let event = within("the watch event", watch.recv()).await.unwrap();
    assert_eq!((event.event_type(), event.resource().map(|r| r.id())), (EventType::Created, Some(id)));

    let election = state.election(id, id, ElectionOptions { ttl: Duration::from_secs(2) });
    let leadership = within("the campaign", election.campaign()).await.unwrap();
    assert_eq!(election.leader().await.unwrap().as_deref(), Some(id));
    leadership.resign().await.unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_reaches_etcd_and_nothing_less_does() {
    let Some(server) = EtcdServer::start_tls() else { return };
    let endpoint = server.endpoint();
    assert!(endpoint.starts_with("https://"), "{endpoint}");
    let state = EtcdState::connect(&[&endpoint], server.options("/tls")).await.unwrap();
    exercise(&state, "over-tls").await;

    // etcd requires a client certificate; a CA that did not sign etcd's
    // certificate proves nothing. Connections are made by the first call,
    // which fails.
    let tls = server.tls().unwrap();
    let client = tls.client.clone().unwrap();
    let without_certificate = cosi_etcd::Tls { client: None, ..tls.clone() };
    let wrong_ca = cosi_etcd::Tls { server_ca: client.certificate.clone(), ..tls.clone() };
    for (case, tls) in [("no client certificate", without_certificate), ("another CA", wrong_ca)] {
        let options = Options { tls: Some(tls), ..Options::prefix("/tls") };
        let state = EtcdState::connect(&[&endpoint], options).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(10), state.get::<Counter>("over-tls")).await {
            Ok(Err(err)) => assert!(matches!(err, cosi::Error::Backend(_)), "{case}: {err:?}"),
            Ok(Ok(resource)) => panic!("{case}: etcd should refuse the connection, but answered {resource:?}"),
            // A balanced channel may keep waiting for an endpoint it can use: refused all the same.
            Err(_) => {}
        }
    }

    // The scheme and the TLS settings must agree, so credentials never go out in plaintext by mistake.
    let plain = endpoint.replacen("https://", "http://", 1);
    let err = EtcdState::connect(&[&plain], server.options("/tls")).await.unwrap_err();
    assert!(err.to_string().contains("must be https://"), "{err}");
    let err = EtcdState::connect(&[&endpoint], Options::prefix("/tls")).await.unwrap_err();
    assert!(err.to_string().contains("needs TLS settings"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_sends_the_token_and_renews_it_when_etcd_drops_it() {
    let Some(server) = EtcdServer::start_with_auth() else { return };
    let endpoint = server.endpoint();
    let credentials = server.credentials().unwrap();

    // Without a user etcd refuses every call; a wrong password fails the connection, saying why.
    let anonymous = EtcdState::connect(&[&endpoint], Options::prefix("/auth")).await.unwrap();
    let err = anonymous.get::<Counter>("anything").await.unwrap_err();
    assert!(err.to_string().contains("user name is empty"), "{err}");
    let wrong = Credentials { user: ROOT_USER.to_owned(), password: "not the password".to_owned() };
    let options = Options { credentials: Some(wrong), ..Options::prefix("/auth") };
    let err = EtcdState::connect(&[&endpoint], options).await.unwrap_err();
    assert!(err.to_string().contains("authentication failed"), "{err}");

    let state = EtcdState::connect(&[&endpoint], server.options("/auth")).await.unwrap();
    let raw = Raw::new(&state);
    assert_eq!(raw.authentications(), 1, "connecting authenticates");
    exercise(&state, "authenticated").await;
    assert_eq!(raw.authentications(), 1, "a good token is kept");

    // etcd drops a user's tokens when its password is set, even to the same
    // one: each kind of call then authenticates again, once, and goes through.
    let drop_tokens = || raw.change_password(&credentials.user, &credentials.password);
    drop_tokens().await.unwrap();
    assert_eq!(state.get::<Counter>("authenticated").await.unwrap().count, 1);
    assert_eq!(raw.authentications(), 2, "a unary call renews the token");

    drop_tokens().await.unwrap();
    let mut watch = state.watch::<Counter>("authenticated", WatchOptions::default()).await.unwrap();
    assert_eq!(raw.authentications(), 3, "opening a watch renews the token");
    let event = within("the watch's initial event", watch.recv()).await.unwrap();
    assert_eq!(event.event_type(), EventType::Created);

    drop_tokens().await.unwrap();
    let election = state.election("renewal", "renewal", ElectionOptions::default());
    assert_eq!(election.leader().await.unwrap(), None);
    assert_eq!(raw.authentications(), 4, "an election call renews the token");
}
