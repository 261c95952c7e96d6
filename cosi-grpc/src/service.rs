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

use std::pin::Pin;
use std::sync::Arc;

use cosi::resource::{Kind, Pointer, Resource as _, ResourceDefinition, Sensitivity};
use cosi::state::{
    Bookmark, CreateOptions, DestroyOptions, Error, ListOptions, META_NAMESPACE, State, TeardownOptions, UpdateOptions,
    WatchKindOptions, WatchOptions,
};
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::auth::{Authenticator, Role};
use crate::convert::{self, QueryError};
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
}

impl StateService {
    /// Serves `state`; every caller has the admin role.
    pub fn new(state: Arc<dyn State>) -> Self {
        // The sender is dropped: `shutdown` never fires for a bare service.
        let (_, shutdown) = watch::channel(false);
        StateService { state, authenticator: Authenticator::Trusted, shutdown }
    }

    pub(crate) fn with_security(
        state: Arc<dyn State>,
        authenticator: Authenticator,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        StateService { state, authenticator, shutdown }
    }

    /// The generated tonic server around this service, with message size limits.
    pub fn into_server(self, max_message_size: usize) -> proto::state_server::StateServer<Self> {
        proto::state_server::StateServer::new(self)
            .max_decoding_message_size(max_message_size)
            .max_encoding_message_size(max_message_size)
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

    /// Refuses a reader access to a type whose definition is sensitive.
    async fn check_read(&self, role: Role, r#type: &str) -> Result<(), Status> {
        if role != Role::Reader {
            return Ok(());
        }
        let pointer = Pointer::new(META_NAMESPACE, ResourceDefinition::TYPE, r#type.to_lowercase());
        let sensitive = match self.state.get_dynamic(&pointer).await {
            Ok(definition) => convert::definition_from_spec(&definition.spec)
                .is_some_and(|definition| definition.sensitivity == Sensitivity::Sensitive),
            Err(Error::NotFound(_)) => false,
            Err(err) => return Err(to_status(&err, Rpc::Get)),
        };
        match sensitive {
            true => Err(denied(format!(
                "resources of type {type} are sensitive: the role {} cannot read them",
                crate::auth::READER_ROLE
            ))),
            false => Ok(()),
        }
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
        let request = request.into_inner();
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
        let encode = move |events: Vec<cosi::state::Event>| -> Result<proto::WatchResponse, Status> {
            let mut out = Vec::with_capacity(events.len());
            for event in &events {
                if let Some(event) = convert::event_to_proto(event, api_version).map_err(|err| encode_status(&err))? {
                    out.push(event);
                }
            }
            Ok(proto::WatchResponse { event: out })
        };
        let batches: Pin<Box<dyn Stream<Item = Vec<cosi::state::Event>> + Send>> = match wire.aggregated {
            true => Box::pin(futures_util::stream::unfold(watch, |mut watch| async move {
                watch.recv_batch().await.map(|batch| (batch, watch))
            })),
            false => Box::pin(watch.map(|event| vec![event])),
        };
        let events = batches
            .map(encode)
            // An empty response means "ready"; batches an old client cannot see are skipped.
            .filter(|response| std::future::ready(!matches!(response, Ok(response) if response.event.is_empty())));
        let mut shutdown = self.shutdown.clone();
        let stopped = async move {
            // Fires on shutdown, or never when the sender is gone (a bare service).
            if shutdown.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let ready = futures_util::stream::once(std::future::ready(Ok(proto::WatchResponse::default())));
        Ok(Response::new(Box::pin(ready.chain(events).take_until(stopped))))
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
