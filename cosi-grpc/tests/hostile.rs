//! A hostile client against the server's limits (see `limits.rs` and
//! `admission.rs`): too many watches, huge queries, queries that hold too much compiled, oversized responses,
//! half-sent requests, more requests than its share, too many connections
//! (in all and from one address); each gets a clear status, waits its turn
//! or is closed while another client keeps being served. Also the failures that used to stay
//! silent or say too much: backend error texts, and a shutdown stuck on a call.

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
use cosi_grpc::{Client, ClientSecurity, Endpoint, Limits, Security, Server};
use tonic::Code;
use tonic::transport::Channel;

const NS: &str = "hostile";
const TYPE: &str = "Targets.test.cosi.dev";

/// A unary call over a raw HTTP/2 connection whose request declares 100
/// bytes and sends 2: the server has begun to receive it and waits for the
/// rest. Dropping it resets the stream.
struct HalfSent {
    response: h2::client::ResponseFuture,
    _body: h2::SendStream<bytes::Bytes>,
}

async fn half_sent(address: std::net::SocketAddr) -> HalfSent {
    let mut sender = h2_connection(address).await;
    half_sent_on(&mut sender, address).await
}

/// A raw HTTP/2 connection: one client, whatever streams it opens.
async fn h2_connection(address: std::net::SocketAddr) -> h2::client::SendRequest<bytes::Bytes> {
    let tcp = tokio::net::TcpStream::connect(address).await.expect("connect");
    let (sender, connection) = h2::client::handshake(tcp).await.expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    sender.ready().await.expect("ready")
}

/// [`half_sent`] on a connection of the caller's.
async fn half_sent_on(sender: &mut h2::client::SendRequest<bytes::Bytes>, address: std::net::SocketAddr) -> HalfSent {
    let request = http::Request::post(format!("http://{address}/cosi.resource.State/Get"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a request");
    // One stream at a time may wait to open: the last must have opened.
    *sender = sender.clone().ready().await.expect("ready");
    let (response, mut body) = sender.send_request(request, false).expect("a stream");
    // Uncompressed, 100 bytes long; two of them.
    body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 100, 0x0a, 0x00]), false).expect("send");
    HalfSent { response, _body: body }
}

/// Whether `future` is still pending after a while: for what must wait.
async fn still_waits<T>(future: &mut (impl Future<Output = T> + Unpin)) -> bool {
    tokio::time::timeout(Duration::from_millis(500), future).await.is_err()
}

/// Serves `server` on loopback; returns its address.
async fn start(server: Server) -> std::net::SocketAddr {
    let listening =
        server.bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::Insecure).await.expect("bind");
    let Endpoint::Tcp(address) = *listening.endpoint() else { unreachable!("a TCP endpoint") };
    tokio::spawn(listening.serve());
    address
}

async fn raw(address: std::net::SocketAddr) -> StateClient<Channel> {
    StateClient::connect(format!("http://{address}")).await.expect("connect").max_decoding_message_size(64 << 20)
}

async fn client(address: std::net::SocketAddr) -> Client {
    Client::connect(&Endpoint::Tcp(address), ClientSecurity::Insecure).await.expect("connect")
}

/// A get of a resource that does not exist: `NOT_FOUND` once served.
fn missing() -> proto::GetRequest {
    proto::GetRequest { namespace: NS.into(), r#type: TYPE.into(), id: "x".into(), options: None }
}

fn watch_request() -> proto::WatchRequest {
    proto::WatchRequest {
        namespace: NS.into(),
        r#type: TYPE.into(),
        id: None,
        options: Some(proto::WatchOptions { aggregated: true, ..Default::default() }),
        api_version: 1,
    }
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future).await.expect("within 30 s")
}

/// The other, well-behaved client can still read, write and watch.
async fn is_served(other: &Client) {
    let created = within(other.create(Typed::new_in(NS, "probe", PathResource::default()), CreateOptions::default()))
        .await
        .expect("the other client writes");
    assert_eq!(created.id(), "probe");
    let kind = Kind::new(NS, PathResource::TYPE);
    let listed = within(other.list_dynamic(&kind, &ListOptions::default())).await.expect("it lists");
    assert_eq!(listed.len(), 1);
    within(other.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap())).await.expect("it watches");
    within(other.destroy_dynamic(created.metadata().pointer(), DestroyOptions::default())).await.expect("it destroys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_opening_thousands_of_watches_is_refused_and_others_are_served() {
    let limit = Limits::default().max_watches_per_client;
    let address = start(Server::new(MemoryState::default())).await;
    let mut hostile = raw(address).await;
    let mut open = Vec::new();
    let refused = loop {
        assert!(open.len() <= 2 * limit, "{} watches on one connection and no refusal", open.len());
        match within(hostile.watch(watch_request())).await {
            Ok(response) => open.push(response.into_inner()),
            Err(status) => break status,
        }
    };
    assert_eq!(open.len(), limit, "refused after exactly the limit");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("limit"), "the status says why: {}", refused.message());

    // Another connection is not affected, and the hostile one still gets
    // unary calls through.
    is_served(&client(address).await).await;
    let status = within(hostile.get(missing())).await.expect_err("not found");
    assert_eq!(status.code(), Code::NotFound);

    // Closing watches frees their places, once the server has seen them close.
    open.truncate(limit - 10);
    within(async {
        while let Err(status) = hostile.watch(watch_request()).await {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_compiled_queries_are_held_within_its_budget_and_others_are_served() {
    let budget = 8 << 20;
    let address = start(
        Server::new(MemoryState::default()).limits(Limits { max_query_bytes_per_client: budget, ..Limits::default() }),
    )
    .await;
    let mut hostile = raw(address).await;
    // About a MiB compiled (Unicode letters), within the limit of one query.
    let heavy = || {
        let mut request = watch_request();
        let options = request.options.as_mut().expect("options");
        options.id_query = Some(proto::IdQuery { regexp: r"\pL{20}".into() });
        request
    };
    let mut open = Vec::new();
    let refused = loop {
        assert!(open.len() < 100, "{} watches of a MiB each and no refusal", open.len());
        match within(hostile.watch(heavy())).await {
            Ok(response) => open.push(response.into_inner()),
            Err(status) => break status,
        }
    };
    assert!((4..=8).contains(&open.len()), "8 MiB hold a few such queries, not {}", open.len());
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_query_bytes_per_client"), "it names the limit: {}", refused.message());
    // A list with such a query is refused too, and so counted while it runs.
    let options =
        proto::ListOptions { id_query: Some(proto::IdQuery { regexp: r"\pL{20}".into() }), ..Default::default() };
    assert_eq!(list_status(&mut hostile, options).await, Code::ResourceExhausted);

    // Watches without queries hold nothing of it, and another client has its own.
    within(hostile.watch(watch_request())).await.expect("a watch without queries");
    let mut other = raw(address).await;
    within(other.watch(heavy())).await.expect("another client's first heavy query");
    is_served(&client(address).await).await;

    // Closing watches frees what their queries held, once the server has seen them close.
    open.pop();
    within(async {
        while let Err(status) = hostile.watch(heavy()).await {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

fn list_request(options: proto::ListOptions) -> proto::ListRequest {
    proto::ListRequest { namespace: NS.into(), r#type: TYPE.into(), options: Some(options) }
}

async fn list_status(client: &mut StateClient<Channel>, options: proto::ListOptions) -> Code {
    match within(client.list(list_request(options))).await {
        Err(status) => status.code(),
        Ok(response) => {
            let mut stream = response.into_inner();
            loop {
                match within(stream.message()).await {
                    Err(status) => return status.code(),
                    Ok(None) => return Code::Ok,
                    Ok(Some(_)) => {}
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_queries_get_a_clear_status_and_others_are_served() {
    let address = start(Server::new(MemoryState::default())).await;
    let mut hostile = raw(address).await;
    let other = client(address).await;

    let term = |n: usize| proto::LabelTerm {
        key: format!("key-{n}"),
        op: proto::label_term::Operation::Equal.into(),
        value: vec!["v".repeat(16)],
        invert: false,
    };
    let many_terms = proto::LabelQuery { terms: (0..100_000).map(term).collect() };
    let many_values = proto::LabelQuery {
        terms: vec![proto::LabelTerm {
            key: "k".into(),
            op: proto::label_term::Operation::In.into(),
            value: (0..10_000).map(|n| n.to_string()).collect(),
            invert: false,
        }],
    };
    let cases = [
        ("100,000 label terms", proto::ListOptions { label_query: vec![many_terms], id_query: None }),
        ("10,000 label values", proto::ListOptions { label_query: vec![many_values], id_query: None }),
        (
            "1,000 label queries",
            proto::ListOptions { label_query: vec![proto::LabelQuery { terms: vec![term(0)] }; 1_000], id_query: None },
        ),
        (
            "a 1 MiB ID pattern",
            proto::ListOptions { label_query: vec![], id_query: Some(proto::IdQuery { regexp: "a".repeat(1 << 20) }) },
        ),
        (
            "an ID pattern that compiles to megabytes",
            proto::ListOptions { label_query: vec![], id_query: Some(proto::IdQuery { regexp: r"\w{200}".into() }) },
        ),
    ];
    for (what, options) in cases {
        assert_eq!(list_status(&mut hostile, options.clone()).await, Code::InvalidArgument, "list with {what}");
        let request = proto::WatchRequest {
            options: Some(proto::WatchOptions {
                label_query: options.label_query,
                id_query: options.id_query,
                aggregated: true,
                ..Default::default()
            }),
            ..watch_request()
        };
        let status = within(hostile.watch(request)).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "watch with {what}: {status:?}");
        assert!(status.message().contains("limit") || status.message().contains("size"), "{what}: {status:?}");
    }
    // A query of ordinary size still works.
    let ordinary = proto::ListOptions {
        label_query: vec![proto::LabelQuery { terms: vec![term(1), term(2)] }],
        id_query: Some(proto::IdQuery { regexp: "^(?-u:\\w){1,64}$".into() }),
    };
    assert_eq!(list_status(&mut hostile, ordinary).await, Code::Ok);
    is_served(&other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_refuses_a_response_over_its_limit() {
    // A server that allows large messages stands in for a hostile one.
    let state = MemoryState::default();
    let spec = EncodedSpec { proto: vec![7; 20 << 20], yaml: None };
    let big = DynamicResource::encoded(Metadata::new(NS, TYPE, "big"), spec);
    state.create_dynamic(big, CreateOptions::default()).await.expect("create 20 MiB");
    let address = start(Server::new(state).max_message_size(64 << 20)).await;

    let reader = client(address).await;
    let err = match within(reader.get_dynamic(&Pointer::new(NS, TYPE, "big"))).await {
        // Not `expect_err`: its message would print the 20 MiB resource.
        Ok(_) => panic!("the client accepted a 20 MiB response over its limit"),
        Err(err) => err,
    };
    assert!(err.to_string().contains("message length too large"), "{err}");
    let raised = client(address).await.max_message_size(32 << 20);
    let read = within(raised.get_dynamic(&Pointer::new(NS, TYPE, "big"))).await.expect("within a raised limit");
    assert_eq!(read.spec().as_encoded().map(|spec| spec.proto.len()), Some(20 << 20));
}

/// A memory state that counts the watches opened on it.
struct Counted {
    state: Arc<MemoryState>,
    watches: Arc<AtomicUsize>,
}

#[async_trait]
impl State for Counted {
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
        self.watches.fetch_add(1, Ordering::SeqCst);
        self.state.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        self.state.watch_kind_dynamic(kind, options).await
    }
}

/// The watch form of the test above: an event over the client's limit ends
/// the watch with an error saying so, instead of fetching it again and again.
#[tokio::test(start_paused = true)]
async fn a_watch_ends_on_a_response_over_the_clients_limit() {
    let state = Arc::new(MemoryState::default());
    let watches = Arc::new(AtomicUsize::new(0));
    let counted = Counted { state: Arc::clone(&state), watches: Arc::clone(&watches) };
    // A server that allows large messages stands in for a hostile one.
    let limits = Limits { max_message_size: 64 << 20, ..Limits::default() };
    let client = support::over_a_pipe(counted, limits).max_message_size(1 << 20);
    let kind = Kind::new(NS, TYPE);
    let mut watch = client.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("watch");
    let small = EncodedSpec { proto: vec![7; 8], yaml: None };
    let created = state
        .create_dynamic(DynamicResource::encoded(Metadata::new(NS, TYPE, "big"), small), CreateOptions::default())
        .await
        .expect("create");
    let event = watch.recv().await;
    assert!(
        matches!(event, Some(Event::Created { ref bookmark, .. }) if bookmark.is_some()),
        "a first event, to resume from: {event:?}"
    );
    let big = EncodedSpec { proto: vec![7; 2 << 20], yaml: None };
    state
        .update_dynamic(DynamicResource::encoded(created.metadata().clone(), big), UpdateOptions::default())
        .await
        .expect("update to 2 MiB");

    // Bounded in tokio's paused time, which moves only while the client waits
    // to retry: an hour of it is thousands of attempts.
    let event = tokio::time::timeout(Duration::from_secs(3600), watch.recv()).await;
    let error = match event {
        Ok(Some(Event::Errored { error })) => error.to_string(),
        Ok(other) => panic!("expected an error, got {other:?}"),
        Err(_) => panic!("the client still retries after an hour, {} watches", watches.load(Ordering::SeqCst)),
    };
    assert!(error.contains(&(1 << 20).to_string()) && error.contains("max_message_size"), "{error}");
    assert!(watch.recv().await.is_none(), "the watch ends after its error");
    assert_eq!(watches.load(Ordering::SeqCst), 1, "the client did not watch again");
}

/// A state whose writes fail with an error naming a file of the server's machine,
/// and whose `get` never returns (it tells `entered` when one has begun).
struct Failing(MemoryState, Arc<tokio::sync::Notify>);

impl Failing {
    fn new() -> Self {
        Failing(MemoryState::default(), Arc::default())
    }
}

const SECRET_PATH: &str = "/var/lib/secret-dir/state.redb";

#[async_trait]
impl State for Failing {
    async fn get_dynamic(&self, _: &Pointer) -> cosi::Result<DynamicResource> {
        self.1.notify_one();
        std::future::pending().await
    }
    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> cosi::Result<Vec<DynamicResource>> {
        self.0.list_dynamic(kind, options).await
    }
    async fn create_dynamic(&self, _: DynamicResource, _: CreateOptions) -> cosi::Result<DynamicResource> {
        Err(cosi::Error::backend(std::io::Error::other(format!("cannot write {SECRET_PATH}: disk full"))))
    }
    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> cosi::Result<DynamicResource> {
        self.0.update_dynamic(resource, options).await
    }
    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> cosi::Result<()> {
        self.0.destroy_dynamic(pointer, options).await
    }
    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> cosi::Result<Watch> {
        self.0.watch_dynamic(pointer, options).await
    }
    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> cosi::Result<Watch> {
        self.0.watch_kind_dynamic(kind, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_errors_reach_clients_without_their_text() {
    let address = start(Server::new(Failing::new())).await;
    let mut raw = raw(address).await;
    let resource = proto::Resource {
        metadata: Some(proto::Metadata {
            namespace: NS.into(),
            r#type: TYPE.into(),
            id: "a".into(),
            version: "undefined".into(),
            phase: "running".into(),
            ..proto::Metadata::default()
        }),
        spec: Some(proto::Spec::default()),
    };
    let request = proto::CreateRequest { resource: Some(resource), options: None };
    let status = within(raw.create(request)).await.expect_err("the backend fails");
    assert_eq!(status.code(), Code::Unavailable);
    let trailers = format!("{:?}", status.metadata());
    for text in [status.message(), trailers.as_str()] {
        assert!(!text.contains("secret-dir"), "the server's file path reached the client: {text}");
    }
    assert!(status.message().contains("correlation ID"), "{}", status.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_its_grace_period_despite_a_stuck_call() {
    let limits = Limits { shutdown_grace: Duration::from_millis(300), ..Limits::default() };
    let failing = Failing::new();
    let entered = Arc::clone(&failing.1);
    let listening = Server::new(failing)
        .limits(limits)
        .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::Insecure)
        .await
        .expect("bind");
    let Endpoint::Tcp(address) = *listening.endpoint() else { unreachable!("a TCP endpoint") };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listening.serve_with_shutdown(async move {
        let _ = stopped.await;
    }));
    let stuck = client(address).await;
    let call = tokio::spawn(async move { stuck.get_dynamic(&Pointer::new(NS, TYPE, "never")).await });
    within(entered.notified()).await;
    let _ = stop.send(());
    let served = tokio::time::timeout(Duration::from_secs(10), server).await;
    let served = served.expect("the server stops within its grace period").expect("the server task");
    served.expect("a stop after the grace period is a clean stop");
    assert!(!call.is_finished(), "the call was indeed stuck");
    let refused = tokio::net::TcpStream::connect(address).await;
    assert!(refused.is_err(), "the server no longer listens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_wait_for_their_turn_and_hold_no_more() {
    let day = Duration::from_secs(86_400);
    let limits = Limits { max_requests_in_flight: 2, request_timeout: day, ..Limits::default() };
    let address = start(Server::new(MemoryState::default()).limits(limits)).await;
    let first = half_sent(address).await;
    let _second = half_sent(address).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Both places are taken: a third call, whole and well-formed, waits.
    let mut other = raw(address).await;
    let mut waiting = Box::pin(async move { other.get(missing()).await });
    assert!(still_waits(&mut waiting).await, "a third request was answered while two held their places");

    // A reset stream gives its place back.
    drop(first);
    let status = within(waiting).await.expect_err("not found");
    assert_eq!(status.code(), Code::NotFound);
}

/// A limit of any length is taken, the longest as "never": adding one to
/// the clock's reading panicked each call (the request timeout) and each
/// connection (the keepalive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_times_are_taken_as_never() {
    let limits = Limits {
        request_timeout: Duration::MAX,
        keepalive_interval: Duration::MAX,
        keepalive_timeout: Duration::MAX,
        ..Limits::default()
    };
    let address = start(Server::new(MemoryState::default()).limits(limits)).await;
    let mut raw = raw(address).await;
    assert_eq!(within(raw.get(missing())).await.expect_err("not found").code(), Code::NotFound);
    is_served(&client(address).await).await;
}

/// One place to arrive in, in all; two requests waiting or arriving per
/// client; and a request timeout that no test reaches.
fn one_place_two_per_client() -> Limits {
    Limits {
        max_requests_in_flight: 1,
        max_requests_in_flight_per_client: 2,
        request_timeout: Duration::from_secs(86_400),
        ..Limits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_more_than_its_share_is_refused_and_others_are_served() {
    let address = start(Server::new(MemoryState::default()).limits(one_place_two_per_client())).await;
    // The one place is taken: the next requests wait for it.
    let holder = half_sent(address).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // One connection, one client: two requests waiting are its share, a third is refused at once.
    let greedy = raw(address).await;
    let call = |mut client: StateClient<Channel>| Box::pin(async move { client.get(missing()).await });
    let (mut first, mut second) = (call(greedy.clone()), call(greedy.clone()));
    assert!(still_waits(&mut first).await && still_waits(&mut second).await, "answered without a place");
    let refused = within(call(greedy.clone())).await.expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("the most one client may"), "{refused:?}");

    // Another client's request waits its turn beside them, and every one is served once the place is free.
    let mut other = call(raw(address).await);
    assert!(still_waits(&mut other).await, "answered without a place");
    drop(holder);
    for waiting in [first, second, other] {
        assert_eq!(within(waiting).await.expect_err("not found").code(), Code::NotFound);
    }
}

/// Half-sent requests count against their client too. Which of one
/// connection's concurrent requests is over its share is the server's to say:
/// each stream's call runs in a task of its own, in no fixed order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_half_sending_more_than_its_share_has_one_refused() {
    let address = start(Server::new(MemoryState::default()).limits(one_place_two_per_client())).await;
    let mut connection = h2_connection(address).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(half_sent_on(&mut connection, address).await);
    }
    let (refused, index, mut others) =
        within(futures_util::future::select_all(streams.iter_mut().map(|stream| &mut stream.response))).await;
    let refused = refused.expect("a response");
    assert_eq!(refused.headers().get("grpc-status").expect("a trailers-only status"), "8", "{refused:?}");
    let message = refused.headers().get("grpc-message").expect("a message");
    assert!(message.to_str().expect("ASCII").contains("the%20most%20one%20client%20may"), "{message:?}");
    for other in &mut others {
        assert!(still_waits(other).await, "a request within its share was answered without a place");
    }
    drop(others);

    // The connection's two others hold a place and wait for one: a reset frees both.
    streams.remove(index);
    drop(streams);
    let mut other = raw(address).await;
    assert_eq!(within(other.get(missing())).await.expect_err("not found").code(), Code::NotFound);
}

/// A request holds its place while it arrives, not while the state answers:
/// a `TeardownAndDestroy` waiting for finalizers, longer than the request
/// timeout, is neither cut short nor in the way of other requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_holds_no_place_and_outlives_the_request_timeout() {
    let timeout = Duration::from_millis(300);
    let limits = Limits { max_requests_in_flight: 1, request_timeout: timeout, ..Limits::default() };
    let address = start(Server::new(MemoryState::default()).limits(limits)).await;
    let client = client(address).await;
    let pointer = Pointer::new(NS, PathResource::TYPE, "finalized");
    within(client.create(Typed::new_in(NS, "finalized", PathResource::default()), CreateOptions::default()))
        .await
        .expect("create");
    within(client.add_finalizers_dynamic(&pointer, &["held"])).await.expect("a finalizer");

    let waiting = {
        let (client, pointer) = (client.clone(), pointer.clone());
        tokio::spawn(async move { client.teardown_and_destroy_dynamic(&pointer, Default::default()).await })
    };
    // Several timeouts long, while the one place serves others.
    for _ in 0..3 {
        tokio::time::sleep(timeout).await;
        let listed = within(client.list_dynamic(&Kind::new(NS, PathResource::TYPE), &ListOptions::default())).await;
        assert_eq!(listed.expect("served while the teardown waits").len(), 1);
    }
    assert!(!waiting.is_finished(), "the teardown ended before its finalizer went");
    within(client.remove_finalizers_dynamic(&pointer, &["held"])).await.expect("the finalizer goes");
    within(waiting).await.expect("no panic").expect("destroyed, not cancelled");
    let gone = within(client.get_dynamic(&pointer)).await.expect_err("destroyed");
    assert!(gone.is_not_found(), "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_never_finished_is_cancelled_after_the_timeout_and_watches_go_on() {
    let timeout = Duration::from_millis(300);
    let address =
        start(Server::new(MemoryState::default()).limits(Limits { request_timeout: timeout, ..Limits::default() }))
            .await;
    let well_behaved = client(address).await;
    let kind = Kind::new(NS, PathResource::TYPE);
    let mut watch = within(well_behaved.watch_kind_dynamic(&kind, WatchKindOptions::default())).await.expect("a watch");

    let half = half_sent(address).await;
    let response = within(half.response).await.expect("a response, not a hang");
    let status = response.headers().get("grpc-status").expect("a trailers-only status");
    assert_eq!(status, "1", "CANCELLED: {:?}", response.headers());

    // The watch outlived the timeout several times over and still streams.
    tokio::time::sleep(3 * timeout).await;
    within(well_behaved.create(Typed::new_in(NS, "late", PathResource::default()), CreateOptions::default()))
        .await
        .expect("create");
    let event = within(watch.recv()).await.expect("the watch is still open");
    assert!(matches!(event, Event::Created { ref resource, .. } if resource.id() == "late"), "{event:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_cap_waits_until_another_closes() {
    let address =
        start(Server::new(MemoryState::default()).limits(Limits { max_connections: 2, ..Limits::default() })).await;
    let mut first = raw(address).await;
    let mut second = raw(address).await;
    for connection in [&mut first, &mut second] {
        assert_eq!(within(connection.get(missing())).await.expect_err("not found").code(), Code::NotFound);
    }

    let mut third = Box::pin(async move {
        let mut third =
            StateClient::new(Channel::from_shared(format!("http://{address}")).expect("uri").connect_lazy());
        third.get(missing()).await
    });
    assert!(still_waits(&mut third).await, "a third connection was served while two were open");
    drop(first);
    assert_eq!(within(third).await.expect_err("not found").code(), Code::NotFound);
}

/// Connections from one address past its share are closed at once, before a
/// byte, and all of 127.0.0.0/8 (loopback on Linux, every address of it
/// open to any local user) is one address.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_an_address_share_are_closed_and_loopback_is_one_address() {
    use tokio::io::AsyncReadExt as _;

    let limits = Limits { max_connections_per_address: 2, ..Limits::default() };
    let address = start(Server::new(MemoryState::default()).limits(limits)).await;
    let from = move |local: &'static str| async move {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.bind(local.parse().expect("a local address")).expect("bind");
        socket.connect(address).await.expect("connect")
    };
    // A served connection starts with the server's HTTP/2 settings.
    let served = |mut tcp: tokio::net::TcpStream| async move {
        let mut first = [0_u8; 9];
        within(tcp.read_exact(&mut first)).await.expect("the server's first frame");
        assert_eq!(first[3], 0x4, "a SETTINGS frame: {first:?}");
        tcp
    };
    let first = served(from("127.0.0.1:0").await).await;
    let _second = served(from("127.0.0.1:0").await).await;

    let mut byte = [0_u8; 1];
    for local in ["127.0.0.1:0", "127.0.0.2:0", "127.255.0.1:0"] {
        let mut third = from(local).await;
        let read = within(third.read(&mut byte)).await;
        assert!(matches!(read, Ok(0) | Err(_)), "a third from 127/8 ({local}) is closed, got {read:?}");
    }

    drop(first);
    // The server notices the close when it reads next; until then it counts it.
    let again = within(async {
        loop {
            let mut tcp = from("127.0.0.3:0").await;
            if tcp.read(&mut byte).await.is_ok_and(|read| read > 0) {
                break tcp;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    drop(again);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_connections_with_a_stream_open_are_not() {
    use tokio::io::AsyncReadExt as _;

    let idle = Duration::from_millis(200);
    let address =
        start(Server::new(MemoryState::default()).limits(Limits { idle_timeout: idle, ..Limits::default() })).await;

    // A connection that opens no stream is closed: after the server's
    // settings, the end of the stream.
    let mut silent = tokio::net::TcpStream::connect(address).await.expect("connect");
    let mut received = Vec::new();
    // The read ends (within 30 s): the server closed the connection.
    let _closed = within(silent.read_to_end(&mut received)).await;
    assert_eq!(received.get(3), Some(&0x4), "a SETTINGS frame first: {received:?}");

    // A watch is a stream: its connection stays open however long nothing happens.
    let watcher = client(address).await;
    let kind = Kind::new(NS, PathResource::TYPE);
    let mut watch = within(watcher.watch_kind_dynamic(&kind, WatchKindOptions::default())).await.expect("watch");
    tokio::time::sleep(5 * idle).await;
    let writer = client(address).await;
    within(writer.create(Typed::new_in(NS, "after", PathResource::default()), CreateOptions::default()))
        .await
        .expect("create");
    let event = within(watch.recv()).await.expect("the watch is still open");
    assert!(matches!(event, Event::Created { ref resource, .. } if resource.id() == "after"), "{event:?}");

    // A client whose connection was closed while idle connects again on its next call.
    tokio::time::sleep(5 * idle).await;
    within(writer.list_dynamic(&kind, &ListOptions::default())).await.expect("served on a new connection");
}
