//! The wire contract, seen from a raw gRPC client (as a Go client sees it) and
//! from our client across server restarts: status codes, bad input, limits,
//! specs kept byte for byte, the watch protocol and watch resumption.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cosi::prelude::*;
use cosi::resource::EncodedSpec;
use cosi::state::{DestroyOptions, Event, MemoryState, State, Watch, WatchOptions};
use cosi::testing::resources::PathResource;
use cosi_grpc::proto::{self, state_client::StateClient};
use cosi_grpc::{Client, ClientSecurity, Endpoint, Limits, RetryOptions, Security, Server};
use futures_util::StreamExt as _;
use tonic::Code;
use tonic::transport::Channel;

const NS: &str = "wire";
const TYPE: &str = "WireResources.test.cosi.dev";

/// A server on loopback and a raw generated client connected to it.
async fn raw() -> StateClient<Channel> {
    let listening = Server::new(MemoryState::default())
        .max_message_size(1 << 20)
        .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::Insecure)
        .await
        .expect("bind");
    let Endpoint::Tcp(address) = *listening.endpoint() else { unreachable!("a TCP endpoint") };
    tokio::spawn(listening.serve());
    StateClient::connect(format!("http://{address}")).await.expect("connect").max_decoding_message_size(64 << 20)
}

fn wire_resource(id: &str, proto_spec: Vec<u8>, yaml_spec: &str) -> proto::Resource {
    proto::Resource {
        metadata: Some(proto::Metadata {
            namespace: NS.into(),
            r#type: TYPE.into(),
            id: id.into(),
            version: "undefined".into(),
            phase: "running".into(),
            ..proto::Metadata::default()
        }),
        spec: Some(proto::Spec { proto_spec, yaml_spec: yaml_spec.into() }),
    }
}

async fn create(
    client: &mut StateClient<Channel>,
    resource: proto::Resource,
    owner: &str,
) -> Result<proto::Resource, tonic::Status> {
    let request =
        proto::CreateRequest { resource: Some(resource), options: Some(proto::CreateOptions { owner: owner.into() }) };
    Ok(client.create(request).await?.into_inner().resource.expect("the stored resource"))
}

fn get_request(id: &str) -> proto::GetRequest {
    proto::GetRequest { namespace: NS.into(), r#type: TYPE.into(), id: id.into(), options: None }
}

fn list_request(options: proto::ListOptions) -> proto::ListRequest {
    proto::ListRequest { namespace: NS.into(), r#type: TYPE.into(), options: Some(options) }
}

async fn list_status(client: &mut StateClient<Channel>, options: proto::ListOptions) -> tonic::Status {
    match client.list(list_request(options)).await {
        Err(status) => status,
        Ok(response) => {
            let mut stream = response.into_inner();
            loop {
                match stream.message().await {
                    Err(status) => return status,
                    Ok(None) => panic!("the list should have failed"),
                    Ok(Some(_)) => {}
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_from_other_clients_come_back_byte_for_byte() {
    let mut client = raw().await;
    // Not valid protobuf and YAML with comments and odd spacing: nothing may re-encode them.
    let proto_spec = vec![0xff, 0x00, 0x01, 0x80];
    let yaml_spec = "# written by hand\nkey:   value   # trailing\nlist: [1,2]\n";
    let stored = create(&mut client, wire_resource("raw", proto_spec.clone(), yaml_spec), "").await.expect("create");
    assert_eq!(stored.metadata.as_ref().map(|m| m.version.as_str()), Some("1"));
    let got = client.get(get_request("raw")).await.expect("get").into_inner().resource.expect("resource");
    let spec = got.spec.expect("spec");
    assert_eq!(spec.proto_spec, proto_spec);
    assert_eq!(spec.yaml_spec, yaml_spec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_specs_travel_as_yaml_and_round_trip() {
    let state = support::loopback_memory().await;
    let spec = PathResource { value: "with: colon\nand a newline".into() };
    let typed = Typed::new_in(NS, "typed", spec.clone());
    state.create(typed, CreateOptions::default()).await.expect("create");
    let read = state.get::<PathResource>(&Kind::new(NS, PathResource::TYPE).pointer("typed")).await.expect("get");
    assert_eq!(*read.spec(), spec, "a typed spec should round-trip");
    let stored = state.get_dynamic(&Kind::new(NS, PathResource::TYPE).pointer("typed")).await.expect("get");
    let encoded = stored.spec().as_encoded().expect("a remote spec arrives encoded");
    assert!(encoded.proto.is_empty(), "typed Rust specs have no protobuf form");
    assert_eq!(encoded.yaml.as_deref(), Some(serde_yaml_ng::to_string(&spec).expect("yaml").as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_map_to_go_status_codes() {
    let mut client = raw().await;
    assert_eq!(client.get(get_request("missing")).await.expect_err("missing").code(), Code::NotFound);

    let stored = create(&mut client, wire_resource("r", vec![], "a: 1\n"), "owner").await.expect("create");
    let duplicate = create(&mut client, wire_resource("r", vec![], "a: 1\n"), "owner").await.expect_err("duplicate");
    assert_eq!(duplicate.code(), Code::AlreadyExists);

    let update = |resource: proto::Resource, owner: &str, phase: Option<&str>| proto::UpdateRequest {
        new_resource: Some(resource),
        options: Some(proto::UpdateOptions { owner: owner.into(), expected_phase: phase.map(Into::into) }),
    };
    let mut stale = stored.clone();
    stale.metadata.as_mut().expect("metadata").version = "7".into();
    assert_eq!(client.update(update(stale, "owner", None)).await.expect_err("stale").code(), Code::FailedPrecondition);
    assert_eq!(
        client.update(update(stored.clone(), "intruder", None)).await.expect_err("owner").code(),
        Code::PermissionDenied
    );
    assert_eq!(
        client.update(update(stored.clone(), "owner", Some("tearingDown"))).await.expect_err("phase").code(),
        Code::InvalidArgument
    );
    // Without an expected phase any phase is accepted, as Go's server does.
    let updated = client.update(update(stored, "owner", None)).await.expect("update").into_inner();
    assert_eq!(updated.resource.and_then(|r| r.metadata).map(|m| m.version), Some("2".into()));

    let destroy = |owner: &str| proto::DestroyRequest {
        namespace: NS.into(),
        r#type: TYPE.into(),
        id: "r".into(),
        options: Some(proto::DestroyOptions { owner: owner.into() }),
    };
    assert_eq!(client.destroy(destroy("intruder")).await.expect_err("owner").code(), Code::PermissionDenied);
    client.destroy(destroy("owner")).await.expect("destroy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_status_and_the_server_goes_on() {
    let mut client = raw().await;

    let missing = proto::CreateRequest { resource: None, options: None };
    let status = client.create(missing).await.expect_err("no resource");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("resource is missing"), "{status:?}");

    let mut no_metadata = wire_resource("x", vec![], "");
    no_metadata.metadata = None;
    let status = create(&mut client, no_metadata, "").await.expect_err("no metadata");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("metadata"), "{status:?}");

    let mut no_spec = wire_resource("x", vec![], "");
    no_spec.spec = None;
    assert_eq!(create(&mut client, no_spec, "").await.expect_err("no spec").code(), Code::InvalidArgument);

    let mut bad_version = wire_resource("x", vec![], "");
    bad_version.metadata.as_mut().expect("metadata").version = "one".into();
    assert_eq!(create(&mut client, bad_version, "").await.expect_err("version").code(), Code::InvalidArgument);

    let mut bad_phase = wire_resource("x", vec![], "");
    bad_phase.metadata.as_mut().expect("metadata").phase = "sleeping".into();
    assert_eq!(create(&mut client, bad_phase, "").await.expect_err("phase").code(), Code::InvalidArgument);

    let unknown_op = proto::ListOptions {
        label_query: vec![proto::LabelQuery {
            terms: vec![proto::LabelTerm { key: "k".into(), op: 42, value: vec![], invert: false }],
        }],
        id_query: None,
    };
    let status = list_status(&mut client, unknown_op).await;
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().contains("unsupported label query operator"), "{status:?}");

    let no_value = proto::ListOptions {
        label_query: vec![proto::LabelQuery {
            terms: vec![proto::LabelTerm {
                key: "k".into(),
                op: proto::label_term::Operation::Equal.into(),
                value: vec![],
                invert: false,
            }],
        }],
        id_query: None,
    };
    assert_eq!(list_status(&mut client, no_value).await.code(), Code::InvalidArgument);

    let bad_regexp = proto::ListOptions { label_query: vec![], id_query: Some(proto::IdQuery { regexp: "(".into() }) };
    let status = list_status(&mut client, bad_regexp).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("invalid ID query"), "{status:?}");

    // The limit is 1 MiB on this server.
    let huge = wire_resource("huge", vec![0; 2 << 20], "");
    let status = create(&mut client, huge, "").await.expect_err("too large");
    assert!(matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted), "{status:?}");

    let stale = proto::WatchRequest {
        namespace: NS.into(),
        r#type: TYPE.into(),
        id: None,
        options: Some(proto::WatchOptions { start_from_bookmark: Some(vec![1, 2, 3]), ..Default::default() }),
        api_version: 1,
    };
    assert_eq!(client.watch(stale).await.expect_err("stale bookmark").code(), Code::FailedPrecondition);

    let single_bootstrap = proto::WatchRequest {
        namespace: NS.into(),
        r#type: TYPE.into(),
        id: Some("x".into()),
        options: Some(proto::WatchOptions { bootstrap_contents: true, ..Default::default() }),
        api_version: 1,
    };
    assert_eq!(client.watch(single_bootstrap).await.expect_err("unsupported").code(), Code::Unimplemented);

    // After all that, the server still serves.
    create(&mut client, wire_resource("fine", vec![], "a: 1\n"), "").await.expect("the server goes on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_starts_with_ready_and_gates_events_on_api_version() {
    let mut client = raw().await;
    create(&mut client, wire_resource("a", vec![], "a: 1\n"), "").await.expect("create");
    for (api_version, expect_bootstrapped) in [(1, true), (0, false)] {
        let request = support::bootstrap_watch(NS, TYPE, api_version);
        let mut stream = client.watch(request).await.expect("watch").into_inner();
        let ready = stream.message().await.expect("ready").expect("a first message");
        assert!(ready.event.is_empty(), "the first message should be the empty ready marker");
        let batch = stream.message().await.expect("events").expect("a batch");
        let types: Vec<_> = batch.event.iter().map(|event| event.event_type()).collect();
        let mut expected = vec![proto::EventType::Created];
        if expect_bootstrapped {
            expected.push(proto::EventType::Bootstrapped);
        }
        assert_eq!(types, expected, "api_version {api_version}: one aggregated batch");
        if expect_bootstrapped {
            let marker = batch.event[1].resource.as_ref().and_then(|r| r.metadata.as_ref()).expect("kind marker");
            assert_eq!((marker.namespace.as_str(), marker.r#type.as_str()), (NS, TYPE));
        }
    }
}

/// Serves `state` on `endpoint` until the returned sender fires.
async fn serve_until_stopped(
    state: Arc<MemoryState>,
    endpoint: &Endpoint,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listening = Server::new(state).bind(endpoint, Security::Insecure).await.expect("bind");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        listening
            .serve_with_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .expect("serve");
    });
    (stop, task)
}

fn fast_retry() -> RetryOptions {
    RetryOptions {
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        max_elapsed: Duration::from_secs(20),
        ..RetryOptions::default()
    }
}

async fn next(watch: &mut cosi::state::Watch) -> Option<Event> {
    tokio::time::timeout(Duration::from_secs(20), watch.recv()).await.expect("an event within 20 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watch_resumes_from_its_last_bookmark() {
    let endpoint = Endpoint::Unix(support::socket_path());
    let state = Arc::new(MemoryState::default());
    let (stop, task) = serve_until_stopped(Arc::clone(&state), &endpoint).await;
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect").with_retry(fast_retry());
    let kind = Kind::new(NS, PathResource::TYPE);
    let mut watch = client.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
    client
        .create(Typed::new_in(NS, "before", PathResource::default()), CreateOptions::default())
        .await
        .expect("create");
    assert!(matches!(next(&mut watch).await, Some(Event::Created { ref resource, .. }) if resource.id() == "before"));

    // The server goes away; writes go on in the state meanwhile; the server comes back.
    stop.send(()).expect("stop");
    task.await.expect("the server stops cleanly");
    state
        .create_dynamic(Typed::new_in(NS, "while-down", PathResource::default()).into(), CreateOptions::default())
        .await
        .expect("create");
    let (_stop, _task) = serve_until_stopped(Arc::clone(&state), &endpoint).await;

    let event = next(&mut watch).await;
    assert!(
        matches!(event, Some(Event::Created { ref resource, .. }) if resource.id() == "while-down"),
        "the watch should resume right after its last event, got {event:?}"
    );
    client.create(Typed::new_in(NS, "after", PathResource::default()), CreateOptions::default()).await.expect("create");
    assert!(matches!(next(&mut watch).await, Some(Event::Created { ref resource, .. }) if resource.id() == "after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_that_cannot_resume_gets_one_error() {
    let endpoint = Endpoint::Unix(support::socket_path());
    let (stop, task) = serve_until_stopped(Arc::new(MemoryState::default()), &endpoint).await;
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect").with_retry(fast_retry());
    let kind = Kind::new(NS, PathResource::TYPE);
    let mut watch = client.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
    client
        .create(Typed::new_in(NS, "before", PathResource::default()), CreateOptions::default())
        .await
        .expect("create");
    assert!(next(&mut watch).await.is_some_and(|event| event.bookmark().is_some()));

    // A new server with a new state: the old bookmark means nothing there.
    stop.send(()).expect("stop");
    task.await.expect("the server stops cleanly");
    let (_stop, _task) = serve_until_stopped(Arc::new(MemoryState::default()), &endpoint).await;

    let event = next(&mut watch).await;
    assert!(
        matches!(event, Some(Event::Errored { ref error }) if error.is_invalid_bookmark()),
        "expected one invalid-bookmark error, got {event:?}"
    );
    assert!(next(&mut watch).await.is_none(), "the watch should end after its error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_without_bookmark_fails_at_once_when_the_server_goes() {
    let endpoint = Endpoint::Unix(support::socket_path());
    let (stop, task) = serve_until_stopped(Arc::new(MemoryState::default()), &endpoint).await;
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect").with_retry(fast_retry());
    let mut watch = client
        .watch_kind_dynamic(&Kind::new(NS, PathResource::TYPE), WatchKindOptions::default())
        .await
        .expect("watch");
    stop.send(()).expect("stop");
    task.await.expect("the server stops cleanly");
    let event = next(&mut watch).await;
    assert!(matches!(event, Some(Event::Errored { .. })), "expected one error, got {event:?}");
    assert!(next(&mut watch).await.is_none());
}

/// A memory state whose watches end, as broken streams do, each time
/// `break_watches` is called; with `resumes_end`, the watches resumed from a
/// bookmark end at once: a server whose watch breaks right after every resume.
struct Breaking {
    state: MemoryState,
    breaks: tokio::sync::watch::Sender<u64>,
    resumes: AtomicUsize,
    resumes_end: bool,
}

impl Breaking {
    fn new(resumes_end: bool) -> Arc<Self> {
        let breaks = tokio::sync::watch::Sender::new(0);
        Arc::new(Breaking { state: MemoryState::default(), breaks, resumes: AtomicUsize::new(0), resumes_end })
    }

    fn break_watches(&self) {
        self.breaks.send_modify(|count| *count += 1);
    }

    fn resumes(&self) -> usize {
        self.resumes.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl State for Breaking {
    async fn get_dynamic(&self, pointer: &Pointer) -> cosi::Result<DynamicResource> {
        self.state.get_dynamic(pointer).await
    }
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.state.list_dynamic(kind, options).await
    }
    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> cosi::Result<DynamicResource> {
        self.state.create_dynamic(resource, options).await
    }
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.state.update_dynamic(resource, options).await
    }
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.state.destroy_dynamic(pointer, options).await
    }
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<Watch> {
        self.state.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        if options.start_from.is_some() {
            self.resumes.fetch_add(1, Ordering::SeqCst);
            if self.resumes_end {
                return Ok(Watch::from_batches(futures_util::stream::empty()));
            }
        }
        let watch = self.state.watch_kind_dynamic(kind, options).await?;
        let mut breaks = self.breaks.subscribe();
        let broken = async move {
            let _ = breaks.changed().await;
        };
        Ok(Watch::from_batches(watch.map(|event| vec![event]).take_until(broken)))
    }
}

fn slow_retry() -> RetryOptions {
    RetryOptions {
        initial_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(4),
        max_elapsed: Duration::from_secs(60),
        ..RetryOptions::default()
    }
}

/// A client of `state` over a pipe, retrying slowly, and its watch of the
/// kind once it has delivered a first event, whose bookmark a resume starts from.
async fn watching(state: &Arc<Breaking>) -> (Client, Watch) {
    let client = support::over_a_pipe(Arc::clone(state), Limits::default()).with_retry(slow_retry());
    let kind = Kind::new(NS, PathResource::TYPE);
    let mut watch = client.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
    client.create(Typed::new_in(NS, "first", PathResource::default()), CreateOptions::default()).await.expect("create");
    let event = watch.recv().await;
    assert!(event.is_some_and(|event| event.bookmark().is_some()), "a first event, to resume from");
    (client, watch)
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_breaks_right_after_each_resume_gives_up_after_max_elapsed() {
    let state = Breaking::new(true);
    let (_client, mut watch) = watching(&state).await;

    // From now on every resume is answered "ready", then the stream ends.
    // Bounded in tokio's paused time, which moves only while the client
    // waits to retry: ten times `max_elapsed`.
    state.break_watches();
    let event = tokio::time::timeout(Duration::from_secs(600), watch.recv()).await;
    let error = match event {
        Ok(Some(Event::Errored { error })) => error.to_string(),
        Ok(other) => panic!("expected an error, got {other:?}"),
        Err(_) => panic!("the watch still resumes after 10 minutes, {} times", state.resumes()),
    };
    assert!(error.contains("maximum retry attempts"), "{error}");
    assert!(watch.recv().await.is_none(), "the watch ends after its error");
    assert!(state.resumes() > 1, "the watch resumed more than once before it gave up");
}

/// The other side of the test above: the time a resumed stream stays open
/// does not count as retrying, so an idle watch (nothing to deliver) whose
/// stream breaks now and then, further apart than `max_elapsed`, resumes each time.
#[tokio::test(start_paused = true)]
async fn an_idle_watch_resumes_from_every_break() {
    let state = Breaking::new(false);
    let (client, mut watch) = watching(&state).await;

    for breaks in 1..=3 {
        state.break_watches();
        // The watch resumes while it is read, then has nothing to deliver
        // for longer than `max_elapsed`.
        let event = tokio::time::timeout(Duration::from_secs(120), watch.recv()).await;
        assert!(event.is_err(), "nothing to deliver after break {breaks}, got {event:?}");
        assert_eq!(state.resumes(), breaks, "resumed from break {breaks}");
    }
    client.create(Typed::new_in(NS, "after", PathResource::default()), CreateOptions::default()).await.expect("create");
    let event = watch.recv().await;
    assert!(
        matches!(event, Some(Event::Created { ref resource, .. }) if resource.id() == "after"),
        "the watch goes on, got {event:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_spec_round_trips_through_our_client() {
    let state = support::loopback_memory().await;
    let spec = EncodedSpec { proto: vec![8, 1], yaml: Some("value: 1\n".into()) };
    let resource = DynamicResource::encoded(Metadata::new(NS, TYPE, "enc"), spec.clone());
    state.create_dynamic(resource, CreateOptions::default()).await.expect("create");
    let got = state.get_dynamic(&Kind::new(NS, TYPE).pointer("enc")).await.expect("get");
    assert_eq!(got.spec().as_encoded(), Some(&spec));
}
