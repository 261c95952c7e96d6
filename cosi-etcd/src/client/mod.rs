//! This crate's own client of etcd's v3 gRPC API, on tonic.
//!
//! It makes exactly the calls the state, its watches and the leader election
//! need, over one tonic [`Channel`] balanced across the endpoints. Failures
//! keep etcd's gRPC status ([`EtcdError::Status`]); an answer this client
//! cannot use is an [`EtcdError::Response`], never a panic.
//!
//! With [`Credentials`], the client trades them for a token when it connects
//! and sends the token with every call (the `token` metadata, as etcd's own
//! clients do). When etcd says the token is no longer good (it expired, the
//! user's password changed, the auth store moved on), the client
//! authenticates again, once, and retries the call.

pub(crate) mod proto;
mod streams;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::channel::Change;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use self::proto::etcdserverpb::auth_client::AuthClient;
use self::proto::etcdserverpb::kv_client::KvClient;
use self::proto::etcdserverpb::lease_client::LeaseClient;
use self::proto::etcdserverpb::{
    AuthenticateRequest, LeaseGrantRequest, LeaseRevokeRequest, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use self::proto::mvccpb::KeyValue;
use self::proto::v3electionpb::election_client::ElectionClient;
use self::proto::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ResignRequest,
};
pub(crate) use self::streams::{KeepAlive, WatchStream};

/// The largest message this client sends or accepts: 64 MiB.
///
/// etcd accepts requests of at most its `--max-request-bytes` (1.5 MiB by
/// default; its documentation advises at most 10 MiB), which bounds every
/// value it stores. No answer this client asks for is unbounded beyond that:
/// a range over many keys is read in pages that shrink until each fits
/// ([`Client::list`]), and watches ask etcd to split any response larger than
/// its request limit (the `fragment` option). A single key too large for this
/// limit is a clear error rather than an allocation of whatever etcd sends.
pub(crate) const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// The largest watch response this client joins from the fragments etcd
/// split it into: 256 MiB, four full messages. etcd splits a response into
/// fragments of at most its request limit, but how many fragments one
/// response has is etcd's choice; past this, joining them is refused rather
/// than held in memory, and the watch's reader is told.
pub(crate) const MAX_WATCH_RESPONSE: usize = 4 * MAX_MESSAGE_SIZE;

/// How many keys the first page of a listing asks for; a page too large for
/// [`MAX_MESSAGE_SIZE`] is asked for again with half as many.
const LIST_PAGE: i64 = 1000;

/// How many times a listing starts over when etcd compacted its revision between two pages.
const LIST_ATTEMPTS: usize = 3;

/// HTTP/2 pings on an idle connection, and how long a ping may go unanswered
/// before the connection counts as dead: a watch on a silent but broken
/// connection notices within 15 s.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Transport security for `https://` endpoints. Certificates and keys are PEM.
#[derive(Clone)]
pub struct Tls {
    /// The CA certificate (or several) that signed etcd's server certificate.
    pub server_ca: String,
    /// This client's certificate, for an etcd that requires one (`--client-cert-auth`).
    pub client: Option<ClientCertificate>,
    /// The name etcd's certificate must carry, when it is not the endpoints' host.
    pub server_name: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client", &self.client.as_ref().map(|_| "<certificate and key>"))
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// A client certificate and its private key, in PEM.
#[derive(Clone)]
pub struct ClientCertificate {
    /// The certificate, signed by a CA that etcd trusts (`--trusted-ca-file`).
    pub certificate: String,
    /// Its private key.
    pub key: String,
}

/// An etcd user, for an etcd with authentication enabled.
#[derive(Clone)]
pub struct Credentials {
    /// The user's name.
    pub user: String,
    /// The user's password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("user", &self.user).finish_non_exhaustive()
    }
}

/// A call to etcd that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// An endpoint, or the TLS settings, cannot be used.
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// etcd refused the call, or could not be reached: the gRPC status says which.
    #[error("etcd {call}: {}", describe(status))]
    Status {
        /// The gRPC method, such as `KV.Txn`.
        call: &'static str,
        /// The status etcd (or the transport) answered with.
        status: Status,
    },
    /// etcd answered with something this client cannot use.
    #[error("etcd {call}: {reason}")]
    Response {
        /// The gRPC method.
        call: &'static str,
        /// What was wrong with the answer.
        reason: String,
    },
    /// etcd answered with more than this client accepts.
    #[error("etcd {call}: the answer is larger than this client's limit of {limit} bytes")]
    TooLarge {
        /// The gRPC method.
        call: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
}

impl EtcdError {
    /// The gRPC status etcd answered with, if the call got that far.
    pub fn status(&self) -> Option<&Status> {
        match self {
            EtcdError::Status { status, .. } => Some(status),
            EtcdError::Endpoint { .. } | EtcdError::Response { .. } | EtcdError::TooLarge { .. } => None,
        }
    }

    fn status_of(call: &'static str) -> impl Fn(Status) -> EtcdError {
        move |status| EtcdError::Status { call, status }
    }

    pub(crate) fn response(call: &'static str, reason: impl Into<String>) -> EtcdError {
        EtcdError::Response { call, reason: reason.into() }
    }

    /// Whether the answer can never be received: it exceeds [`MAX_MESSAGE_SIZE`]
    /// (or a joined watch response [`MAX_WATCH_RESPONSE`]), so asking again
    /// would only receive it again.
    pub(crate) fn too_large(&self) -> bool {
        match self {
            EtcdError::Status { status, .. } => too_large(status),
            EtcdError::TooLarge { .. } => true,
            EtcdError::Endpoint { .. } | EtcdError::Response { .. } => false,
        }
    }

    /// Whether etcd refused the call's token, so a fresh one may succeed.
    fn token_rejected(&self) -> bool {
        self.status().is_some_and(token_rejected)
    }
}

/// The status's message, its code, and what the transport said underneath.
fn describe(status: &Status) -> String {
    let mut text = format!("{} ({:?})", status.message(), status.code());
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        text.push_str(": ");
        text.push_str(&error.to_string());
        source = error.source();
    }
    text
}

/// Whether etcd refused a token that a fresh authentication would replace.
///
/// etcd answers an unknown or expired token with `Unauthenticated`, but the
/// election service, built on etcd's in-process client, turns every failure
/// into `Unknown` with the original message; so the messages of the three
/// refusals etcd's own client re-authenticates after are matched too.
fn token_rejected(status: &Status) -> bool {
    status.code() == Code::Unauthenticated || token_refusal(status.message())
}

/// Whether a message (a status's, or a watch's cancel reason) is one of etcd's token refusals.
fn token_refusal(message: &str) -> bool {
    ["invalid auth token", "revision of auth store is old", "user name is empty"]
        .iter()
        .any(|refusal| message.contains(refusal))
}

/// How to reach etcd: [`Client::connect`]'s settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Connection<'a> {
    pub(crate) connect_timeout: Duration,
    pub(crate) tls: Option<&'a Tls>,
    pub(crate) credentials: Option<&'a Credentials>,
}

/// A connection to an etcd cluster. Cloning is cheap and shares it.
#[derive(Clone)]
pub(crate) struct Client {
    channel: Channel,
    auth: Option<Arc<Auth>>,
}

/// A token and how to get a fresh one.
struct Auth {
    credentials: Credentials,
    token: parking_lot::Mutex<Option<Token>>,
    /// Held while authenticating, so that calls refused together authenticate once.
    refreshing: tokio::sync::Mutex<()>,
    /// How many times the client authenticated: tests check re-authentication with it.
    authentications: AtomicU64,
}

type Token = MetadataValue<Ascii>;

/// A range's keys, read at one revision.
pub(crate) struct Listing {
    pub(crate) kvs: Vec<KeyValue>,
    /// The revision the keys were read at.
    pub(crate) revision: i64,
}

impl Client {
    /// A client of the cluster at `endpoints` (`http://host:port`, `https://host:port`,
    /// or `host:port`, which means `https` with TLS settings and `http` without).
    ///
    /// Connections are made when calls need them, so an unreachable cluster
    /// fails the first call, not this one; with credentials, that first call is
    /// the authentication made here.
    pub(crate) async fn connect(endpoints: &[impl AsRef<str>], connection: Connection<'_>) -> Result<Self, EtcdError> {
        let tls = connection.tls.map(tls_config);
        let mut built = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let url = endpoint.as_ref();
            let endpoint = endpoint_of(url, tls.as_ref(), connection.connect_timeout)?;
            if connection.credentials.is_some() {
                check_credentials_stay(url, &endpoint)?;
            }
            built.push(endpoint);
        }
        if built.is_empty() {
            return Err(EtcdError::Endpoint { endpoint: String::new(), reason: "no endpoint was given".into() });
        }
        // One balanced channel over every endpoint: tonic spreads calls and
        // leaves out endpoints that cannot be reached.
        let (channel, changes) = Channel::balance_channel(built.len());
        for endpoint in built {
            let uri = endpoint.uri().to_string();
            changes.try_send(Change::Insert(endpoint.uri().clone(), endpoint)).map_err(|_| EtcdError::Endpoint {
                endpoint: uri,
                reason: "the balanced channel refused the endpoint".into(),
            })?;
        }
        let auth = connection.credentials.map(|credentials| {
            Arc::new(Auth {
                credentials: credentials.clone(),
                token: parking_lot::Mutex::new(None),
                refreshing: tokio::sync::Mutex::new(()),
                authentications: AtomicU64::new(0),
            })
        });
        let client = Client { channel, auth };
        if let Some(auth) = &client.auth {
            client.authenticate(auth).await?;
        }
        Ok(client)
    }

    /// How many times this client has authenticated (0 without credentials).
    #[cfg(feature = "testing")]
    pub(crate) fn authentications(&self) -> u64 {
        self.auth.as_ref().map_or(0, |auth| auth.authentications.load(Ordering::Relaxed))
    }

    // --- KV

    /// The key `key`, if it exists, in `kvs`.
    pub(crate) async fn get(&self, key: Vec<u8>) -> Result<RangeResponse, EtcdError> {
        self.range(RangeRequest { key, ..RangeRequest::default() }).await
    }

    pub(crate) async fn range(&self, request: RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.unary("KV.Range", request, |channel, request| async move { kv(channel).range(request).await }).await
    }

    /// Every key starting with `prefix`, in key order, read at one revision.
    ///
    /// The keys are read in pages, each continuing after the last key of the
    /// one before at the first page's revision, so the listing is one
    /// consistent snapshot however large. A page that does not fit in
    /// [`MAX_MESSAGE_SIZE`] is asked for again with half as many keys; when etcd
    /// compacts that revision between two pages, the listing starts over.
    pub(crate) async fn list(&self, prefix: &[u8]) -> Result<Listing, EtcdError> {
        let range_end = prefix_end(prefix);
        let mut attempt = 1;
        loop {
            match self.list_once(prefix, &range_end).await {
                Err(err) if attempt < LIST_ATTEMPTS && err.status().is_some_and(compacted) => attempt += 1,
                result => return result,
            }
        }
    }

    async fn list_once(&self, prefix: &[u8], range_end: &[u8]) -> Result<Listing, EtcdError> {
        let mut kvs = Vec::new();
        let mut page = LIST_PAGE;
        let mut revision = 0;
        let mut from = prefix.to_vec();
        loop {
            let request = RangeRequest {
                key: from.clone(),
                range_end: range_end.to_vec(),
                limit: page,
                revision,
                ..Default::default()
            };
            let response = match self.range(request).await {
                Err(err) if page > 1 && err.status().is_some_and(too_large) => {
                    page /= 2;
                    continue;
                }
                result => result?,
            };
            if revision == 0 {
                revision = response.header.as_ref().map(|header| header.revision).unwrap_or_default();
                if revision <= 0 {
                    return Err(EtcdError::response("KV.Range", "the answer has no revision in its header"));
                }
            }
            let more = response.more;
            if let Some(last) = response.kvs.last() {
                // The smallest key after the last one read.
                from = last.key.clone();
                from.push(0);
            } else if more {
                return Err(EtcdError::response("KV.Range", "etcd said more keys follow but sent none"));
            }
            kvs.extend(response.kvs);
            if !more {
                return Ok(Listing { kvs, revision });
            }
        }
    }

    pub(crate) async fn txn(&self, request: TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.unary("KV.Txn", request, |channel, request| async move { kv(channel).txn(request).await }).await
    }

    /// Drops the history before `revision`, and waits until it is gone.
    #[cfg(feature = "testing")]
    pub(crate) async fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::CompactionRequest;
        let request = CompactionRequest { revision, physical: true };
        self.unary("KV.Compact", request, |channel, request| async move { kv(channel).compact(request).await })
            .await
            .map(drop)
    }

    // --- Lease

    /// A lease with a time to live of `ttl` seconds; its ID.
    pub(crate) async fn lease_grant(&self, ttl: i64) -> Result<i64, EtcdError> {
        const CALL: &str = "Lease.LeaseGrant";
        let request = LeaseGrantRequest { ttl, id: 0 };
        let response = self
            .unary(CALL, request, |channel, request| async move { lease(channel).lease_grant(request).await })
            .await?;
        match (response.error.is_empty(), response.id) {
            (false, _) => Err(EtcdError::response(CALL, response.error)),
            (true, 0) => Err(EtcdError::response(CALL, "etcd granted a lease without an ID")),
            (true, id) => Ok(id),
        }
    }

    pub(crate) async fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        let request = LeaseRevokeRequest { id };
        self.unary("Lease.LeaseRevoke", request, |channel, request| async move {
            lease(channel).lease_revoke(request).await
        })
        .await
        .map(drop)
    }

    // --- Election

    /// Resolves once the candidate `value`, holding `lease`, leads the election `name`.
    pub(crate) async fn campaign(&self, name: &str, lease: i64, value: &str) -> Result<CampaignResponse, EtcdError> {
        let request = CampaignRequest { name: name.into(), lease, value: value.into() };
        self.unary(
            "Election.Campaign",
            request,
            |channel, request| async move { election(channel).campaign(request).await },
        )
        .await
    }

    pub(crate) async fn leader(&self, name: &str) -> Result<LeaderResponse, EtcdError> {
        let request = LeaderRequest { name: name.into() };
        self.unary(
            "Election.Leader",
            request,
            |channel, request| async move { election(channel).leader(request).await },
        )
        .await
    }

    pub(crate) async fn resign(&self, leader: LeaderKey) -> Result<(), EtcdError> {
        let request = ResignRequest { leader: Some(leader) };
        self.unary(
            "Election.Resign",
            request,
            |channel, request| async move { election(channel).resign(request).await },
        )
        .await
        .map(drop)
    }

    // --- Auth, to set up an etcd with authentication (tests only)

    #[cfg(feature = "testing")]
    pub(crate) async fn user_add(&self, name: &str, password: &str) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::AuthUserAddRequest;
        let request = AuthUserAddRequest { name: name.into(), password: password.into() };
        self.unary("Auth.UserAdd", request, |channel, request| async move {
            AuthClient::new(channel).user_add(request).await
        })
        .await
        .map(drop)
    }

    #[cfg(feature = "testing")]
    pub(crate) async fn role_add(&self, name: &str) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::AuthRoleAddRequest;
        let request = AuthRoleAddRequest { name: name.into() };
        self.unary("Auth.RoleAdd", request, |channel, request| async move {
            AuthClient::new(channel).role_add(request).await
        })
        .await
        .map(drop)
    }

    #[cfg(feature = "testing")]
    pub(crate) async fn user_grant_role(&self, user: &str, role: &str) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::AuthUserGrantRoleRequest;
        let request = AuthUserGrantRoleRequest { user: user.into(), role: role.into() };
        self.unary("Auth.UserGrantRole", request, |channel, request| async move {
            AuthClient::new(channel).user_grant_role(request).await
        })
        .await
        .map(drop)
    }

    #[cfg(feature = "testing")]
    pub(crate) async fn user_change_password(&self, name: &str, password: &str) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::AuthUserChangePasswordRequest;
        let request = AuthUserChangePasswordRequest { name: name.into(), password: password.into() };
        self.unary("Auth.UserChangePassword", request, |channel, request| async move {
            AuthClient::new(channel).user_change_password(request).await
        })
        .await
        .map(drop)
    }

    #[cfg(feature = "testing")]
    pub(crate) async fn auth_enable(&self) -> Result<(), EtcdError> {
        use self::proto::etcdserverpb::AuthEnableRequest;
        self.unary("Auth.AuthEnable", AuthEnableRequest {}, |channel, request| async move {
            AuthClient::new(channel).auth_enable(request).await
        })
        .await
        .map(drop)
    }

    // --- Calls and tokens

    /// Sends one request, with the token when there is one, and retries once
    /// with a fresh token when etcd refuses it.
    async fn unary<Q, R, F, Fut>(&self, call: &'static str, message: Q, send: F) -> Result<R, EtcdError>
    where
        Q: Clone,
        F: Fn(Channel, tonic::Request<Q>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, Status>>,
    {
        if self.auth.is_none() {
            // Without authentication there is nothing to retry: no copy of the request is kept.
            let response = send(self.channel.clone(), tonic::Request::new(message)).await;
            return response.map(tonic::Response::into_inner).map_err(EtcdError::status_of(call));
        }
        self.authorized(|token| {
            let response = send(self.channel.clone(), request(message.clone(), token.as_ref()));
            async move { response.await.map(tonic::Response::into_inner).map_err(EtcdError::status_of(call)) }
        })
        .await
    }

    /// Runs `attempt` with the current token, and once more with a fresh one
    /// when etcd refused the first.
    async fn authorized<T, F, Fut>(&self, attempt: F) -> Result<T, EtcdError>
    where
        F: Fn(Option<Token>) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let Some(auth) = &self.auth else { return attempt(None).await };
        let token = auth.token.lock().clone();
        match attempt(token.clone()).await {
            Err(err) if err.token_rejected() => {
                let fresh = self.reauthenticate(auth, token).await?;
                attempt(Some(fresh)).await
            }
            result => result,
        }
    }

    /// A token to replace `stale`: another call's fresh one, or a new one.
    async fn reauthenticate(&self, auth: &Auth, stale: Option<Token>) -> Result<Token, EtcdError> {
        let _refreshing = auth.refreshing.lock().await;
        let current = auth.token.lock().clone();
        match current {
            Some(current) if Some(&current) != stale.as_ref() => Ok(current),
            _ => self.authenticate(auth).await,
        }
    }

    async fn authenticate(&self, auth: &Auth) -> Result<Token, EtcdError> {
        const CALL: &str = "Auth.Authenticate";
        let request =
            AuthenticateRequest { name: auth.credentials.user.clone(), password: auth.credentials.password.clone() };
        let response = AuthClient::new(self.channel.clone())
            .authenticate(request)
            .await
            .map_err(EtcdError::status_of(CALL))?
            .into_inner();
        let token = Token::try_from(response.token)
            .map_err(|_| EtcdError::response(CALL, "the token is not a valid gRPC metadata value"))?;
        *auth.token.lock() = Some(token.clone());
        auth.authentications.fetch_add(1, Ordering::Relaxed);
        Ok(token)
    }
}

/// A request carrying `token` as its `token` metadata, where etcd looks for it.
fn request<T>(message: T, token: Option<&Token>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert("token", token.clone());
    }
    request
}

fn kv(channel: Channel) -> KvClient<Channel> {
    KvClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE).max_encoding_message_size(MAX_MESSAGE_SIZE)
}

fn lease(channel: Channel) -> LeaseClient<Channel> {
    LeaseClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE).max_encoding_message_size(MAX_MESSAGE_SIZE)
}

fn election(channel: Channel) -> ElectionClient<Channel> {
    ElectionClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE).max_encoding_message_size(MAX_MESSAGE_SIZE)
}

/// Whether tonic refused an answer larger than [`MAX_MESSAGE_SIZE`].
fn too_large(status: &Status) -> bool {
    status.code() == Code::OutOfRange && status.message().contains("message length too large")
}

/// Whether etcd refused a read at a revision it has compacted.
pub(crate) fn compacted(status: &Status) -> bool {
    status.message().contains("required revision has been compacted")
}

/// The end of the range of keys that start with `prefix`: the prefix with its
/// last byte below 0xff incremented (and what follows dropped); `\0`, which
/// etcd reads as "every key from here on", when there is no such byte.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn tls_config(tls: &Tls) -> ClientTlsConfig {
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.server_ca));
    if let Some(client) = &tls.client {
        config = config.identity(Identity::from_pem(&client.certificate, &client.key));
    }
    if let Some(name) = &tls.server_name {
        config = config.domain_name(name.clone());
    }
    config
}

/// The tonic endpoint for `url`, whose scheme must agree with the TLS settings.
fn endpoint_of(url: &str, tls: Option<&ClientTlsConfig>, connect_timeout: Duration) -> Result<Endpoint, EtcdError> {
    let error = |reason: String| EtcdError::Endpoint { endpoint: url.to_owned(), reason };
    let full = match (url.split_once("://"), tls) {
        (Some(("http", _)), None) | (Some(("https", _)), Some(_)) => url.to_owned(),
        // Refused rather than guessed: plaintext where TLS was asked for would leak the credentials.
        (Some(("http", _)), Some(_)) => {
            return Err(error("TLS settings are given, so the endpoint must be https://".into()));
        }
        (Some(("https", _)), None) => {
            return Err(error("an https:// endpoint needs TLS settings (Options::tls)".into()));
        }
        (Some((scheme, _)), _) => {
            return Err(error(format!("unknown scheme {scheme:?}: expected http:// or https://")));
        }
        (None, None) => format!("http://{url}"),
        (None, Some(_)) => format!("https://{url}"),
    };
    let endpoint = Endpoint::from_shared(full)
        .map_err(|err| error(chain(&err)))?
        .connect_timeout(connect_timeout)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    match tls {
        Some(tls) => endpoint.tls_config(tls.clone()).map_err(|err| error(chain(&err))),
        None => Ok(endpoint),
    }
}

/// Refuses to send credentials to `endpoint` in plaintext off this machine:
/// without TLS (`http://`) its host must be loopback, where the password
/// never crosses a network.
fn check_credentials_stay(url: &str, endpoint: &Endpoint) -> Result<(), EtcdError> {
    let plaintext = endpoint.uri().scheme_str() != Some("https");
    let host = endpoint.uri().host().unwrap_or_default();
    match plaintext && !is_loopback(host) {
        true => Err(EtcdError::Endpoint {
            endpoint: url.to_owned(),
            reason: "credentials would cross the network in plaintext: use https:// endpoints with TLS \
                     (Options::tls) for an etcd off this machine"
                .to_owned(),
        }),
        false => Ok(()),
    }
}

/// Whether `host` (as a URL writes it) is this machine's loopback:
/// `localhost` or a loopback address.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An error and its sources, as one line: tonic's transport errors say little at the top.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(error) = source {
        text.push_str(": ");
        text.push_str(&error.to_string());
        source = error.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_bound_exactly_the_prefixed_keys() {
        assert_eq!(prefix_end(b"/cosi/ns/t/"), b"/cosi/ns/t0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn refused_tokens_are_recognised_whatever_the_code() {
        assert!(token_rejected(&Status::unauthenticated("etcdserver: invalid auth token")));
        // The election service loses the code but keeps the message.
        assert!(token_rejected(&Status::unknown("etcdserver: invalid auth token")));
        assert!(token_rejected(&Status::invalid_argument("etcdserver: revision of auth store is old")));
        assert!(token_rejected(&Status::invalid_argument("etcdserver: user name is empty")));
        assert!(!token_rejected(&Status::invalid_argument(
            "etcdserver: authentication failed, invalid user ID or password"
        )));
        assert!(!token_rejected(&Status::permission_denied("etcdserver: permission denied")));
    }

    #[test]
    fn endpoints_must_agree_with_the_tls_settings() {
        let timeout = Duration::from_secs(1);
        let tls = ClientTlsConfig::new();
        assert_eq!(endpoint_of("http://127.0.0.1:2379", None, timeout).unwrap().uri().scheme_str(), Some("http"));
        assert_eq!(endpoint_of("127.0.0.1:2379", None, timeout).unwrap().uri().scheme_str(), Some("http"));
        assert_eq!(endpoint_of("127.0.0.1:2379", Some(&tls), timeout).unwrap().uri().scheme_str(), Some("https"));
        for (url, tls, expected) in [
            ("http://127.0.0.1:2379", Some(&tls), "must be https://"),
            ("https://127.0.0.1:2379", None, "needs TLS settings"),
            ("unix:///run/etcd.sock", None, "unknown scheme"),
            ("http://bad host:1", None, "etcd endpoint"),
        ] {
            let err = endpoint_of(url, tls, timeout).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains(url), "{url}: {err}");
        }
    }

    #[test]
    fn loopback_hosts_are_recognised_and_nothing_else_is() {
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.8.9.10", "[::1]", "::1"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.2", "etcd.example", "[::2]", "localhost.example", "0.0.0.0", ""] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    /// Credentials go in plaintext only to loopback: to any other host over
    /// `http://` the client refuses before it connects, saying why.
    #[tokio::test]
    async fn credentials_are_refused_over_plaintext_off_this_machine() {
        let credentials = Credentials { user: "cosi".into(), password: "secret".into() };
        let connection =
            Connection { connect_timeout: Duration::from_secs(1), tls: None, credentials: Some(&credentials) };
        for url in ["http://192.0.2.1:2379", "192.0.2.1:2379", "http://etcd.example:2379", "http://[2001:db8::1]:2379"]
        {
            let refused = Client::connect(&["http://127.0.0.1:2379", url], connection).await;
            let Err(err) = refused else { panic!("{url}: credentials sent in plaintext") };
            let text = err.to_string();
            assert!(text.contains("in plaintext") && text.contains(url), "{url}: {text}");
        }
        // On loopback the check passes and the client goes on to authenticate
        // (here against a port nobody listens on, so that fails otherwise).
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        for url in [format!("http://127.0.0.1:{port}"), format!("http://localhost:{port}")] {
            let Err(err) = Client::connect(&[url.as_str()], connection).await else { panic!("{url}: nobody listens") };
            assert!(!err.to_string().contains("in plaintext"), "{url}: {err}");
        }
        // Without credentials, nothing is refused.
        let plain = Connection { credentials: None, ..connection };
        assert!(Client::connect(&["http://192.0.2.1:2379"], plain).await.is_ok());
    }

    #[test]
    fn errors_name_the_call_and_keep_the_status() {
        let err = EtcdError::status_of("KV.Txn")(Status::unavailable("connection refused"));
        assert_eq!(err.status().map(Status::code), Some(Code::Unavailable));
        let text = err.to_string();
        assert!(text.contains("KV.Txn") && text.contains("connection refused"), "{text}");
    }
}
