//! [`Client`]: a remote `cosi.resource.State` as a [`State`].
//!
//! Invariants:
//! - Every error comes back as the `cosi::Error` the server's state returned
//!   (see `status.rs`), so controllers cannot tell a remote state from a local one.
//! - A watch call returns once the server has set the watch up (its empty
//!   "ready" message), so set-up errors are the call's error.
//! - Watches pull from the gRPC stream: nothing is buffered beyond HTTP/2's
//!   flow-control window, so a slow watcher falls behind on the server and
//!   learns it from a buffer overrun, as in process.
//! - A watch whose stream breaks resumes from the last bookmark it delivered,
//!   with exponential backoff; when it cannot (no bookmark yet, the bookmark is
//!   no longer valid, the server refuses it, a response is over the client's
//!   limit, retries exhausted) the watcher gets exactly one `Event::Errored`
//!   and the watch ends. The backoff, and the time spent retrying that
//!   `max_elapsed` bounds, start over only once a resumed stream delivers a
//!   message beyond "ready": a watch that breaks again right after each
//!   resume gives up, and an idle one that breaks now and then does not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cosi::backoff::{Backoff, BackoffOptions};
use cosi::resource::{DynamicResource, Kind, Phase, Pointer, Version};
use cosi::state::{
    CreateOptions, DestroyOptions, Error, Event, ListOptions, Primitives, Result, State, TeardownOptions,
    UpdateOptions, Watch, WatchKindOptions, WatchOptions,
};
use hyper_util::rt::TokioIo;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic::{Code, Status, Streaming};

use crate::convert;
use crate::endpoint::Endpoint;
use crate::limits::DEFAULT_CLIENT_MAX_MESSAGE_SIZE;
use crate::proto;
use crate::proto::state_client::StateClient;
use crate::status::{CallContext, RemoteError, Rpc, from_status};

/// The API version this client speaks in watches: Bootstrapped and Errored events included.
const WATCH_API_VERSION: i32 = 1;

/// The client's half of mutual TLS, in PEM.
#[derive(Clone, Debug)]
pub struct ClientTls {
    /// The CA that signed the server's certificate.
    pub server_ca: String,
    /// The client's certificate, whose Organization names its role.
    pub certificate: String,
    /// The client's private key.
    pub key: String,
    /// The name the server's certificate must carry.
    pub server_name: String,
}

/// How a client reaches its server.
#[derive(Clone, Debug)]
pub enum ClientSecurity {
    /// Mutual TLS (TCP only).
    MutualTls(ClientTls),
    /// No transport security: Unix sockets and loopback servers started with `--insecure`.
    Insecure,
}

/// How a broken watch is resumed.
#[derive(Clone, Debug)]
pub struct RetryOptions {
    /// Resume broken watches at all.
    pub enabled: bool,
    /// The first delay (Go COSI: 500 ms); each next one is 1.5 times longer, ±50 % at random
    /// (a [`cosi::backoff::Backoff`]).
    pub initial_delay: Duration,
    /// The longest delay, jitter included (Go COSI: 60 s).
    pub max_delay: Duration,
    /// Give up once this long has gone into retrying (waiting and reconnecting)
    /// since the watch last delivered a message (Go COSI: 15 min). A resume
    /// answered only by "ready" is no success: a watch whose stream breaks
    /// again right after each resume gives up too.
    pub max_elapsed: Duration,
}

impl Default for RetryOptions {
    fn default() -> Self {
        RetryOptions {
            enabled: true,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(15 * 60),
        }
    }
}

impl RetryOptions {
    /// The backoff between attempts: Go COSI's, 1.5 times longer each time, ±50 %.
    fn backoff(&self) -> Backoff {
        Backoff::new(BackoffOptions { initial: self.initial_delay, multiplier: 1.5, jitter: 0.5, max: self.max_delay })
    }
}

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to {endpoint}: {source}")]
pub struct ConnectError {
    endpoint: Endpoint,
    source: tonic::transport::Error,
}

/// As a [`cosi::Error::Other`], for `?` in a
/// function returning `cosi::Result`.
impl From<ConnectError> for cosi::Error {
    fn from(error: ConnectError) -> Self {
        cosi::Error::other(error)
    }
}

/// A [`State`] served by a remote `cosi.resource.State` server, Rust or Go.
///
/// Cloning is cheap and shares the connection.
#[derive(Clone, Debug)]
pub struct Client {
    inner: StateClient<Channel>,
    /// The largest response accepted, which a watch's error names.
    max_message_size: usize,
    retry: RetryOptions,
    /// Set once the server answered `UNIMPLEMENTED` to Teardown: Go servers before the RPC existed.
    no_teardown_rpc: Arc<AtomicBool>,
}

impl Client {
    /// Connects to `endpoint`.
    pub async fn connect(endpoint: &Endpoint, security: ClientSecurity) -> Result<Self, ConnectError> {
        let error = |source| ConnectError { endpoint: endpoint.clone(), source };
        let channel = match (endpoint, security) {
            (Endpoint::Unix(path), _) => {
                let path = path.clone();
                // The URI is required by the API but unused: the connector dials the socket.
                tonic::transport::Endpoint::from_static("http://localhost")
                    .connect_with_connector(tower::service_fn(move |_| {
                        let path = path.clone();
                        async move { tokio::net::UnixStream::connect(path).await.map(TokioIo::new) }
                    }))
                    .await
                    .map_err(error)?
            }
            (Endpoint::Tcp(addr), ClientSecurity::Insecure) => {
                tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                    .map_err(error)?
                    .connect()
                    .await
                    .map_err(error)?
            }
            (Endpoint::Tcp(addr), ClientSecurity::MutualTls(tls)) => {
                let config = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(tls.server_ca))
                    .identity(Identity::from_pem(tls.certificate, tls.key))
                    .domain_name(tls.server_name);
                tonic::transport::Endpoint::from_shared(format!("https://{addr}"))
                    .map_err(error)?
                    .tls_config(config)
                    .map_err(error)?
                    .connect()
                    .await
                    .map_err(error)?
            }
        };
        Ok(Client::from_channel(channel))
    }

    /// A client over a channel built by the caller.
    pub fn from_channel(channel: Channel) -> Self {
        Client {
            inner: StateClient::new(channel)
                .max_decoding_message_size(DEFAULT_CLIENT_MAX_MESSAGE_SIZE)
                .max_encoding_message_size(usize::MAX),
            max_message_size: DEFAULT_CLIENT_MAX_MESSAGE_SIZE,
            retry: RetryOptions::default(),
            no_teardown_rpc: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Limits each response the client accepts to `bytes` (default
    /// [`DEFAULT_CLIENT_MAX_MESSAGE_SIZE`], the largest a server with default
    /// [`Limits`](crate::Limits) sends): a server cannot make the client
    /// allocate more for one message. A larger response fails its call with
    /// `OUT_OF_RANGE`, and ends a watch with an `Errored` event.
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.inner = self.inner.max_decoding_message_size(bytes);
        self.max_message_size = bytes;
        self
    }

    /// Sets how broken watches are resumed.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryOptions) -> Self {
        self.retry = retry;
        self
    }

    fn client(&self) -> StateClient<Channel> {
        self.inner.clone()
    }
}

fn context(rpc: Rpc, pointer: &Pointer) -> CallContext<'_> {
    CallContext { rpc, pointer, version: Version::UNDEFINED, expected_phase: None }
}

fn decode(resource: Option<proto::Resource>) -> Result<DynamicResource> {
    convert::resource_from_proto(resource, "resource from the server")
}

#[async_trait]
impl State for Client {
    async fn get_dynamic(&self, pointer: &Pointer) -> Result<DynamicResource> {
        let request = proto::GetRequest {
            namespace: pointer.namespace().to_owned(),
            r#type: pointer.r#type().to_owned(),
            id: pointer.id().to_owned(),
            options: Some(proto::GetOptions {}),
        };
        let response =
            self.client().get(request).await.map_err(|status| from_status(&status, &context(Rpc::Get, pointer)))?;
        decode(response.into_inner().resource)
    }

    async fn list_dynamic(&self, kind: &Kind, options: &ListOptions) -> Result<Vec<DynamicResource>> {
        let request = proto::ListRequest {
            namespace: kind.namespace().to_owned(),
            r#type: kind.r#type().to_owned(),
            options: Some(proto::ListOptions {
                label_query: convert::label_queries_to_proto(&options.labels),
                id_query: convert::id_query_to_proto(options.id.as_ref()),
            }),
        };
        let pointer = kind.pointer("");
        let error = |status: Status| from_status(&status, &context(Rpc::List, &pointer));
        let mut stream = self.client().list(request).await.map_err(error)?.into_inner();
        let mut items = Vec::new();
        while let Some(response) = stream.message().await.map_err(error)? {
            items.push(decode(response.resource)?);
        }
        Ok(items)
    }

    async fn create_dynamic(&self, resource: DynamicResource, options: CreateOptions) -> Result<DynamicResource> {
        let pointer = resource.metadata().pointer().clone();
        let request = proto::CreateRequest {
            resource: Some(convert::resource_to_proto(&resource)?),
            options: Some(proto::CreateOptions { owner: options.owner.unwrap_or_default() }),
        };
        let response = self
            .client()
            .create(request)
            .await
            .map_err(|status| from_status(&status, &context(Rpc::Create, &pointer)))?;
        decode(response.into_inner().resource)
    }

    async fn update_dynamic(&self, resource: DynamicResource, options: UpdateOptions) -> Result<DynamicResource> {
        let pointer = resource.metadata().pointer().clone();
        let version = resource.metadata().version();
        let request = proto::UpdateRequest {
            new_resource: Some(convert::resource_to_proto(&resource)?),
            options: Some(proto::UpdateOptions {
                owner: options.owner.unwrap_or_default(),
                expected_phase: options.expected_phase.map(|phase: Phase| phase.to_string()),
            }),
        };
        let context =
            CallContext { rpc: Rpc::Update, pointer: &pointer, version, expected_phase: options.expected_phase };
        let response = self.client().update(request).await.map_err(|status| from_status(&status, &context))?;
        decode(response.into_inner().resource)
    }

    async fn destroy_dynamic(&self, pointer: &Pointer, options: DestroyOptions) -> Result<()> {
        let request = proto::DestroyRequest {
            namespace: pointer.namespace().to_owned(),
            r#type: pointer.r#type().to_owned(),
            id: pointer.id().to_owned(),
            options: Some(proto::DestroyOptions { owner: options.owner.unwrap_or_default() }),
        };
        self.client().destroy(request).await.map_err(|status| from_status(&status, &context(Rpc::Destroy, pointer)))?;
        Ok(())
    }

    async fn watch_dynamic(&self, pointer: &Pointer, options: WatchOptions) -> Result<Watch> {
        let request = proto::WatchRequest {
            namespace: pointer.namespace().to_owned(),
            r#type: pointer.r#type().to_owned(),
            id: Some(pointer.id().to_owned()),
            options: Some(proto::WatchOptions {
                tail_events: i32::try_from(options.tail_events).unwrap_or(i32::MAX),
                start_from_bookmark: options.start_from.map(|bookmark| bookmark.as_bytes().to_vec()),
                ..proto::WatchOptions::default()
            }),
            api_version: WATCH_API_VERSION,
        };
        self.start_watch(request, pointer).await
    }

    async fn watch_kind_dynamic(&self, kind: &Kind, options: WatchKindOptions) -> Result<Watch> {
        let request = proto::WatchRequest {
            namespace: kind.namespace().to_owned(),
            r#type: kind.r#type().to_owned(),
            id: None,
            options: Some(proto::WatchOptions {
                bootstrap_contents: options.bootstrap_contents,
                tail_events: i32::try_from(options.tail_events).unwrap_or(i32::MAX),
                label_query: convert::label_queries_to_proto(&options.labels),
                id_query: convert::id_query_to_proto(options.id.as_ref()),
                aggregated: true,
                start_from_bookmark: options.start_from.map(|bookmark| bookmark.as_bytes().to_vec()),
                bootstrap_bookmark: options.bootstrap_bookmark,
            }),
            api_version: WATCH_API_VERSION,
        };
        self.start_watch(request, &kind.pointer("")).await
    }

    async fn teardown_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<bool> {
        if self.no_teardown_rpc.load(Ordering::Relaxed) {
            // The default teardown, written against Get, Update and Watch.
            return Primitives(self.clone()).teardown_dynamic(pointer, options).await;
        }
        let request = proto::TeardownRequest {
            namespace: pointer.namespace().to_owned(),
            r#type: pointer.r#type().to_owned(),
            id: pointer.id().to_owned(),
            options: Some(proto::TeardownOptions { owner: options.owner.clone().unwrap_or_default() }),
        };
        match self.client().teardown(request).await {
            Ok(response) => Ok(response.into_inner().destroy_ready),
            Err(status) if status.code() == Code::Unimplemented => {
                self.no_teardown_rpc.store(true, Ordering::Relaxed);
                Primitives(self.clone()).teardown_dynamic(pointer, options).await
            }
            Err(status) => Err(from_status(&status, &context(Rpc::Teardown, pointer))),
        }
    }

    async fn teardown_and_destroy_dynamic(&self, pointer: &Pointer, options: TeardownOptions) -> Result<()> {
        if self.no_teardown_rpc.load(Ordering::Relaxed) {
            return Primitives(self.clone()).teardown_and_destroy_dynamic(pointer, options).await;
        }
        let request = proto::TeardownAndDestroyRequest {
            namespace: pointer.namespace().to_owned(),
            r#type: pointer.r#type().to_owned(),
            id: pointer.id().to_owned(),
            options: Some(proto::TeardownAndDestroyOptions { owner: options.owner.clone().unwrap_or_default() }),
        };
        match self.client().teardown_and_destroy(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::Unimplemented => {
                self.no_teardown_rpc.store(true, Ordering::Relaxed);
                Primitives(self.clone()).teardown_and_destroy_dynamic(pointer, options).await
            }
            Err(status) => Err(from_status(&status, &context(Rpc::TeardownAndDestroy, pointer))),
        }
    }
}

impl Client {
    /// Issues the watch and waits for the server's "ready" message.
    async fn start_watch(&self, request: proto::WatchRequest, pointer: &Pointer) -> Result<Watch> {
        let stream = open_watch(&mut self.client(), request.clone())
            .await
            .map_err(|status| from_status(&status, &context(Rpc::Watch, pointer)))?;
        let remote = RemoteWatch {
            client: self.client(),
            kind: pointer.kind(),
            request,
            stream,
            last_bookmark: None,
            max_message_size: self.max_message_size,
            retry: self.retry.clone(),
            retrying: None,
            ended: false,
        };
        Ok(Watch::from_batches(futures_util::stream::unfold(remote, |mut remote| async move {
            remote.next_batch().await.map(|batch| (batch, remote))
        })))
    }
}

/// Opens a watch stream and reads its "ready" message.
async fn open_watch(
    client: &mut StateClient<Channel>,
    request: proto::WatchRequest,
) -> Result<Streaming<proto::WatchResponse>, Status> {
    let mut stream = client.watch(request).await?.into_inner();
    match stream.message().await? {
        Some(_) => Ok(stream),
        None => Err(Status::unavailable("the server closed the watch before it was ready")),
    }
}

/// One remote watch: the stream, and what it takes to resume it.
struct RemoteWatch {
    client: StateClient<Channel>,
    kind: Kind,
    request: proto::WatchRequest,
    stream: Streaming<proto::WatchResponse>,
    /// The bookmark of the last event delivered; `None` (no event yet, or an
    /// event without one) means the watch cannot be resumed.
    last_bookmark: Option<Vec<u8>>,
    max_message_size: usize,
    retry: RetryOptions,
    /// The backoff of the resumes since the stream last delivered a message
    /// beyond "ready", and the time spent in them (waiting and reconnecting,
    /// not while a resumed stream was open).
    retrying: Option<(Backoff, Duration)>,
    ended: bool,
}

impl RemoteWatch {
    async fn next_batch(&mut self) -> Option<Vec<Event>> {
        if self.ended {
            return None;
        }
        loop {
            let broken = match self.stream.message().await {
                Ok(Some(response)) => {
                    // The stream works again: a later break starts a new backoff.
                    self.retrying = None;
                    match self.decode(response) {
                        Ok(batch) if batch.is_empty() => continue,
                        Ok(batch) => return Some(batch),
                        Err(error) => return Some(self.fail(error)),
                    }
                }
                Ok(None) => Status::unavailable("the server ended the watch"),
                Err(status) => match final_error(&status, &self.kind, self.max_message_size) {
                    Some(error) => return Some(self.fail(error)),
                    None => status,
                },
            };
            if let Err(error) = self.resume(broken).await {
                return Some(self.fail(error));
            }
        }
    }

    fn decode(&mut self, response: proto::WatchResponse) -> Result<Vec<Event>> {
        let mut batch = Vec::with_capacity(response.event.len());
        for event in response.event {
            self.last_bookmark.clone_from(&event.bookmark);
            let event = convert::event_from_proto(event, &self.kind)?;
            if matches!(event, Event::Errored { .. }) {
                // The server's watch has ended: deliver the error, then stop.
                self.ended = true;
                batch.push(event);
                break;
            }
            batch.push(event);
        }
        Ok(batch)
    }

    fn fail(&mut self, error: Error) -> Vec<Event> {
        self.ended = true;
        vec![Event::Errored { error }]
    }

    /// Re-issues the watch from the last bookmark, with the backoff of the
    /// resumes since the stream last delivered a message beyond "ready".
    async fn resume(&mut self, broken: Status) -> Result<()> {
        let cause = |status: &Status| Error::backend(RemoteError::Transport(format!("the watch broke: {status}")));
        let Some(bookmark) = self.last_bookmark.clone().filter(|_| self.retry.enabled) else {
            return Err(cause(&broken));
        };
        if let Some(options) = self.request.options.as_mut() {
            options.bootstrap_contents = false;
            options.bootstrap_bookmark = false;
            options.tail_events = 0;
            options.start_from_bookmark = Some(bookmark);
        }
        // tokio's clock, like the delays: a paused or simulated clock moves both.
        let began = tokio::time::Instant::now();
        let (backoff, spent) = self.retrying.get_or_insert_with(|| (self.retry.backoff(), Duration::ZERO));
        let mut last = broken;
        loop {
            if *spent + began.elapsed() >= self.retry.max_elapsed {
                return Err(Error::backend(RemoteError::Transport(format!("maximum retry attempts: {last}"))));
            }
            tokio::time::sleep(backoff.next_delay()).await;
            match open_watch(&mut self.client, self.request.clone()).await {
                Ok(stream) => {
                    self.stream = stream;
                    *spent += began.elapsed();
                    return Ok(());
                }
                Err(status) if status.code() == Code::FailedPrecondition => {
                    let pointer = self.kind.pointer("");
                    return Err(from_status(&status, &context(Rpc::Watch, &pointer)));
                }
                Err(status) => match final_error(&status, &self.kind, self.max_message_size) {
                    Some(error) => return Err(error),
                    None => last = status,
                },
            }
        }
    }
}

/// The error that ends a watch of `kind` for good on `status`, when retrying
/// would only get the same answer: a refusal, or a response over a size limit
/// (`OUT_OF_RANGE`: tonic's, over the client's `max_message_size` bytes, or
/// the server's, over what it may send), which resuming would fetch again.
fn final_error(status: &Status, kind: &Kind, max_message_size: usize) -> Option<Error> {
    match status.code() {
        Code::OutOfRange => Some(Error::backend(RemoteError::Status {
            code: Code::OutOfRange,
            message: format!(
                "a watch response is over a message size limit (this client's is {max_message_size} \
                 bytes, which Client::max_message_size raises; the server has its own): {}",
                status.message()
            ),
        })),
        _ if is_refusal(status) => Some(from_status(status, &context(Rpc::Watch, &kind.pointer("")))),
        _ => None,
    }
}

/// Whether the server refused the watch, rather than lost it: retrying would
/// get the same answer (a revoked read permission, a bad request).
fn is_refusal(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::PermissionDenied | Code::Unauthenticated | Code::InvalidArgument | Code::Unimplemented
    )
}
