//! The two bidirectional streams: a watch, and a lease's keep-alive.
//!
//! Each holds the sending half of its request stream for as long as it
//! lives: etcd ends a watch whose client stopped sending, and dropping the
//! stream is how a watch or a keep-alive is given up.

use futures_util::Stream;
use tokio::sync::mpsc;
use tonic::Streaming;

use super::proto::etcdserverpb::lease_client::LeaseClient;
use super::proto::etcdserverpb::watch_client::WatchClient;
use super::proto::etcdserverpb::watch_request::RequestUnion;
use super::proto::etcdserverpb::{
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, WatchCreateRequest, WatchRequest, WatchResponse,
};
use super::{Client, EtcdError, MAX_MESSAGE_SIZE, MAX_WATCH_RESPONSE, Token, request, token_refusal};

const WATCH: &str = "Watch.Watch";
const KEEP_ALIVE: &str = "Lease.LeaseKeepAlive";

/// One etcd watch: the responses to one create request.
pub(crate) struct WatchStream {
    /// Kept open: etcd cancels the watch when the client's side of the stream ends.
    _requests: mpsc::Sender<WatchRequest>,
    responses: Streaming<WatchResponse>,
    /// A response read while opening that the reader has not had yet.
    pending: Option<WatchResponse>,
}

impl WatchStream {
    /// The next response, whole: the fragments etcd split a large one into are
    /// joined again. `None` when etcd ended the stream.
    pub(crate) async fn message(&mut self) -> Result<Option<WatchResponse>, EtcdError> {
        let mut response = match self.pending.take() {
            Some(response) => response,
            None => match self.responses.message().await.map_err(EtcdError::status_of(WATCH))? {
                Some(response) => response,
                None => return Ok(None),
            },
        };
        // Every fragment but the last says more follow; the events are simply concatenated.
        let mut size = prost::Message::encoded_len(&response);
        while response.fragment {
            let Some(next) = self.responses.message().await.map_err(EtcdError::status_of(WATCH))? else {
                return Err(EtcdError::response(WATCH, "the stream ended inside a fragmented response"));
            };
            join(&mut response, &mut size, next, MAX_WATCH_RESPONSE)?;
        }
        Ok(Some(response))
    }
}

/// Adds the fragment `next` to `response`, whose fragments so far take `size`
/// bytes; refuses to grow it past `limit`.
fn join(response: &mut WatchResponse, size: &mut usize, next: WatchResponse, limit: usize) -> Result<(), EtcdError> {
    *size = size.saturating_add(prost::Message::encoded_len(&next));
    if *size > limit {
        return Err(EtcdError::TooLarge { call: WATCH, limit });
    }
    response.events.extend(next.events);
    response.fragment = next.fragment;
    response.header = next.header.or(response.header.take());
    Ok(())
}

/// Keeps one lease alive, one renewal at a time.
pub(crate) struct KeepAlive {
    id: i64,
    requests: mpsc::Sender<LeaseKeepAliveRequest>,
    responses: Streaming<LeaseKeepAliveResponse>,
    /// The renewal sent when the stream opened has not been answered yet.
    first_unanswered: bool,
}

impl KeepAlive {
    /// Renews the lease; its new time to live in seconds, 0 or less when etcd no longer has it.
    pub(crate) async fn renew(&mut self) -> Result<i64, EtcdError> {
        if !std::mem::take(&mut self.first_unanswered) {
            self.requests
                .send(LeaseKeepAliveRequest { id: self.id })
                .await
                .map_err(|_| EtcdError::response(KEEP_ALIVE, "the stream is closed"))?;
        }
        match self.responses.message().await.map_err(EtcdError::status_of(KEEP_ALIVE))? {
            Some(response) => Ok(response.ttl),
            None => Err(EtcdError::response(KEEP_ALIVE, "etcd ended the stream")),
        }
    }
}

impl Client {
    /// Opens a watch, once etcd has confirmed it.
    ///
    /// A watch etcd refuses for its token is opened again with a fresh token;
    /// one it cancels for another reason (a compacted start revision, say) is
    /// returned with that cancellation as its first response, for the reader
    /// to handle as it handles a cancellation later on.
    pub(crate) async fn watch(&self, create: WatchCreateRequest) -> Result<WatchStream, EtcdError> {
        self.authorized(|token| self.open_watch(create.clone(), token)).await
    }

    async fn open_watch(&self, create: WatchCreateRequest, token: Option<Token>) -> Result<WatchStream, EtcdError> {
        let (requests, receiver) = mpsc::channel(1);
        let create = WatchRequest { request_union: Some(RequestUnion::CreateRequest(create)) };
        requests.try_send(create).map_err(|_| EtcdError::response(WATCH, "cannot queue the create request"))?;
        let responses = WatchClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
            .watch(request(receiver_stream(receiver), token.as_ref()))
            .await
            .map_err(EtcdError::status_of(WATCH))?
            .into_inner();
        let mut stream = WatchStream { _requests: requests, responses, pending: None };
        let Some(first) = stream.responses.message().await.map_err(EtcdError::status_of(WATCH))? else {
            return Err(EtcdError::response(WATCH, "etcd ended the stream before confirming the watch"));
        };
        if first.canceled && token_refusal(&first.cancel_reason) {
            // As a status, so that `authorized` sees a refused token and retries.
            return Err(EtcdError::Status { call: WATCH, status: tonic::Status::unauthenticated(first.cancel_reason) });
        }
        // A bare confirmation carries nothing for the reader.
        let bare_confirmation = first.created && !first.canceled && first.events.is_empty() && !first.fragment;
        if !bare_confirmation {
            stream.pending = Some(first);
        }
        Ok(stream)
    }

    /// Opens a keep-alive stream for lease `id`, with a first renewal under way.
    pub(crate) async fn lease_keep_alive(&self, id: i64) -> Result<KeepAlive, EtcdError> {
        self.authorized(|token| self.open_keep_alive(id, token)).await
    }

    async fn open_keep_alive(&self, id: i64, token: Option<Token>) -> Result<KeepAlive, EtcdError> {
        let (requests, receiver) = mpsc::channel(1);
        // Sent before the call: etcd sends its response headers with its first
        // answer, and the call only returns once it has them.
        requests
            .try_send(LeaseKeepAliveRequest { id })
            .map_err(|_| EtcdError::response(KEEP_ALIVE, "cannot queue the first renewal"))?;
        let responses = LeaseClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .lease_keep_alive(request(receiver_stream(receiver), token.as_ref()))
            .await
            .map_err(EtcdError::status_of(KEEP_ALIVE))?
            .into_inner();
        Ok(KeepAlive { id, requests, responses, first_unanswered: true })
    }
}

/// The requests queued on `receiver`, as the request stream of a call.
fn receiver_stream<T>(mut receiver: mpsc::Receiver<T>) -> impl Stream<Item = T> + Send + 'static
where
    T: Send + 'static,
{
    futures_util::stream::poll_fn(move |context| receiver.poll_recv(context))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_up_to_the_limit_and_no_further() {
        use crate::client::proto::mvccpb::{Event, KeyValue};

        let fragment = |value: &[u8], more: bool| WatchResponse {
            events: vec![Event {
                kv: Some(KeyValue { value: value.to_vec(), ..KeyValue::default() }),
                ..Event::default()
            }],
            fragment: more,
            ..WatchResponse::default()
        };
        let mut response = fragment(b"a", true);
        let mut size = prost::Message::encoded_len(&response);
        let one = size;
        join(&mut response, &mut size, fragment(b"b", true), 2 * one).unwrap();
        assert_eq!(response.events.len(), 2);
        let err = join(&mut response, &mut size, fragment(b"c", false), 2 * one).unwrap_err();
        assert!(err.too_large(), "{err}");
        assert!(err.to_string().contains(&format!("limit of {} bytes", 2 * one)), "{err}");
        assert_eq!(response.events.len(), 2, "nothing of a refused fragment is kept");
    }

    #[test]
    fn watch_cancellations_for_tokens_are_recognised() {
        assert!(token_refusal("etcdserver: invalid auth token"));
        assert!(!token_refusal("etcdserver: permission denied"));
        assert!(!token_refusal("etcdserver: mvcc: required revision has been compacted"));
    }
}
