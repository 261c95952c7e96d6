//! Watch responses are split by encoded size: a kind whose resources add up to
//! far more than one gRPC message bootstraps through our client and through a
//! raw client reading the frames, with the ready marker first and the
//! Bootstrapped marker last, carrying its bookmark.

mod support;

use std::time::Duration;

use cosi::prelude::*;
use cosi::resource::EncodedSpec;
use cosi::state::{Event, MemoryState, State};
use cosi_grpc::proto::{self, state_client::StateClient};
use cosi_grpc::{DEFAULT_CLIENT_MAX_MESSAGE_SIZE, DEFAULT_MAX_MESSAGE_SIZE};
use prost::Message as _;

const NS: &str = "big";
const TYPE: &str = "BigResources.test.cosi.dev";
/// Forty resources of 256 KiB: a 10 MiB kind, over twice the 4 MiB message limit.
const COUNT: usize = 40;
const SPEC_BYTES: usize = 256 << 10;

async fn big_kind() -> MemoryState {
    let state = MemoryState::default();
    for n in 0..COUNT {
        let spec = EncodedSpec { proto: vec![n as u8; SPEC_BYTES], yaml: None };
        let resource = DynamicResource::encoded(Metadata::new(NS, TYPE, format!("r{n:03}")), spec);
        state.create_dynamic(resource, CreateOptions::default()).await.expect("create");
    }
    state
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future).await.expect("within 60 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_mib_kind_bootstraps_through_the_client() {
    let client = support::loopback(big_kind().await).await;
    let kind = Kind::new(NS, TYPE);
    let options = WatchKindOptions::bootstrap().with_bootstrap_bookmark();
    let mut watch = client.watch_kind_dynamic(&kind, options).await.expect("watch");
    let mut ids = Vec::new();
    loop {
        match within(watch.recv()).await.expect("the watch goes on") {
            Event::Created { resource, bookmark } => {
                assert_eq!(resource.spec().as_encoded().map(|spec| spec.proto.len()), Some(SPEC_BYTES));
                // As in process: bootstrap events have no position of their own.
                assert!(bookmark.is_none(), "a bootstrap event gained a bookmark");
                ids.push(resource.id().to_owned());
            }
            Event::Bootstrapped { bookmark, .. } => {
                assert!(bookmark.is_some(), "the Bootstrapped marker keeps its bookmark");
                break;
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    let expected: Vec<String> = (0..COUNT).map(|n| format!("r{n:03}")).collect();
    assert_eq!(ids, expected, "every resource, in order, before the Bootstrapped marker");

    // The watch stays live after its bootstrap.
    let spec = EncodedSpec { proto: vec![1; 8], yaml: None };
    client
        .create_dynamic(DynamicResource::encoded(Metadata::new(NS, TYPE, "after"), spec), CreateOptions::default())
        .await
        .expect("create after bootstrap");
    loop {
        match within(watch.recv()).await {
            Some(Event::Created { resource, .. }) => break assert_eq!(resource.id(), "after"),
            // A position marker the state may send between changes.
            Some(Event::Noop { .. }) => (),
            other => panic!("expected the later creation, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_client_reads_frames_within_the_message_limit() {
    let address = support::listen(big_kind().await).await;
    // A client with gRPC's default 4 MiB receive limit, as Go's.
    let mut client = StateClient::connect(format!("http://{address}"))
        .await
        .expect("connect")
        .max_decoding_message_size(DEFAULT_MAX_MESSAGE_SIZE);
    let mut request = support::bootstrap_watch(NS, TYPE, 1);
    request.options.as_mut().expect("options").bootstrap_bookmark = true;
    let mut stream = client.watch(request).await.expect("watch").into_inner();
    let ready = within(stream.message()).await.expect("ready").expect("a first message");
    assert!(ready.event.is_empty(), "the first message is the empty ready marker");

    let mut types = Vec::new();
    let mut frames = 0;
    let mut last_bookmark = None;
    while !types.contains(&proto::EventType::Bootstrapped) {
        let response = within(stream.message()).await.expect("a frame within the limit").expect("more frames");
        assert!(!response.event.is_empty(), "only the first message is empty");
        assert!(response.encoded_len() <= DEFAULT_MAX_MESSAGE_SIZE, "a frame of {} bytes", response.encoded_len());
        types.extend(response.event.iter().map(proto::Event::event_type));
        if let Some(marker) = response.event.iter().find(|event| event.event_type() == proto::EventType::Bootstrapped) {
            last_bookmark.clone_from(&marker.bookmark);
        }
        frames += 1;
    }
    assert!(frames >= 3, "10 MiB cannot fit in fewer than three 4 MiB frames, got {frames}");
    assert!(last_bookmark.is_some(), "the Bootstrapped marker keeps its bookmark");
    // The state may add a Noop (a position marker) after the bootstrap.
    types.retain(|event_type| *event_type != proto::EventType::Noop);
    let mut expected = vec![proto::EventType::Created; COUNT];
    expected.push(proto::EventType::Bootstrapped);
    assert_eq!(types, expected, "every resource, then the marker");
}

/// A kind of two small resources, one over the largest response a server with
/// default limits sends, and one more after it.
async fn kind_with_an_oversized_resource() -> MemoryState {
    let state = MemoryState::default();
    let sizes = [8, 8, DEFAULT_CLIENT_MAX_MESSAGE_SIZE + 1, 8];
    for (n, size) in sizes.into_iter().enumerate() {
        let spec = EncodedSpec { proto: vec![n as u8; size], yaml: None };
        let resource = DynamicResource::encoded(Metadata::new(NS, TYPE, format!("r{n}")), spec);
        state.create_dynamic(resource, CreateOptions::default()).await.expect("create");
    }
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_over_the_response_limit_ends_the_watch_after_the_events_before_it() {
    let address = support::listen(kind_with_an_oversized_resource().await).await;
    let mut client = StateClient::connect(format!("http://{address}")).await.expect("connect");
    for api_version in [0, 1] {
        let request = support::bootstrap_watch(NS, TYPE, api_version);
        let mut stream = client.watch(request).await.expect("watch").into_inner();
        let ready = within(stream.message()).await.expect("ready").expect("a first message");
        assert!(ready.event.is_empty(), "the first message is the empty ready marker");
        let mut ids = Vec::new();
        let ending = loop {
            match within(stream.message()).await {
                Ok(Some(response)) => match response.event.iter().find(|event| event.error.is_some()) {
                    Some(errored) => break Ok(errored.clone()),
                    None => ids.extend(
                        response
                            .event
                            .iter()
                            .filter_map(|event| event.resource.as_ref())
                            .map(|resource| resource.metadata.as_ref().expect("metadata").id.clone()),
                    ),
                },
                Ok(None) => panic!("API {api_version}: the watch ended without saying why"),
                Err(status) => break Err(status),
            }
        };
        assert_eq!(ids, ["r0", "r1"], "API {api_version}: the events before the oversized one");
        let message = match (api_version, ending) {
            (0, Err(status)) => {
                assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
                status.message().to_owned()
            }
            (1, Ok(errored)) => {
                assert_eq!(errored.event_type(), proto::EventType::Errored);
                errored.error.unwrap_or_default()
            }
            (_, ending) => panic!("API {api_version}: unexpected ending {ending:?}"),
        };
        assert!(message.contains("a watch response may hold"), "API {api_version}: {message}");
        // Nothing follows: the stream ends there.
        assert!(matches!(within(stream.message()).await, Ok(None) | Err(_)), "API {api_version}: more after the end");
    }
}
