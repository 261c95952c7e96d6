//! Admission of requests: what a request may hold while it arrives.
//!
//! A request holds a place from its headers until its body has arrived
//! (tonic has then decoded its message), not while the state answers it:
//! a `TeardownAndDestroy` waiting minutes for finalizers holds no place,
//! and nothing cuts it short. The places are bounded in all
//! ([`Limits::max_requests_in_flight`]) and per client
//! ([`Limits::max_requests_in_flight_per_client`]): a client over its share
//! is refused at once, so that no one client takes every place; a request
//! finding every place taken waits for one. The wait and the arrival together
//! last at most [`Limits::request_timeout`]: then the request is refused
//! (`RESOURCE_EXHAUSTED`) or cancelled (`CANCELLED`), and what it held is
//! freed.
//!
//! A client is its certificate over mutual TLS, its connection otherwise;
//! Unix socket callers (the machine's administrators) count only in all.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Instant;
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service, ServiceExt};

use crate::connection::{Peer, Tracked};
use crate::limits::{Client, LONGEST, Limits};

/// The places, shared by every connection's service.
#[derive(Debug)]
pub(crate) struct Admission {
    places: Arc<Semaphore>,
    total: usize,
    per_client: usize,
    timeout: Duration,
    by_client: Mutex<HashMap<Client, usize>>,
}

impl Admission {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        let total = limits.max_requests_in_flight.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Admission {
            places: Arc::new(Semaphore::new(total)),
            total,
            per_client: limits.max_requests_in_flight_per_client.max(1),
            timeout: limits.request_timeout.min(LONGEST),
            by_client: Mutex::new(HashMap::new()),
        })
    }

    /// Counts one more request of `client`, unless it has its share already.
    fn enter(self: &Arc<Self>, client: Option<Client>) -> Option<Share> {
        let Some(client) = client else {
            return Some(Share { admission: Arc::clone(self), client: None });
        };
        let mut by_client = self.by_client.lock();
        let count = by_client.entry(client.clone()).or_insert(0);
        if *count >= self.per_client {
            return None;
        }
        *count += 1;
        Some(Share { admission: Arc::clone(self), client: Some(client) })
    }
}

/// One request counted against its client, until dropped.
#[derive(Debug)]
struct Share {
    admission: Arc<Admission>,
    client: Option<Client>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let mut by_client = self.admission.by_client.lock();
        if let Some(count) = by_client.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                by_client.remove(&client);
            }
        }
    }
}

/// The layer of the server's stack that admits requests.
#[derive(Clone, Debug)]
pub(crate) struct AdmissionLayer(pub(crate) Arc<Admission>);

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admit<S>;

    fn layer(&self, inner: S) -> Admit<S> {
        Admit { inner, admission: Arc::clone(&self.0) }
    }
}

/// See the module's documentation.
#[derive(Clone, Debug)]
pub(crate) struct Admit<S> {
    inner: S,
    admission: Arc<Admission>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Body>> for Admit<S>
where
    S: Service<Request<Admitted>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // The inner service is made ready for each request in `call`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let admission = Arc::clone(&self.admission);
        // The stream is open on its connection until its response has been
        // sent, or it was reset (see `connection.rs`, idle connections).
        let stream = request.extensions().get::<Peer>().map(Peer::open_stream);
        Box::pin(async move {
            let response = admit(inner, admission, request).await?;
            Ok(match stream {
                Some(stream) => response.map(|body| Body::new(Tracked { body, _stream: stream })),
                None => response,
            })
        })
    }
}

/// Admits `request` (see the module's documentation) and answers it with `inner`.
async fn admit<S>(inner: S, admission: Arc<Admission>, request: Request<Body>) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Admitted>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
{
    let deadline = Instant::now() + admission.timeout;
    let Some(share) = admission.enter(client(&request)) else {
        let refusal = format!(
            "this client is sending {} requests at once, the most one client may: \
             retry once one has arrived",
            admission.per_client
        );
        return Ok(Status::resource_exhausted(refusal).into_http());
    };
    let place = match tokio::time::timeout_at(deadline, Arc::clone(&admission.places).acquire_owned()).await {
        Ok(Ok(place)) => place,
        // Never closed; or no place freed in time.
        Ok(Err(_)) | Err(_) => {
            let refusal = format!(
                "the server is receiving {} requests at once, as many as it takes, and none \
                 arrived within {:?}: retry later",
                admission.total, admission.timeout
            );
            return Ok(Status::resource_exhausted(refusal).into_http());
        }
    };
    // Closed once the body has arrived, or was dropped: the place is free then.
    let (held, arrived) = oneshot::channel::<Never>();
    let request = request.map(|body| Admitted { body, held: Some((place, share, held)) });
    let mut answer = std::pin::pin!(inner.oneshot(request));
    tokio::select! {
        biased;
        answer = &mut answer => return answer,
        _ = arrived => (),
        () = tokio::time::sleep_until(deadline) => {
            // Still arriving: the handler, decoding it, is dropped with it.
            let message = format!("the request did not arrive within {:?}", admission.timeout);
            return Ok(Status::cancelled(message).into_http());
        }
    }
    answer.await
}

/// Who `request` counts against (see the module's documentation).
fn client<B>(request: &Request<B>) -> Option<Client> {
    Client::of(request.extensions().get())
}

/// Never sent: a channel that only closes.
enum Never {}

/// A request's body, holding its place (and the sender whose closing tells
/// [`Admit`] so) until it has arrived, or is dropped.
pub(crate) struct Admitted {
    body: Body,
    held: Option<(OwnedSemaphorePermit, Share, oneshot::Sender<Never>)>,
}

impl HttpBody for Admitted {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        match &frame {
            Poll::Ready(None | Some(Err(_))) => this.held = None,
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.held = None,
            Poll::Ready(Some(Ok(_))) | Poll::Pending => (),
        }
        frame.map_err(|error| Status::from_error(Box::new(error)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(total: usize, per_client: usize) -> Arc<Admission> {
        Admission::new(&Limits {
            max_requests_in_flight: total,
            max_requests_in_flight_per_client: per_client,
            ..Limits::default()
        })
    }

    #[test]
    fn a_client_has_its_share_and_no_more_until_one_ends() {
        let admission = admission(8, 2);
        let a = || Some(Client::Connection("127.0.0.1:1".parse().expect("an address")));
        let b = || Some(Client::Connection("127.0.0.1:2".parse().expect("an address")));
        let first = admission.enter(a()).expect("a's first");
        let _second = admission.enter(a()).expect("a's second");
        assert!(admission.enter(a()).is_none(), "a third of a's");
        let _other = admission.enter(b()).expect("b's are b's own");
        // Unix socket callers are counted in all only.
        let local: Vec<Share> = (0..5).map(|_| admission.enter(None).expect("a local caller")).collect();
        drop(first);
        let _third = admission.enter(a()).expect("a's third, once one ended");
        drop(local);
        drop(_other);
        assert_eq!(admission.by_client.lock().len(), 1, "a client with nothing counted is forgotten");
    }
}
