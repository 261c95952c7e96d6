//! The gRPC path: a `cosi_grpc::Client` and a `cosi_grpc::Server` serving the
//! memory state, both on the seed's runtime, connected by in-memory pipes
//! (tokio's `duplex`) that the faults cut and refuse.
//!
//! The server takes its connections from a channel
//! (`Server::serve_incoming`); the client's channel dials through a
//! connector that makes a pipe and sends its other end there. Every pipe of
//! a connection shares one [`Link`]: cutting it makes both ends fail at once,
//! so calls in flight fail and watch streams break, as a dropped connection
//! does. tonic reconnects on the next call; while the network refuses, that
//! call fails.
//!
//! Nothing here waits on a real clock: the server's keepalive (hyper measures
//! it against the wall clock) and request timeout are set beyond any run, and the client's
//! endpoint has tonic's defaults, which set no timeout and no keepalive.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cosi::state::State;
use cosi_grpc::{Client, Limits, RetryOptions, Server};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::faults::Faults;
use crate::trace::Trace;

/// Bytes a pipe buffers each way before its writer waits.
const PIPE_BUFFER: usize = 64 << 10;

/// The longest wait of a broken watch between two attempts to resume.
///
/// The runtime cannot tell when a remote watch is resuming (the client
/// reports no progress), so `settled` may return while events are on their
/// way; once the network works again, they arrive within this.
pub const RESUME_MAX_DELAY: Duration = Duration::from_secs(5);

/// The connections between the client and the server.
pub struct Network {
    faults: Arc<Faults>,
    trace: Arc<Trace>,
    /// The server's ends of new connections.
    incoming: mpsc::UnboundedSender<Result<Pipe, io::Error>>,
    links: Mutex<Links>,
}

#[derive(Default)]
struct Links {
    /// Connections so far, which numbers the next one.
    opened: u64,
    /// The connections that may still be open.
    open: Vec<Arc<Link>>,
    /// While faults are on, connections are refused until then.
    refused_until: Option<Instant>,
}

impl Network {
    /// Serves `state` on the current runtime and returns a client of it,
    /// with the network between them.
    pub fn serve(state: Arc<dyn State>, faults: &Arc<Faults>, trace: &Arc<Trace>) -> (Arc<Network>, Client) {
        let (incoming, connections) = mpsc::unbounded_channel();
        let network = Arc::new(Network {
            faults: Arc::clone(faults),
            trace: Arc::clone(trace),
            incoming,
            links: Mutex::default(),
        });
        // A ping every day: hyper times keepalive against the wall clock. And
        // no call is cut short by a request timeout on a simulated clock.
        let day = Duration::from_secs(24 * 60 * 60);
        let limits =
            Limits { keepalive_interval: day, keepalive_timeout: day, request_timeout: day, ..Limits::default() };
        let connections = futures_util::stream::unfold(connections, |mut connections| async move {
            connections.recv().await.map(|pipe| (pipe, connections))
        });
        tokio::spawn(Server::new(state).limits(limits).serve_incoming(connections));

        let dialer = Arc::clone(&network);
        // The URI is required by the API but unused: the connector makes a pipe.
        let channel = tonic::transport::Endpoint::from_static("http://simulation").connect_with_connector_lazy(
            tower::service_fn(move |_| {
                let connected = dialer.connect().map(TokioIo::new);
                std::future::ready(connected)
            }),
        );
        // A watch gives up after 3 s of failed resumes (it ends with an
        // error, and its reader starts over), so that the simulation reaches
        // that path too.
        let retry = RetryOptions {
            max_delay: RESUME_MAX_DELAY,
            max_elapsed: Duration::from_secs(3),
            ..RetryOptions::default()
        };
        (network, Client::from_channel(channel).with_retry(retry))
    }

    /// A new connection, unless the network refuses it.
    fn connect(&self) -> io::Result<Pipe> {
        let mut links = self.links.lock();
        let now = Instant::now();
        let refused = match links.refused_until {
            Some(until) if self.faults.active() && now < until => true,
            _ => match self.faults.refusal() {
                Some(outage) => {
                    links.refused_until = Some(now + outage);
                    true
                }
                None => false,
            },
        };
        if refused {
            self.trace.log("network: connection refused");
            return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "injected: connection refused"));
        }
        links.opened += 1;
        let link = Arc::new(Link { number: links.opened, cut: AtomicBool::new(false), wakers: Mutex::default() });
        links.open.retain(|link| !link.cut.load(Ordering::SeqCst));
        links.open.push(Arc::clone(&link));
        let (client, server) = tokio::io::duplex(PIPE_BUFFER);
        self.trace.log(format_args!("network: connection {} opens", link.number));
        self.incoming
            .send(Ok(Pipe { io: server, link: Arc::clone(&link) }))
            .map_err(|_| io::Error::new(io::ErrorKind::ConnectionRefused, "the server has stopped"))?;
        Ok(Pipe { io: client, link })
    }

    /// While faults are on, cuts a connection now and then.
    pub async fn cut_connections(self: Arc<Self>) {
        while let Some(pause) = self.faults.next_cut() {
            tokio::time::sleep(pause).await;
            if !self.faults.active() {
                return;
            }
            let link = {
                let links = self.links.lock();
                links.open.iter().rev().find(|link| !link.cut.load(Ordering::SeqCst)).cloned()
            };
            if let Some(link) = link {
                self.trace.log(format_args!("fault: network: connection {} is cut", link.number));
                link.cut();
            }
        }
    }
}

/// What both ends of one connection share.
struct Link {
    number: u64,
    cut: AtomicBool,
    /// The tasks waiting on either end, woken by a cut.
    wakers: Mutex<Vec<Waker>>,
}

impl Link {
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for waker in self.wakers.lock().drain(..) {
            waker.wake();
        }
    }

    /// An error once the link is cut; until then, a cut wakes `cx`.
    fn check(&self, cx: &Context<'_>) -> io::Result<()> {
        let mut wakers = self.wakers.lock();
        if self.cut.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::ConnectionReset, "injected: the connection was cut"));
        }
        if !wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Ok(())
    }
}

/// One end of a connection.
pub struct Pipe {
    io: DuplexStream,
    link: Arc<Link>,
}

impl tonic::transport::server::Connected for Pipe {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Pipe {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Err(error) = self.link.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Err(error) = self.link.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Err(error) = self.link.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
