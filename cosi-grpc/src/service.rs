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
//!   Each response's wire form is built only when the stream is polled for it.
//! - Bad input is a status, never a panic; one bad call does not affect others.
//! - Roles are checked before the state is touched (see `auth.rs`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use cosi::resource::{DynamicResource, Kind, Pointer, Readable, Resource as _, ResourceDefinition, Sensitivity};
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
use crate::connection::Peer;
use crate::convert::{self, QueryError};
use crate::limits::{
    Client, Limits, QueryBudget, QueryCharge, WATCH_RESPONSE_TARGET, WatchCounter, WatchPermit, label_query_bytes,
    max_response_size,
};
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
    /// What the queries of each client's watches and lists hold.
    queries: Arc<QueryBudget>,
    /// What each stored definition says: decoding an encoded definition is
    /// far dearer than listing, and readers check on every call.
    definitions: Arc<Mutex<DefinitionCache>>,
}

/// What a definition says a reader needs: the type it names and its
/// sensitivity (`None`: it does not decode).
type Said = Option<(String, Sensitivity)>;

/// Stored definitions by ID, each with what it says. An entry answers for
/// the content it was read from, not for the allocation that held it: a
/// state that decodes a fresh resource on every list (etcd) hands out new
/// `Arc`s for unchanged definitions, and reading them again would decode
/// every definition on every reader's call. See [`same_content`].
type DefinitionCache = HashMap<String, (DynamicResource, Said)>;

/// What each of `definitions` says, decoded with `decode` only when `cache`
/// holds nothing for its content; `cache` keeps the definitions that exist
/// now, and only those.
fn read_definitions<'a>(
    cache: &mut DefinitionCache,
    definitions: &'a [DynamicResource],
    decode: impl Fn(&DynamicResource) -> Said,
) -> Vec<(&'a DynamicResource, Said)> {
    let mut current = HashMap::with_capacity(definitions.len());
    let mut said = Vec::with_capacity(definitions.len());
    for stored in definitions {
        let read = match cache.remove(stored.id()) {
            Some((cached, read)) if same_content(&cached, stored) => read,
            _ => decode(stored),
        };
        current.insert(stored.id().to_owned(), (stored.clone(), read.clone()));
        said.push((stored, read));
    }
    *cache = current;
    said
}

/// Whether two stored definitions of one ID have the same content: the same
/// resource, or the same version with the same encoded spec, byte for byte.
/// The version alone does not tell: a definition destroyed and created again
/// starts again at the same version, perhaps now sensitive. Comparing the
/// bytes costs far less than decoding them.
fn same_content(cached: &DynamicResource, stored: &DynamicResource) -> bool {
    if DynamicResource::ptr_eq(cached, stored) {
        return true;
    }
    cached.metadata().version() == stored.metadata().version()
        && matches!(
            (cached.spec().as_encoded(), stored.spec().as_encoded()),
            (Some(cached), Some(stored)) if cached == stored
        )
}

/// What a stored definition says, decoded.
fn decode_definition(stored: &DynamicResource) -> Said {
    convert::definition_from_spec(stored.spec()).map(|definition| (definition.r#type, definition.sensitivity))
}

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
        let queries = QueryBudget::new(&limits);
        StateService { state, authenticator, shutdown, limits, watches, queries, definitions: Arc::default() }
    }

    /// The generated tonic server around this service: requests are limited
    /// to `max_message_size`, responses to [`max_response_size`] of it.
    pub fn into_server(self, max_message_size: usize) -> proto::state_server::StateServer<Self> {
        proto::state_server::StateServer::new(self)
            .max_decoding_message_size(max_message_size)
            .max_encoding_message_size(max_response_size(max_message_size))
    }

    fn role<T>(&self, request: &Request<T>) -> Result<Role, Status> {
        let peer = request.extensions().get::<Peer>();
        self.authenticator
            .role(peer.and_then(Peer::certificate))
            .ok_or_else(|| denied("the client certificate grants no COSI role".to_owned()))
    }

    /// Who the caller's watches count against: its certificate over mutual
    /// TLS, else its connection (`None` on a Unix socket), as its requests
    /// are counted (`admission.rs`).
    fn client<T>(request: &Request<T>) -> Option<Client> {
        Client::of(request.extensions().get())
    }

    /// Counts what a request's compiled queries hold against its client's
    /// budget, until the charge is dropped.
    fn charge_queries(
        &self,
        client: Option<Client>,
        labels: &[cosi::resource::LabelQuery],
        id: Option<&cosi::resource::IdQuery>,
    ) -> Result<QueryCharge, Status> {
        let bytes = label_query_bytes(labels) + id.map_or(0, cosi::resource::IdQuery::memory_usage);
        self.queries.charge(client, bytes)
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
    /// nothing enforces it), by [`cosi::resource::readable`], the rule the
    /// live page applies too. Readers are rare and definitions few, so every
    /// check reads them all rather than trusting a cache to stay current.
    async fn readable(&self, r#type: &str) -> Result<Readable, Status> {
        let kind = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
        let definitions =
            self.state.list_dynamic(&kind, &ListOptions::default()).await.map_err(|err| to_status(&err, Rpc::List))?;
        let mut cache = self.definitions.lock();
        let said = read_definitions(&mut cache, &definitions, decode_definition);
        let said = said.iter().map(|(stored, said)| {
            (stored.id(), said.as_ref().map(|(defined, sensitivity)| (defined.as_str(), *sensitivity)))
        });
        Ok(cosi::resource::readable(r#type, said))
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

/// How large watch responses should and may be.
#[derive(Clone, Copy)]
struct ResponseSizes {
    /// Responses are cut before they grow past this.
    target: usize,
    /// No response may be larger: the encoding limit.
    max: usize,
}

/// A watch's responses, each built from the watch's events only when the
/// stream is polled for it. The wire form copies every spec, so a batch
/// converted whole (a kind's bootstrap) would be held a second time, per
/// watch, until its client had read it all; this holds at most the response
/// being sent and one event converted for the next.
///
/// A batch goes out in order, in responses of about `sizes.target` bytes
/// each, so that a batch of any size fits the message limit (a kind's
/// bootstrap is one batch). A single event is never cut: one larger than the
/// target goes alone, and one larger than `sizes.max` ends the watch, after
/// the events before it, with an error (an `Errored` event for clients that
/// know it, a status otherwise). A batch with nothing an old client can see
/// yields no response, since an empty response means "ready".
struct Responses {
    batches: Pin<Box<dyn Stream<Item = Vec<cosi::state::Event>> + Send>>,
    /// What is left of the batch being sent.
    events: std::vec::IntoIter<cosi::state::Event>,
    /// An event converted for the last response that did not fit in it, and its length.
    carried: Option<(proto::Event, usize)>,
    /// The response that ends the watch, once the events before it are sent.
    ending: Option<Result<proto::WatchResponse, Status>>,
    api_version: i32,
    sizes: ResponseSizes,
    /// The watch's place among the open watches, released with the stream.
    _permit: WatchPermit,
    /// What its queries hold, counted against its client until the stream ends.
    _charge: Option<QueryCharge>,
}

impl Responses {
    /// The responses as a stream, which ends with the response that ends the watch.
    fn into_stream(self) -> impl Stream<Item = Result<proto::WatchResponse, Status>> + Send {
        futures_util::stream::unfold(Some(self), |responses| async move {
            let mut responses = responses?;
            let (response, ends) = responses.next().await?;
            Some((response, (!ends).then_some(responses)))
        })
    }

    /// The next response, and whether the watch ends with it.
    async fn next(&mut self) -> Option<(Result<proto::WatchResponse, Status>, bool)> {
        loop {
            if let Some(next) = self.next_of_batch() {
                return Some(next);
            }
            self.events = self.batches.next().await?.into_iter();
        }
    }

    /// The next response of the batch being sent, if anything of it is left.
    fn next_of_batch(&mut self) -> Option<(Result<proto::WatchResponse, Status>, bool)> {
        if let Some(ending) = self.ending.take() {
            return Some((ending, true));
        }
        let (mut events, mut size) = match self.carried.take() {
            Some((event, len)) => (vec![event], len),
            None => (Vec::new(), 0),
        };
        for event in self.events.by_ref() {
            let event = match convert::event_to_proto(&event, self.api_version) {
                Ok(Some(event)) => event,
                Ok(None) => continue,
                Err(err) => {
                    self.ending = Some(Err(encode_status(&err)));
                    break;
                }
            };
            // The event's bytes plus its field tag and length prefix.
            let len = event.encoded_len() + 1 + prost::length_delimiter_len(event.encoded_len());
            if len > self.sizes.max {
                self.ending = Some(too_large(len, self.sizes.max, self.api_version));
                break;
            }
            if !events.is_empty() && size + len > self.sizes.target {
                self.carried = Some((event, len));
                break;
            }
            size += len;
            events.push(event);
        }
        match events.is_empty() {
            false => Some((Ok(proto::WatchResponse { event: events }), false)),
            true => self.ending.take().map(|ending| (ending, true)),
        }
    }
}

/// What ends a watch whose next event of `len` bytes is over the `max` a response may hold.
fn too_large(len: usize, max: usize, api_version: i32) -> Result<proto::WatchResponse, Status> {
    let message = format!("an event of {len} bytes is over the {max} bytes a watch response may hold; the watch ends");
    match api_version {
        0 => Err(Status::out_of_range(message)),
        _ => Ok(proto::WatchResponse {
            event: vec![proto::Event {
                event_type: proto::EventType::Errored.into(),
                error: Some(message),
                ..proto::Event::default()
            }],
        }),
    }
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
        let client = Self::client(&request);
        let request = request.into_inner();
        self.check_read(role, &request.r#type).await?;
        let wire = request.options.unwrap_or_default();
        let options = ListOptions {
            labels: convert::label_queries_from_proto(wire.label_query).map_err(query_status)?,
            id: convert::id_query_from_proto(wire.id_query).map_err(query_status)?,
        };
        // Held until the list has answered.
        let _charge = self.charge_queries(client, &options.labels, options.id.as_ref())?;
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
        let client = Self::client(&request);
        // Counted before anything is set up; released when the stream is dropped.
        let permit = self.watches.open(client.clone())?;
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
        let mut charge = None;
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
                // Held for as long as the watch's stream, which keeps the queries.
                charge = Some(self.charge_queries(client, &options.labels, options.id.as_ref())?);
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
        let events = Responses {
            batches,
            events: Vec::new().into_iter(),
            carried: None,
            ending: None,
            api_version,
            sizes,
            _permit: permit,
            _charge: charge,
        }
        .into_stream();
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use cosi::resource::{EncodedSpec, Metadata, Version};

    use super::*;

    /// A definition as a state that decodes its records on every list hands
    /// it out: a fresh resource each time.
    fn fresh(id: &str, version: u64, yaml: &str) -> DynamicResource {
        let mut metadata = Metadata::new(META_NAMESPACE, ResourceDefinition::TYPE, id);
        metadata.set_version(Version::new(version));
        DynamicResource::encoded(metadata, EncodedSpec { proto: Vec::new(), yaml: Some(yaml.to_owned()) })
    }

    #[test]
    fn unchanged_definitions_in_fresh_allocations_are_not_decoded_again() {
        let decoded = Cell::new(0);
        let decode = |stored: &DynamicResource| {
            decoded.set(decoded.get() + 1);
            Some((stored.id().to_owned(), Sensitivity::NonSensitive))
        };
        let mut cache = DefinitionCache::new();
        let read = |cache: &mut DefinitionCache, definitions: &[DynamicResource]| {
            read_definitions(cache, definitions, decode).into_iter().map(|(_, said)| said).collect::<Vec<_>>()
        };

        let first = read(&mut cache, &[fresh("a", 1, "type: A"), fresh("b", 1, "type: B")]);
        assert_eq!(decoded.get(), 2);
        let again = read(&mut cache, &[fresh("a", 1, "type: A"), fresh("b", 1, "type: B")]);
        assert_eq!(decoded.get(), 2, "the same content in new allocations is read from the cache");
        assert_eq!(first, again);

        read(&mut cache, &[fresh("a", 2, "type: A"), fresh("b", 1, "type: B")]);
        assert_eq!(decoded.get(), 3, "a new version is read again");
        // Destroyed and created again: the same version, another content.
        read(&mut cache, &[fresh("a", 2, "type: A"), fresh("b", 1, "type: B\nsensitivity: sensitive")]);
        assert_eq!(decoded.get(), 4, "the same version with other bytes is read again");
        read(&mut cache, &[fresh("b", 1, "type: B\nsensitivity: sensitive")]);
        assert_eq!(cache.len(), 1, "a definition that is gone leaves the cache");
        read(&mut cache, &[fresh("a", 2, "type: A"), fresh("b", 1, "type: B\nsensitivity: sensitive")]);
        assert_eq!(decoded.get(), 5, "and is read again when it comes back");
    }
}
