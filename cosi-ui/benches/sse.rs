//! From a resource change to the page: the time from an update of a
//! resource until an event-stream client (as the page's `EventSource`)
//! receives its `resource` event, over 200 changes; median and p99.
//!
//! Twice: with the page on the state itself (as the example OS's `--ui`),
//! and with the page on a gRPC client of the state over a unix socket (as
//! `cosictl ui`). `cargo bench -p cosi-ui --bench sse`; the numbers are in
//! BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cosi::prelude::*;
use cosi_grpc::{Client, ClientSecurity, Endpoint, Security, Server};
use cosi_ui::{Config, Ui};
use support::{EventClient, Number};

const CHANGES: usize = 200;

async fn measure(what: &str, page_state: Arc<dyn State>, state: &Arc<dyn State>) {
    let ui = Ui::new(page_state, Config::default());
    let listening = ui.bind().await.expect("bind");
    let address = listening.local_addr();
    let server = tokio::spawn(listening.serve());
    let mut events = EventClient::open(address, &ui).await;
    events.until("ready", |_| true).await;

    let mut samples = Vec::with_capacity(CHANGES);
    for value in 0..CHANGES {
        let value = i64::try_from(value).expect("small") + 1000;
        let started = Instant::now();
        let updated = state
            .modify::<Number>("answer", UpdateOptions::default(), |number| number.value = value)
            .await
            .expect("update");
        let version = updated.metadata().version().to_string();
        events
            .until("resource", |change| {
                change["type"] == Number::TYPE && change["id"] == "answer" && change["version"] == version.as_str()
            })
            .await;
        samples.push(started.elapsed());
        // Let the controller's own writes pass before the next change.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    samples.sort();
    let percentile = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    let mean = samples.iter().sum::<Duration>() / u32::try_from(samples.len()).expect("small");
    println!(
        "{what}: {CHANGES} changes: median {:?}, p99 {:?}, mean {mean:?}, max {:?}",
        percentile(50),
        percentile(99),
        samples[samples.len() - 1]
    );
    server.abort();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (state, _runtime) = support::program().await;
    measure("in process (the example OS's --ui)", Arc::clone(&state), &state).await;

    let dir = tempfile::tempdir().expect("a temporary directory");
    let endpoint = Endpoint::Unix(dir.path().join("cosi.sock"));
    let listening = Server::new(Arc::clone(&state)).bind(&endpoint, Security::Insecure).await.expect("bind");
    let grpc = tokio::spawn(listening.serve());
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect");
    measure("through gRPC on a unix socket (cosictl ui)", Arc::new(client), &state).await;
    grpc.abort();
}
