//! Leader election on an etcd lease: one holder at a time among the processes
//! campaigning under one name.
//!
//! A campaign grants a lease with a time to live, keeps it alive in the
//! background, and asks etcd's election service to make it the leader, which
//! resolves once every earlier candidate's key is gone. The leader key lives
//! as long as the lease: when the holder resigns or is dropped the lease is
//! revoked and the next candidate takes over at once; when the holder dies (or
//! loses etcd) the lease expires after its time to live and the next candidate
//! takes over then. A holder learns that it lost leadership through
//! [`Leadership::lost`]: its lease could not be renewed in time, or its key
//! was deleted. A holder cut off from etcd learns it before etcd can let its
//! lease expire: it counts the lease's time to live from when it sent each
//! renewal, and a timer of its own gives up at that deadline, less a tenth of
//! the time to live, however long its attempts to reach etcd hang.
//!
//! [`LeaderElection::run`] builds on that to run a controller runtime only
//! while leading. Invariant: at most one runtime of the loop exists at a time,
//! and it is shut down (its controllers stopped) before leadership is resigned
//! or campaigned for again, so a graceful handover never overlaps.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cosi::backoff::{Backoff, BackoffOptions};
use cosi::runtime::{Runtime, RuntimeError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::proto::etcdserverpb::WatchCreateRequest;
use crate::client::proto::mvccpb::event::EventType;
use crate::client::proto::v3electionpb::LeaderKey;
use crate::client::{Client, EtcdError, KeepAlive};
use crate::state::EtcdState;

/// Settings of a [`LeaderElection`].
#[derive(Clone, Debug)]
pub struct ElectionOptions {
    /// The lease's time to live: how long a dead holder keeps leadership. Whole seconds, at least one.
    pub ttl: Duration,
}

impl Default for ElectionOptions {
    /// A time to live of 5 s.
    fn default() -> Self {
        ElectionOptions { ttl: Duration::from_secs(5) }
    }
}

/// An error of a leader election.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// etcd failed or could not be reached.
    #[error("leader election {name:?}: {source}")]
    Etcd {
        /// The election.
        name: String,
        /// What etcd said.
        source: EtcdError,
    },
    /// etcd elected this candidate without naming its leader key.
    #[error("leader election {name:?}: etcd answered the campaign without a leader key")]
    NoLeaderKey {
        /// The election.
        name: String,
    },
    /// The runtime [`LeaderElection::run`] was given could not be built or started.
    #[error("leader election {name:?}: the runtime did not start: {source}")]
    Runtime {
        /// The election.
        name: String,
        /// Why the runtime refused.
        source: RuntimeError,
    },
}

/// Campaigns for leadership under one name, as one candidate.
#[derive(Clone)]
pub struct LeaderElection {
    client: Client,
    name: String,
    key: String,
    identity: String,
    options: ElectionOptions,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl EtcdState {
    /// The election `name` under this state's prefix, with this process as the
    /// candidate `identity` (what [`LeaderElection::leader`] reports while it leads).
    pub fn election(&self, name: &str, identity: impl Into<String>, options: ElectionOptions) -> LeaderElection {
        LeaderElection {
            client: self.client.clone(),
            name: name.to_owned(),
            key: self.keys.election(name),
            identity: identity.into(),
            options,
        }
    }
}

impl LeaderElection {
    fn error(&self, source: EtcdError) -> ElectionError {
        ElectionError::Etcd { name: self.name.clone(), source }
    }

    /// Waits until this candidate holds leadership.
    ///
    /// Dropping the future gives the candidacy up: its lease is revoked.
    pub async fn campaign(&self) -> Result<Leadership, ElectionError> {
        let ttl = self.options.ttl.as_secs().max(1);
        // etcd starts the lease's clock somewhere between the request and the answer.
        let granted = Instant::now();
        let lease =
            self.client.lease_grant(i64::try_from(ttl).unwrap_or(i64::MAX)).await.map_err(|err| self.error(err))?;
        // Revokes the lease unless the campaign succeeds.
        let mut guard = Revoke(Some((self.client.clone(), lease)));
        let (lost_tx, lost) = watch::channel(false);
        let lost_tx = Arc::new(lost_tx);
        let keeper = tokio::spawn(keep_alive(
            self.client.clone(),
            self.name.clone(),
            lease,
            Duration::from_secs(ttl),
            granted,
            Arc::clone(&lost_tx),
        ));
        let keeper = AbortOnDrop(keeper);

        let response = self.client.campaign(&self.key, lease, &self.identity).await.map_err(|err| self.error(err))?;
        let leader = response.leader.ok_or_else(|| ElectionError::NoLeaderKey { name: self.name.clone() })?;
        let revision = response.header.map_or(0, |header| header.revision);
        let observer = AbortOnDrop(tokio::spawn(watch_key(
            self.client.clone(),
            self.name.clone(),
            leader.clone(),
            revision,
            Duration::from_secs(ttl),
            lost_tx,
        )));
        guard.0 = None;
        Ok(Leadership {
            client: self.client.clone(),
            name: self.name.clone(),
            leader,
            lease,
            lost,
            _tasks: [keeper, observer],
        })
    }

    /// Runs a controller runtime only while this candidate leads, until
    /// `shutdown` completes.
    ///
    /// In a loop: campaign; once leading, `build` a fresh [`Runtime`] (one
    /// runtime runs only once) and start it; when leadership is
    /// [lost](Leadership::lost), shut the runtime down and campaign again.
    /// When `shutdown` completes, the runtime is shut down first and
    /// leadership resigned after, so the next candidate takes over at once
    /// and never runs beside this one; then `run` returns `Ok(())`.
    ///
    /// Replicas of one control plane each call `run` with the same election
    /// name and the same controllers: one runs them, the others wait, and
    /// when the holder dies the next takes over once its lease expires
    /// ([`ElectionOptions::ttl`]). What the controllers wrote is in etcd, so
    /// the new holder carries on from there.
    ///
    /// A holder cut off from etcd starts stopping its runtime a tenth of the
    /// time to live before etcd can let its lease expire, but a reconcile in
    /// progress stops only at its next await: when that takes longer, the old
    /// and the new holder may overlap for the rest. Controllers that must
    /// never overlap fence their writes with [`Leadership::lease`] instead.
    ///
    /// A campaign that fails (etcd unreachable, say) is retried with a
    /// backoff that grows to the time to live, with jitter, and logged as a warning: a
    /// replica cut off from etcd stays a candidate and leads again once etcd
    /// is back.
    ///
    /// # Errors
    ///
    /// A runtime that `build` or `start` refused ([`ElectionError::Runtime`]),
    /// after leadership was given up; or an etcd failure while resigning at
    /// the end (the lease then expires after its time to live).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use cosi::prelude::*;
    /// use cosi_etcd::{ElectionOptions, EtcdState, Options};
    ///
    /// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// # #[resource(type = "Things.example.org", namespace = "default")]
    /// # struct Thing {}
    /// # #[controller(outputs = [Exclusive<Thing>], inventory = false)]
    /// # async fn my_controller(_ctx: &mut Ctx) -> cosi::Result<()> { Ok(()) }
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let state = EtcdState::connect(&["http://127.0.0.1:2379"], Options::prefix("/my-control-plane")).await?;
    /// let identity = std::env::var("HOSTNAME").unwrap_or_else(|_| "replica".into());
    /// let election = state.election("controllers", identity, ElectionOptions { ttl: Duration::from_secs(5) });
    /// let build = || {
    ///     let runtime = Runtime::new(state.clone());
    ///     runtime.register(my_controller {})?;
    ///     Ok(runtime)
    /// };
    /// // Runs the controllers whenever this replica leads, until Ctrl-C.
    /// election.run(build, async { tokio::signal::ctrl_c().await.ok(); }).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<B, S>(&self, mut build: B, shutdown: S) -> Result<(), ElectionError>
    where
        B: FnMut() -> Result<Runtime, RuntimeError>,
        S: Future,
    {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut retry = self.campaign_backoff();
        loop {
            let campaign = tokio::select! {
                biased;
                _ = &mut shutdown => return Ok(()),
                campaign = self.campaign() => campaign,
            };
            let leadership = match campaign {
                Ok(leadership) => leadership,
                Err(error) => {
                    let delay = retry.next_delay();
                    tracing::warn!(election = %self.name, identity = %self.identity, %error, "campaign failed: retrying in {delay:?}");
                    tokio::select! {
                        biased;
                        _ = &mut shutdown => return Ok(()),
                        () = tokio::time::sleep(delay) => (),
                    }
                    continue;
                }
            };
            retry.reset();
            tracing::info!(election = %self.name, identity = %self.identity, "leading: starting the runtime");
            let runtime = match build() {
                Ok(runtime) => runtime,
                Err(source) => return self.give_up(leadership, source).await,
            };
            if let Err(source) = runtime.start() {
                runtime.shutdown().await;
                return self.give_up(leadership, source).await;
            }
            tokio::select! {
                biased;
                _ = &mut shutdown => {
                    runtime.shutdown().await;
                    return leadership.resign().await;
                }
                () = leadership.lost() => {
                    tracing::warn!(election = %self.name, identity = %self.identity, "leadership lost: stopping the runtime");
                    runtime.shutdown().await;
                }
            }
        }
    }

    /// The waits between failed campaigns: [`CAMPAIGN_RETRY`], doubled up to
    /// the time to live, ±50 % so that replicas cut off together do not
    /// campaign in step.
    fn campaign_backoff(&self) -> Backoff {
        let max = self.options.ttl.max(CAMPAIGN_RETRY);
        Backoff::new(BackoffOptions { initial: CAMPAIGN_RETRY, multiplier: 2.0, jitter: 0.5, max })
    }

    /// Resigns after the runtime refused, and reports the refusal.
    async fn give_up(&self, leadership: Leadership, source: RuntimeError) -> Result<(), ElectionError> {
        // The refusal is the error worth reporting; the lease expires anyway if resigning fails.
        let _ = leadership.resign().await;
        Err(ElectionError::Runtime { name: self.name.clone(), source })
    }

    /// The identity of the current leader, if any.
    pub async fn leader(&self) -> Result<Option<String>, ElectionError> {
        match self.client.leader(&self.key).await {
            Ok(response) => Ok(response.kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned())),
            // etcd answers "no leader" as an error.
            Err(err) if err.status().is_some_and(|status| status.message().contains("no leader")) => Ok(None),
            Err(err) => Err(self.error(err)),
        }
    }
}

/// The first wait before a failed campaign of [`LeaderElection::run`] is retried.
const CAMPAIGN_RETRY: Duration = Duration::from_millis(100);

/// Leadership, held until it is lost, resigned or dropped (which resigns).
pub struct Leadership {
    client: Client,
    name: String,
    leader: LeaderKey,
    lease: i64,
    lost: watch::Receiver<bool>,
    _tasks: [AbortOnDrop; 2],
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership").field("name", &self.name).field("lease", &self.lease).finish_non_exhaustive()
    }
}

impl Leadership {
    /// Whether leadership is still held, as far as this process knows.
    pub fn is_held(&self) -> bool {
        !*self.lost.borrow()
    }

    /// The etcd lease that holds leadership: writes that must only happen while
    /// leading can compare it in their own transactions (fencing).
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// Resolves when leadership is lost: the lease could not be renewed before
    /// etcd could let it expire (this resolves a tenth of the time to live
    /// earlier, so that the holder stops before another candidate can lead),
    /// or the leader key was deleted. The future owns what it needs,
    /// so it can be selected on next to the work that leadership guards.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut lost = self.lost.clone();
        async move {
            // An error means the sender is gone, which only happens once the tasks stop: lost too.
            let _ = lost.wait_for(|lost| *lost).await;
        }
    }

    /// Gives leadership up now, so the next candidate takes over at once.
    pub async fn resign(mut self) -> Result<(), ElectionError> {
        let error = |source| ElectionError::Etcd { name: self.name.clone(), source };
        let result = self.client.resign(self.leader.clone()).await.map_err(error);
        let revoked = self.client.lease_revoke(self.lease).await;
        self.lease = 0;
        result?;
        revoked.map_err(|source| ElectionError::Etcd { name: self.name.clone(), source })
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if self.lease != 0 {
            drop(Revoke(Some((self.client.clone(), self.lease))));
        }
    }
}

/// Revokes a lease when dropped, in the background, if a runtime is there to do it.
struct Revoke(Option<(Client, i64)>);

impl Drop for Revoke {
    fn drop(&mut self) {
        if let Some((client, lease)) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = client.lease_revoke(lease).await;
            });
        }
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews the lease every third of its time to live; reports loss once etcd
/// may have let it expire, less [`expiry_margin`], or when etcd says it did.
///
/// The lease's clock starts when a renewal (or the grant, at `granted`) is
/// sent: etcd restarts its own count somewhere between the request and the
/// answer, so a deadline counted from the request is never later than
/// etcd's, while one counted from the answer can be late by the answer's
/// delay. Every attempt (opening a stream, renewing, the waits between them)
/// races a timer to that deadline: an attempt on a connection that is never
/// answered takes its whole timeout, so a deadline checked only between
/// attempts would be noticed up to a timeout late.
async fn keep_alive(
    client: Client,
    name: String,
    lease: i64,
    ttl: Duration,
    granted: Instant,
    lost: Arc<watch::Sender<bool>>,
) {
    // Without a representable deadline, none is trusted: give up at once. etcd
    // grants at most 9,000,000,000 s, so that never happens to a granted lease.
    let mut expires = granted.checked_add(ttl).unwrap_or(granted);
    let mut stream: Option<KeepAlive> = None;
    let mut retry = Backoff::new(BackoffOptions { initial: RENEW_RETRY, multiplier: 2.0, jitter: 0.5, max: ttl / 6 });
    let mut wait = Duration::ZERO;
    loop {
        let give_up = expires.checked_sub(expiry_margin(ttl)).unwrap_or(expires);
        let attempt = async {
            tokio::time::sleep(wait).await;
            let sent = Instant::now();
            (sent, tokio::time::timeout(ttl / 3, renew(&client, lease, &mut stream)).await)
        };
        let (sent, renewed) = tokio::select! {
            biased;
            () = tokio::time::sleep_until(give_up) => break,
            outcome = attempt => outcome,
        };
        match renewed {
            // etcd says the lease is gone: expired or revoked.
            Ok(Ok(remaining)) if remaining <= 0 => break,
            Ok(Ok(remaining)) => {
                // etcd counts the time to live it answers from when it handled
                // the renewal, after `sent`. A deadline past the clock's range
                // keeps the earlier one.
                let lasts = Duration::from_secs(remaining.unsigned_abs());
                expires = sent.checked_add(lasts).unwrap_or(expires);
                retry.reset();
                wait = ttl / 3;
            }
            // Failed or timed out: a stream may be broken, so the next attempt opens another.
            failed => {
                stream = None;
                wait = retry.next_delay();
                let error = match failed {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("etcd did not answer within {:?}", ttl / 3),
                };
                tracing::warn!(election = %name, lease, %error, delay = ?wait, "renewing the leader's lease failed; retrying");
            }
        }
    }
    let _ = lost.send(true);
}

/// Renews `lease` once, on `stream`, opening it first when there is none.
async fn renew(client: &Client, lease: i64, stream: &mut Option<KeepAlive>) -> Result<i64, EtcdError> {
    let keeper = match stream {
        Some(keeper) => keeper,
        // Opening the stream sends the first renewal.
        None => stream.insert(client.lease_keep_alive(lease).await?),
    };
    keeper.renew().await
}

/// How long before etcd may let a lease expire its holder gives it up: a
/// tenth of its time to live. The holder's timer may wake late on a busy
/// machine or run slow against etcd's clock, and the holder needs a moment
/// to act on the loss before the next candidate can lead.
fn expiry_margin(ttl: Duration) -> Duration {
    ttl / 10
}

/// The first wait before a failed renewal is attempted again; it doubles up
/// to a sixth of the time to live, so that a few attempts fit before the
/// deadline, ±50 %.
const RENEW_RETRY: Duration = Duration::from_millis(100);

/// Reports loss when the leader key is deleted, or no longer holds this
/// candidate's campaign.
///
/// The watch starts after the campaign's revision. Whenever it breaks, the
/// key is read again, at the current revision, and watched after that read,
/// rather than resumed after the last revision the watch saw: etcd may have
/// compacted the revisions in between (during a disconnect, say). Compacted
/// past that revision, etcd cancels a watch resumed there, at every reopen,
/// so the key would never be read again; compacted at the key's deletion
/// itself, etcd drops the deletion from its history, and a watch resumed
/// there waits for an event that never comes.
///
/// Each break is logged with what broke it, and the reads and watches after
/// it are spaced by a backoff ([`rewatch_backoff`]), reset once a watch works.
async fn watch_key(
    client: Client,
    name: String,
    leader: LeaderKey,
    revision: i64,
    ttl: Duration,
    lost: Arc<watch::Sender<bool>>,
) {
    let mut next = revision.saturating_add(1);
    let mut retry = Backoff::new(rewatch_backoff(ttl));
    // Why the last watch ended; `None` before the first.
    let mut broke: Option<String> = None;
    loop {
        if let Some(error) = broke.take() {
            let delay = retry.next_delay();
            tracing::warn!(election = %name, %error, ?delay, "the leader key's watch broke; reading the key again");
            tokio::time::sleep(delay).await;
            match still_held(&client, &leader).await {
                Ok(Some(revision)) => next = revision.saturating_add(1),
                Ok(None) => break,
                Err(error) => {
                    broke = Some(format!("cannot read the leader key: {error}"));
                    continue;
                }
            }
        }
        let create = WatchCreateRequest { key: leader.key.clone(), start_revision: next, ..Default::default() };
        let mut stream = match client.watch(create).await {
            Ok(stream) => stream,
            Err(error) => {
                broke = Some(format!("cannot watch the leader key: {error}"));
                continue;
            }
        };
        broke = Some(loop {
            match stream.message().await {
                Ok(Some(response)) => {
                    if response
                        .events
                        .iter()
                        .any(|event| matches!(crate::watch::event_type(event), Ok(EventType::Delete)))
                    {
                        let _ = lost.send(true);
                        return;
                    }
                    if response.canceled {
                        break format!("etcd cancelled the watch: {}", response.cancel_reason);
                    }
                    // The watch works: the next break starts the backoff over.
                    retry.reset();
                }
                Ok(None) => break "etcd ended the watch".to_owned(),
                Err(error) => break error.to_string(),
            }
        });
    }
    let _ = lost.send(true);
}

/// The waits before the leader key is read again after its watch broke:
/// [`REWATCH_RETRY`], doubled up to a third of the time to live (the renewal
/// cadence), ±50 %, so that a deletion made while etcd was away is noticed
/// soon after it is back, and candidates cut off together do not retry in step.
fn rewatch_backoff(ttl: Duration) -> BackoffOptions {
    BackoffOptions { initial: REWATCH_RETRY, multiplier: 2.0, jitter: 0.5, max: (ttl / 3).max(REWATCH_RETRY) }
}

/// The revision at which the leader key was read holding `leader`'s campaign
/// (the same creation and lease); `None` when it is gone or was written anew.
async fn still_held(client: &Client, leader: &LeaderKey) -> Result<Option<i64>, EtcdError> {
    let response = client.get(leader.key.clone()).await?;
    let ours = response.kvs.first().is_some_and(|kv| kv.create_revision == leader.rev && kv.lease == leader.lease);
    if !ours {
        return Ok(None);
    }
    match response.header {
        Some(header) => Ok(Some(header.revision)),
        None => Err(EtcdError::response("KV.Range", "etcd answered without a header")),
    }
}

/// The first wait before the leader key is read again and its watch reopened.
const REWATCH_RETRY: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::client::Connection;

    /// The log lines of one test, on its thread.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Logs {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock()).into_owned()
        }
    }

    /// A duration as `Debug` writes it (`104.2ms`, `1.5s`, `850µs`).
    fn parse_duration(text: &str) -> Option<Duration> {
        let number = |suffix: &str| text.strip_suffix(suffix).and_then(|number| number.parse::<f64>().ok());
        [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
            .into_iter()
            .find_map(|(suffix, unit)| number(suffix).map(|value| Duration::from_secs_f64(value * unit)))
    }

    /// With etcd unreachable, the leader key's watch breaks again and again:
    /// each break is logged as a warning with what broke it, and the waits
    /// between attempts grow.
    #[tokio::test(flavor = "current_thread")]
    async fn a_broken_leader_key_watch_is_logged_and_retried_with_growing_delays() {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber =
            tracing_subscriber::fmt().with_ansi(false).without_time().with_writer(move || writer.clone()).finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        // A port nobody listens on: every call fails at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let connection = Connection { connect_timeout: Duration::from_secs(1), tls: None, credentials: None };
        let client = Client::connect(&[format!("http://127.0.0.1:{port}")], connection).await.expect("a client");
        let (lost, _held) = watch::channel(false);
        let leader = LeaderKey { key: b"/cosi/election/controllers".to_vec(), ..LeaderKey::default() };
        let watching = watch_key(client, "controllers".into(), leader, 1, Duration::from_secs(30), Arc::new(lost));

        let delays = || -> Vec<Duration> {
            logs.text()
                .lines()
                .filter(|line| line.contains("the leader key's watch broke"))
                .filter_map(|line| line.split("delay=").nth(1)?.split_whitespace().next().and_then(parse_duration))
                .collect()
        };
        let four = async {
            while delays().len() < 4 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        // A guard against a hang, not a measurement: four waits take about 1.5 s.
        tokio::select! {
            () = watching => panic!("the watch of a key nobody can read ended"),
            done = tokio::time::timeout(Duration::from_secs(60), four) => {
                done.unwrap_or_else(|_| panic!("no four retries logged within a minute:\n{}", logs.text()));
            }
        }
        let text = logs.text();
        assert!(text.contains("WARN") && text.contains("election=controllers"), "{text}");
        assert!(text.contains("cannot watch the leader key") || text.contains("cannot read the leader key"), "{text}");
        assert!(text.contains("Connection refused") || text.contains("connect"), "the cause is logged: {text}");
        let delays = delays();
        // ±50 % jitter around 100, 200, 400, 800 ms: the fourth is always longer than the first.
        assert!(delays[3] > delays[0], "the delays do not grow: {delays:?}");
        assert!(delays.iter().all(|delay| *delay <= Duration::from_secs(10)), "{delays:?}");
    }
}
