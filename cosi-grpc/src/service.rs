//! [`StateService`]: any [`State`] as the `cosi.resource.State` gRPC service.
//!
//! Invariants:
//! - Every RPC behaves as Go COSI's server does: same status codes (see
//!   `status.rs`), Teardown and TeardownAndDestroy run next to the state, a
//!   watch is set up before the empty "ready" message is sent, and set-up errors
//!   are the call's status.
//! - Watch streams pull from the state's [`Watch`](cosi::state::Watch): the
//!   server never buffers events of its own, so a client that stops reading
//!   makes its watch fall behind and end with a buffer overrun, as in process.
//! - Bad input is a status, never a panic; one bad call does not affect others.
//! - Roles are checked before the state is touched (see `auth.rs`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use cosi::resource::{DynamicResource, Kind, Pointer, Resource as _, ResourceDefinition, Sensitivity};
use cosi::state::{
    Bookmark, CreateOptions, DestroyOptions, Error, ListOptions, META_NAMESPACE, State, TeardownOptions, UpdateOptions,
    WatchKindOptions, WatchOptions,
};
use futures_core::Stream;
use futures_util::StreamExt;
use parking_lot::Mutex;
use prost::Message as _;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::auth::{Authenticator, Role};
use crate::convert::{self, QueryError};
use crate::limits::{Limits, WATCH_RESPONSE_TARGET, WatchCounter, max_response_size};
use crate::proto;
use crate::status::{Rpc, denied, to_status};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A [`State`] served as `cosi.resource.State`.
///
/// Most programs use [`Server`](crate::Server), which adds listening and
/// security; this is the service alone, for mounting next to others on a
/// tonic router (every caller then has the admin role).
#[derive(Clone)]
pub struct StateService {
    state: Arc<dyn State>,
    authenticator: Authenticator,
    shutdown: watch::Receiver<bool>,
    limits: Limits,
    watches: Arc<WatchCounter>,
    /// What each stored definition says: decoding an encoded definition is
    /// far dearer than listing, and readers check on every call.
    definitions: Arc<Mutex<DefinitionCache>>,
}

/// Stored definitions by ID, each with the type and sensitivity it names
/// (`None`: it does not decode). An entry holds the stored resource it was
/// read from and answers only for that one: a definition that is replaced,
/// or destroyed and created again, is another resource and is read again.
type DefinitionCache = HashMap<String, (DynamicResource, Option<(String, Sensitivity)>)>;

impl StateService {
    /// Serves `state` with default [`Limits`]; every caller has the admin role.
    pub fn new(state: Arc<dyn State>) -> Self {
        // The sender is dropped: `shutdown` never fires for a bare service.
        let (_, shutdown) = watch::channel(false);
        StateService::with_security(state, Authenticator::Trusted, shutdown, Limits::default())
    }

    pub(crate) fn with_security(
        state: Arc<dyn State>,
        authenticator: Authenticator,
        shutdown: watch::Receiver<bool>,
        limits: Limits,
    ) -> Self {
        let watches = WatchCounter::new(&limits);
        StateService { state, authenticator, shutdown, limits, watches, definitions: Arc::default() }
    }

    /// The generated tonic server around this service: requests are limited
    /// to `max_message_size`, responses to [`max_response_size`] of it.
    pub fn into_server(self, max_message_size: usize) -> proto::state_server::StateServer<Self> {
        proto::state_server::StateServer::new(self)
            .max_decoding_message_size(max_message_size)
            .max_encoding_message_size(max_response_size(max_message_size))
    }

    fn role<T>(&self, request: &Request<T>) -> Result<Role, Status> {
        self.authenticator
            .role(request.peer_certs())
            .ok_or_else(|| denied("the client certificate grants no COSI role".to_owned()))
    }

    fn check_write(role: Role) -> Result<(), Status> {
        match role.can_write() {
            true => Ok(()),
            false => Err(denied(format!("the role {} cannot write", crate::auth::READER_ROLE))),
        }
    }

    /// Refuses a reader access to a type unless a definition of that type
    /// says it is not sensitive: filtering fails closed (see [`Self::readable`]).
    async fn check_read(&self, role: Role, r#type: &str) -> Result<(), Status> {
        if role != Role::Reader {
            return Ok(());
        }
        match self.readable(r#type).await? {
            Readable::Yes => Ok(()),
            Readable::Sensitive => Err(denied(format!(
                "resources of type {type} are sensitive: the role {} cannot read them",
                crate::auth::READER_ROLE
            ))),
            Readable::Unknown => Err(denied(format!(
                "no readable definition of type {type}: the role {} reads only types defined as not sensitive",
                crate::auth::READER_ROLE
            ))),
        }
    }

    /// Whether a reader may read `type`, from the definitions whose spec names
    /// that type, whatever their ID (Go names them by the lowercased type, but
    /// nothing enforces it). Sensitive if any of them says so; unknown when
    /// none decodes, or when the one under the conventional ID does not (it
    /// might say sensitive). Readers are rare and definitions few, so every
    /// check reads them all rather than trusting a cache to stay current.
    async fn readable(&self, r#type: &str) -> Result<Readable, Status> {
        let kind = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
        let definitions =
            self.state.list_dynamic(&kind, &ListOptions::default()).await.map_err(|err| to_status(&err, Rpc::List))?;
        let conventional_id = r#type.to_lowercase();
        let mut found = false;
        let mut unknown = false;
        let mut sensitive = false;
        let mut cache = self.definitions.lock();
        let mut current = HashMap::with_capacity(definitions.len());
        for stored in &definitions {
            // What was read from this very stored resource before, if anything.
            let said = match cache.remove(stored.id()) {
                Some((cached, said)) if DynamicResource::ptr_eq(&cached, stored) => said,
                _ => convert::definition_from_spec(stored.spec())
                    .map(|definition| (definition.r#type, definition.sensitivity)),
            };
            match &said {
                Some((defined, sensitivity)) if defined == r#type => match sensitivity {
                    Sensitivity::Sensitive => sensitive = true,
                    Sensitivity::NonSensitive => found = true,
                },
                Some(_) => (),
                None if stored.id() == conventional_id => unknown = true,
                None => (),
            }
            current.insert(stored.id().to_owned(), (stored.clone(), said));
        }
        // Only the definitions that exist now stay cached.
        *cache = current;
        Ok(match (sensitive, unknown, found) {
            (true, _, _) => Readable::Sensitive,
            (false, false, true) => Readable::Yes,
            _ => Readable::Unknown,
        })
    }
}

impl StateService {
    /// A future that completes when `type` stops being readable for a reader
    /// (a definition of it changed to sensitive, was removed or no longer
    /// decodes), or when that can no longer be told (the definitions' watch
    /// ended): filtering fails closed for the life of a watch, not only at its start.
    async fn revocation(
        &self,
        r#type: String,
    ) -> Result<Pin<Box<dyn std::future::Future<Output = ()> + Send>>, Status> {
        let kind = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
        let mut definitions = self
            .state
            .watch_kind_dynamic(&kind, WatchKindOptions::default())
            .await
            .map_err(|err| to_status(&err, Rpc::Watch))?;
        let service = self.clone();
        Ok(Box::pin(async move {
            while definitions.recv_batch().await.is_some() {
                if !matches!(service.readable(&r#type).await, Ok(Readable::Yes)) {
                    return;
                }
            }
        }))
    }
}

/// A reader's watch stream: the watch's responses until `revoked` completes,
/// then one refusal, then the end.
struct RevocableStream {
    watched: BoxStream<proto::WatchResponse>,
    revoked: Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    refusal: Option<Status>,
    done: bool,
}

impl Stream for RevocableStream {
    type Item = Result<proto::WatchResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if self.done {
            return Poll::Ready(None);
        }
        if self.revoked.as_mut().poll(cx).is_ready() {
            self.done = true;
            return Poll::Ready(self.refusal.take().map(Err));
        }
        self.watched.as_mut().poll_next(cx)
    }
}

/// What the definitions say about a type, for a reader.
enum Readable {
    Yes,
    Sensitive,
    Unknown,
}

/// How large watch responses should and may be.
#[derive(Clone, Copy)]
struct ResponseSizes {
    /// Responses are cut before they grow past this.
    target: usize,
    /// No response may be larger: the encoding limit.
    max: usize,
}

/// One batch of events as responses of about `sizes.target` bytes each, in
/// order, so that a batch of any size fits the message limit (a kind's
/// bootstrap is one batch). A single event is never cut: one larger than the
/// target goes alone, and one larger than `sizes.max` ends the watch with an
/// error (an `Errored` event for clients that know it, a status otherwise).
/// A batch with nothing an old client can see yields no response, since an
/// empty response means "ready". The flag tells whether the watch ends there.
fn split_batch(
    events: &[cosi::state::Event],
    api_version: i32,
    sizes: ResponseSizes,
) -> (Vec<Result<proto::WatchResponse, Status>>, bool) {
    let mut responses = Vec::new();
    let mut current = Vec::new();
    let mut size = 0usize;
    for event in events {
        let event = match convert::event_to_proto(event, api_version) {
            Ok(Some(event)) => event,
            Ok(None) => continue,
            Err(err) => {
                responses.push(Err(encode_status(&err)));
                return (responses, true);
            }
        };
        // The event's bytes plus its field tag and length prefix.
        let len = event.encoded_len() + 1 + prost::length_delimiter_len(event.encoded_len());
        if len > sizes.max {
            if !current.is_empty() {
                responses.push(Ok(proto::WatchResponse { event: std::mem::take(&mut current) }));
            }
            let message = format!(
                "an event of {len} bytes is over the {} bytes a watch response may hold; the watch ends",
                sizes.max
            );
            responses.push(match api_version {
                0 => Err(Status::out_of_range(message)),
                _ => Ok(proto::WatchResponse {
                    event: vec![proto::Event {
                        event_type: proto::EventType::Errored.into(),
                        error: Some(message),
                        ..proto::Event::default()
                    }],
                }),
            });
            return (responses, true);
        }
        if !current.is_empty() && size + len > sizes.target {
            responses.push(Ok(proto::WatchResponse { event: std::mem::take(&mut current) }));
            size = 0;
        }
        size += len;
        current.push(event);
    }
    if !current.is_empty() {
        responses.push(Ok(proto::WatchResponse { event: current }));
    }
    (responses, false)
}

fn owner(owner: String) -> Option<String> {
    (!owner.is_empty()).then_some(owner)
}

fn query_status(err: QueryError) -> Status {
    match err {
        QueryError::UnknownOperator(op) => Status::unimplemented(format!("unsupported label query operator: {op}")),
        QueryError::Invalid(err) => to_status(&err, Rpc::List),
    }
}

fn encode_status(err: &Error) -> Status {
    Status::internal(format!("cannot encode a resource: {err}"))
}

#[tonic::async_trait]
impl proto::state_server::State for StateService {
    async fn get(&self, request: Request<proto::GetRequest>) -> Result<Response<proto::GetResponse>, Status> {
        let role = self.role(&request)?;
        let request = request.into_inner();
        self.check_read(role, &request.r#type).await?;
        let pointer = Pointer::new(&request.namespace, &request.r#type, &request.id);
        let resource = self.state.get_dynamic(&pointer).await.map_err(|err| to_status(&err, Rpc::Get))?;
        let resource = convert::resource_to_proto(&resource).map_err(|err| encode_status(&err))?;
        Ok(Response::new(proto::GetResponse { resource: Some(resource) }))
    }

    type ListStream = BoxStream<proto::ListResponse>;

    async fn list(&self, request: Request<proto::ListRequest>) -> Result<Response<Self::ListStream>, Status> {
        let role = self.role(&request)?;
        let request = request.into_inner();
        self.check_read(role, &request.r#type).await?;
        let wire = request.options.unwrap_or_default();
        let options = ListOptions {
            labels: convert::label_queries_from_proto(wire.label_query).map_err(query_status)?,
            id: convert::id_query_from_proto(wire.id_query).map_err(query_status)?,
        };
        let kind = Kind::new(&request.namespace, &request.r#type);
        let items = self.state.list_dynamic(&kind, &options).await.map_err(|err| to_status(&err, Rpc::List))?;
        let responses = items.into_iter().map(|resource| {
            convert::resource_to_proto(&resource)
                .map(|resource| proto::ListResponse { resource: Some(resource) })
                .map_err(|err| encode_status(&err))
        });
        Ok(Response::new(Box::pin(futures_util::stream::iter(responses))))
    }

    async fn create(&self, request: Request<proto::CreateRequest>) -> Result<Response<proto::CreateResponse>, Status> {
        Self::check_write(self.role(&request)?)?;
        let request = request.into_inner();
        let resource =
            convert::resource_from_proto(request.resource, "resource").map_err(|err| to_status(&err, Rpc::Create))?;
        let options = CreateOptions { owner: owner(request.options.unwrap_or_default().owner) };
        let stored = self.state.create_dynamic(resource, options).await.map_err(|err| to_status(&err, Rpc::Create))?;
        let resource = convert::resource_to_proto(&stored).map_err(|err| encode_status(&err))?;
        Ok(Response::new(proto::CreateResponse { resource: Some(resource) }))
    }

    async fn update(&self, request: Request<proto::UpdateRequest>) -> Result<Response<proto::UpdateResponse>, Status> {
        Self::check_write(self.role(&request)?)?;
        let request = request.into_inner();
        let resource = convert::resource_from_proto(request.new_resource, "new resource")
            .map_err(|err| to_status(&err, Rpc::Update))?;
        let wire = request.options.unwrap_or_default();
        let expected_phase = match wire.expected_phase {
            None => None,
            Some(phase) => Some(convert::parse_phase(&phase).map_err(|err| to_status(&err, Rpc::Update))?),
        };
        let options = UpdateOptions { owner: owner(wire.owner), expected_phase };
        let stored = self.state.update_dynamic(resource, options).await.map_err(|err| to_status(&err, Rpc::Update))?;
        let resource = convert::resource_to_proto(&stored).map_err(|err| encode_status(&err))?;
        Ok(Response::new(proto::UpdateResponse { resource: Some(resource) }))
    }

    async fn destroy(
        &self,
        request: Request<proto::DestroyRequest>,
    ) -> Result<Response<proto::DestroyResponse>, Status> {
        Self::check_write(self.role(&request)?)?;
        let request = request.into_inner();
        let pointer = Pointer::new(&request.namespace, &request.r#type, &request.id);
        let options = DestroyOptions { owner: owner(request.options.unwrap_or_default().owner) };
        self.state.destroy_dynamic(&pointer, options).await.map_err(|err| to_status(&err, Rpc::Destroy))?;
        Ok(Response::new(proto::DestroyResponse {}))
    }

    type WatchStream = BoxStream<proto::WatchResponse>;

    async fn watch(&self, request: Request<proto::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let role = self.role(&request)?;
        // Counted before anything is set up; released when the stream is dropped.
        let permit = self.watches.open(request.remote_addr())?;
        let request = request.into_inner();
        let r#type = request.r#type.clone();
        // Watched before the check, so that no change of definition slips between the two.
        let revoked = match role {
            Role::Reader => Some(self.revocation(r#type.clone()).await?),
            Role::Admin => None,
        };
        self.check_read(role, &request.r#type).await?;
        let wire = request.options.unwrap_or_default();
        let tail_events = usize::try_from(wire.tail_events).unwrap_or(0);
        let start_from = wire.start_from_bookmark.map(Bookmark::from_bytes);
        let watch = match request.id {
            None => {
                let kind = Kind::new(&request.namespace, &request.r#type);
                let options = WatchKindOptions {
                    bootstrap_contents: wire.bootstrap_contents,
                    bootstrap_bookmark: wire.bootstrap_bookmark,
                    tail_events,
                    start_from,
                    labels: convert::label_queries_from_proto(wire.label_query).map_err(query_status)?,
                    id: convert::id_query_from_proto(wire.id_query).map_err(query_status)?,
                };
                self.state.watch_kind_dynamic(&kind, options).await
            }
            Some(id) => {
                if wire.bootstrap_contents {
                    return Err(Status::unimplemented("bootstrap contents is not implemented for resource watch"));
                }
                if !wire.label_query.is_empty() {
                    return Err(Status::unimplemented("label query is not implemented for resource watch"));
                }
                let pointer = Pointer::new(&request.namespace, &request.r#type, id);
                self.state.watch_dynamic(&pointer, WatchOptions { tail_events, start_from }).await
            }
        }
        .map_err(|err| to_status(&err, Rpc::Watch))?;

        let api_version = request.api_version;
        let sizes = ResponseSizes { target: WATCH_RESPONSE_TARGET, max: self.limits.max_response_size() };
        let batches: Pin<Box<dyn Stream<Item = Vec<cosi::state::Event>> + Send>> = match wire.aggregated {
            true => Box::pin(futures_util::stream::unfold(watch, |mut watch| async move {
                watch.recv_batch().await.map(|batch| (batch, watch))
            })),
            false => Box::pin(watch.map(|event| vec![event])),
        };
        // The permit lives as long as the stream: dropping it releases the watch's place.
        let events = batches
            .map(move |batch| {
                let _ = &permit;
                split_batch(&batch, api_version, sizes)
            })
            // A batch that ended the watch is the last one sent.
            .scan(false, |ended, (responses, ends)| {
                let next = (!*ended).then(|| futures_util::stream::iter(responses));
                *ended = ends;
                std::future::ready(next)
            })
            .flatten();
        let mut shutdown = self.shutdown.clone();
        let stopped = async move {
            // Fires on shutdown, or never when the sender is gone (a bare service).
            if shutdown.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let ready = futures_util::stream::once(std::future::ready(Ok(proto::WatchResponse::default())));
        let watched = ready.chain(events).take_until(stopped);
        match revoked {
            // A reader's watch lasts only as long as the type stays readable.
            Some(revoked) => {
                let refusal = denied(format!(
                    "the definition of {type} changed: the role {} can no longer read it",
                    crate::auth::READER_ROLE
                ));
                let revocable =
                    RevocableStream { watched: Box::pin(watched), revoked, refusal: Some(refusal), done: false };
                Ok(Response::new(Box::pin(revocable)))
            }
            None => Ok(Response::new(Box::pin(watched))),
        }
    }

    async fn teardown(
        &self,
        request: Request<proto::TeardownRequest>,
    ) -> Result<Response<proto::TeardownResponse>, Status> {
        Self::check_write(self.role(&request)?)?;
        let request = request.into_inner();
        let pointer = Pointer::new(&request.namespace, &request.r#type, &request.id);
        let options = TeardownOptions { owner: owner(request.options.unwrap_or_default().owner) };
        let destroy_ready =
            self.state.teardown_dynamic(&pointer, options).await.map_err(|err| to_status(&err, Rpc::Teardown))?;
        Ok(Response::new(proto::TeardownResponse { destroy_ready }))
    }

    async fn teardown_and_destroy(
        &self,
        request: Request<proto::TeardownAndDestroyRequest>,
    ) -> Result<Response<proto::TeardownAndDestroyResponse>, Status> {
        Self::check_write(self.role(&request)?)?;
        let request = request.into_inner();
        let pointer = Pointer::new(&request.namespace, &request.r#type, &request.id);
        let options = TeardownOptions { owner: owner(request.options.unwrap_or_default().owner) };
        self.state
            .teardown_and_destroy_dynamic(&pointer, options)
            .await
            .map_err(|err| to_status(&err, Rpc::TeardownAndDestroy))?;
        Ok(Response::new(proto::TeardownAndDestroyResponse {}))
    }
}
