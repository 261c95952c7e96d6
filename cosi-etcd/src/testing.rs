//! A throwaway etcd server on loopback, for tests and benchmarks (feature `testing`).
//!
//! [`EtcdServer::start`] runs the `etcd` binary (Debian's `etcd-server`
//! package, or the one `COSI_ETCD_BIN` names) on free ports of 127.0.0.1 with
//! a fresh data directory, on tmpfs when the machine has one. When the binary
//! is missing the test fails and says how to install it; with
//! `COSI_ALLOW_SKIP=1` (and `CI` unset) it returns `None` instead, after
//! printing the skip, and the test returns without running
//! (`cosi::testing::server::missing`).
//!
//! The server runs under a small `sh` guard that reads the test process's end
//! of a pipe: when the test process exits, however it exits, the pipe closes
//! and the guard stops etcd. So a server shared by all tests of a binary
//! ([`EtcdServer::shared`]) stops with the binary, and nothing outlives a run.
//!
//! Two variants secure the server: [`EtcdServer::start_tls`] serves `https`
//! and requires client certificates, from a CA generated for the server
//! (rcgen; no key is committed); [`EtcdServer::start_with_auth`] enables
//! etcd's authentication, set up through its Auth calls. [`EtcdServer::options`]
//! gives the [`Options`] that reach either. [`Raw`] makes the etcd calls that
//! tests make behind a state's back. [`Proxy`] stands between one client and
//! the server, so a test can cut that client off as a network partition
//! would, while other clients keep etcd.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::client::proto::etcdserverpb::request_op::Request;
use crate::client::proto::etcdserverpb::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::client::{Client, ClientCertificate, Connection, Credentials, EtcdError, Tls, prefix_end};
use crate::codec::Keys;
use crate::{EtcdState, Options};

/// What a developer without etcd is told.
pub const INSTALL_HINT: &str = "install etcd to run them (Debian/Ubuntu: `sudo apt-get install etcd-server`), \
     or point COSI_ETCD_BIN at an etcd binary";

/// Stops etcd when its standard input closes, that is when the test process exits
/// or drops the server. Removes the data directory when `COSI_ETCD_REMOVE_DIR` names it.
const GUARD: &str = r#""$@" & pid=$!
cat > /dev/null
kill "$pid" 2> /dev/null
wait "$pid"
if [ -n "$COSI_ETCD_REMOVE_DIR" ]; then rm -rf "$COSI_ETCD_REMOVE_DIR"; fi"#;

/// How long etcd may take to become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The user that servers from [`EtcdServer::start_with_auth`] know: etcd's
/// `root`, the one user it requires before it enables authentication.
pub const ROOT_USER: &str = "root";

/// The password of [`ROOT_USER`]: a throwaway server on loopback needs no secret.
const ROOT_PASSWORD: &str = "cosi-test-password";

/// An etcd server on loopback that this process started. Dropping it stops etcd
/// and removes its data.
#[derive(Debug)]
pub struct EtcdServer {
    binary: PathBuf,
    data: DataDir,
    client_port: u16,
    peer_port: u16,
    /// Where etcd answers its health check: the client port, or a plain
    /// metrics port when the client port speaks TLS.
    health_port: u16,
    security: Security,
    /// Flags given to etcd beyond the ones every test server has.
    extra_args: Vec<String>,
    process: Option<Guarded>,
}

/// How a test server is secured.
#[derive(Clone, Debug)]
enum Security {
    None,
    /// `https`, client certificates required.
    Tls(Box<Pki>),
    /// Authentication enabled, with this user.
    Auth(Credentials),
}

#[derive(Debug)]
enum DataDir {
    Owned(tempfile::TempDir),
    /// Removed by the guard when the process exits.
    Shared(PathBuf),
}

impl DataDir {
    fn path(&self) -> &Path {
        match self {
            DataDir::Owned(dir) => dir.path(),
            DataDir::Shared(path) => path,
        }
    }
}

#[derive(Debug)]
struct Guarded {
    child: Child,
    stdin: ChildStdin,
}

impl EtcdServer {
    /// Starts a server of its own, or returns `None` (after printing why) when
    /// etcd is not installed and skipping is allowed.
    ///
    /// # Panics
    ///
    /// When etcd is missing and skipping is not allowed, or when it does not become healthy.
    pub fn start() -> Option<EtcdServer> {
        Self::start_with(false, Security::None)
    }

    /// Starts a server of its own with more of etcd's flags, such as
    /// `--max-request-bytes=N`; `None` as for [`start`](EtcdServer::start).
    ///
    /// # Panics
    ///
    /// As [`start`](EtcdServer::start).
    pub fn start_with_flags(flags: &[&str]) -> Option<EtcdServer> {
        Self::launch_new(false, Security::None, flags.iter().map(|flag| (*flag).to_owned()).collect())
    }

    /// Starts a server of its own that speaks only TLS and requires a client
    /// certificate (`--client-cert-auth`), with certificates generated for it;
    /// `None` as for [`start`](EtcdServer::start). [`tls`](EtcdServer::tls)
    /// gives what a client needs.
    ///
    /// # Panics
    ///
    /// As [`start`](EtcdServer::start), or when the certificates cannot be generated.
    pub fn start_tls() -> Option<EtcdServer> {
        Self::start_with(false, Security::Tls(Box::new(Pki::generate())))
    }

    /// Starts a server of its own with authentication enabled: only
    /// [`ROOT_USER`] with the password in [`credentials`](EtcdServer::credentials)
    /// may use it. `None` as for [`start`](EtcdServer::start).
    ///
    /// # Panics
    ///
    /// As [`start`](EtcdServer::start), or when etcd refuses the setup.
    pub fn start_with_auth() -> Option<EtcdServer> {
        let credentials = Credentials { user: ROOT_USER.to_owned(), password: ROOT_PASSWORD.to_owned() };
        let mut server = Self::start_with(false, Security::None)?;
        if let Err(reason) = enable_auth(&server.endpoint(), &credentials) {
            panic!("cannot enable authentication on etcd: {reason}");
        }
        server.security = Security::Auth(credentials);
        Some(server)
    }

    /// One server shared by every test of this process, started on first use;
    /// `None` as for [`start`](EtcdServer::start). Tests sharing it keep to key
    /// prefixes of their own.
    pub fn shared() -> Option<&'static EtcdServer> {
        static SHARED: OnceLock<Option<EtcdServer>> = OnceLock::new();
        SHARED.get_or_init(|| Self::start_with(true, Security::None)).as_ref()
    }

    fn start_with(shared: bool, security: Security) -> Option<EtcdServer> {
        Self::launch_new(shared, security, Vec::new())
    }

    fn launch_new(shared: bool, security: Security, extra_args: Vec<String>) -> Option<EtcdServer> {
        let binary = find_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("cosi-etcd-")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::Builder::new().prefix("cosi-etcd-").tempdir())
            .expect("cannot create a data directory for etcd");
        let data = if shared { DataDir::Shared(dir.keep()) } else { DataDir::Owned(dir) };
        let mut server = EtcdServer {
            binary,
            data,
            client_port: 0,
            peer_port: 0,
            health_port: 0,
            security,
            extra_args,
            process: None,
        };
        // A port picked as free may be taken before etcd binds it: try a few times.
        for attempt in 1..=3 {
            server.client_port = free_port();
            server.peer_port = free_port();
            server.health_port = match server.security {
                Security::Tls(_) => free_port(),
                Security::None | Security::Auth(_) => server.client_port,
            };
            match server.launch() {
                Ok(()) => return Some(server),
                Err(reason) if attempt == 3 => panic!("etcd did not start: {reason}"),
                Err(_) => {}
            }
        }
        None
    }

    /// The client URL, `http://127.0.0.1:<port>` (`https://` for [`start_tls`](EtcdServer::start_tls)).
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme(), self.client_port)
    }

    fn scheme(&self) -> &'static str {
        match self.security {
            Security::Tls(_) => "https",
            Security::None | Security::Auth(_) => "http",
        }
    }

    /// What a client of a [`start_tls`](EtcdServer::start_tls) server needs:
    /// the CA, and a client certificate it signed.
    pub fn tls(&self) -> Option<Tls> {
        match &self.security {
            Security::Tls(pki) => Some(pki.client.clone()),
            Security::None | Security::Auth(_) => None,
        }
    }

    /// The user of a [`start_with_auth`](EtcdServer::start_with_auth) server.
    pub fn credentials(&self) -> Option<Credentials> {
        match &self.security {
            Security::Auth(credentials) => Some(credentials.clone()),
            Security::None | Security::Tls(_) => None,
        }
    }

    /// Options that reach this server, whatever its variant, with keys under `prefix`.
    pub fn options(&self, prefix: impl Into<String>) -> Options {
        Options { tls: self.tls(), credentials: self.credentials(), ..Options::prefix(prefix) }
    }

    /// Stops etcd, keeping its data and ports for [`restart`](EtcdServer::restart).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            drop(process.stdin);
            let _ = process.child.wait();
        }
    }

    /// Starts etcd again on the same ports and data, as after a crash or an upgrade.
    ///
    /// # Panics
    ///
    /// When it does not become healthy.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(reason) = self.launch() {
            panic!("etcd did not restart: {reason}");
        }
    }

    fn launch(&mut self) -> Result<(), String> {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("sh")
            .arg(&self.binary)
            .args(["--name", "cosi-test", "--data-dir"])
            .arg(self.data.path().join("data"))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("cosi-test={peer}"), "--initial-cluster-state", "new"])
            .args(["--logger", "zap", "--log-level", "error"])
            .args(&self.extra_args);
        if let Security::Tls(pki) = &self.security {
            let files = pki.write(self.data.path())?;
            command
                .arg("--cert-file")
                .arg(&files.certificate)
                .arg("--key-file")
                .arg(&files.key)
                .arg("--trusted-ca-file")
                .arg(&files.ca)
                .arg("--client-cert-auth")
                // The health check speaks plain HTTP: etcd serves it on its metrics URL too.
                .args(["--listen-metrics-urls", &format!("http://127.0.0.1:{}", self.health_port)]);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        match &self.data {
            DataDir::Shared(path) => command.env("COSI_ETCD_REMOVE_DIR", path),
            DataDir::Owned(_) => command.env_remove("COSI_ETCD_REMOVE_DIR"),
        };
        let mut child = command.spawn().map_err(|err| format!("cannot run sh: {err}"))?;
        let stdin = child.stdin.take().ok_or("no standard input for the guard")?;
        self.process = Some(Guarded { child, stdin });
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if healthy(self.health_port) {
                return Ok(());
            }
            if let Some(process) = &mut self.process
                && let Ok(Some(status)) = process.child.try_wait()
            {
                self.process = None;
                return Err(format!("etcd exited with {status}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        Err(format!("etcd was not healthy after {START_TIMEOUT:?}"))
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The etcd binary, or `None` when it is missing and skipping is allowed.
fn find_binary() -> Option<PathBuf> {
    let candidate = std::env::var_os("COSI_ETCD_BIN").map(PathBuf::from).or_else(|| {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|dir| dir.join("etcd")).find(|path| path.is_file()))
    });
    match candidate {
        Some(path) if path.is_file() => Some(path),
        _ => {
            cosi::testing::server::missing("an etcd server (no etcd binary was found)", INSTALL_HINT);
            None
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot find a free port on 127.0.0.1")
}

/// Whether etcd answers its health check.
fn healthy(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.contains("\"health\":\"true\"")
}

/// A CA, the server certificate it signed for 127.0.0.1, and a client's view.
#[derive(Clone, Debug)]
struct Pki {
    /// The CA and a client certificate it signed: what a client needs.
    client: Tls,
    server_certificate: String,
    server_key: String,
}

/// etcd's TLS files, written into its data directory.
struct ServerFiles {
    ca: PathBuf,
    certificate: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn generate() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "cosi-etcd test CA");
        let ca_pem = ca.self_signed(&ca_key).expect("a self-signed CA").pem();
        let issuer = Issuer::new(ca, ca_key);
        let issue = |names: &[&str], common_name: &str| {
            let key = KeyPair::generate().expect("a key");
            let names = names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
            let mut params = CertificateParams::new(names).expect("certificate parameters");
            params.distinguished_name.push(DnType::CommonName, common_name);
            let certificate = params.signed_by(&key, &issuer).expect("a signed certificate");
            (certificate.pem(), key.serialize_pem())
        };
        // The endpoint's host is an IP address: the certificate names it as one.
        let (server_certificate, server_key) = issue(&["127.0.0.1", "localhost"], "cosi-etcd test server");
        let (certificate, key) = issue(&[], "cosi-etcd test client");
        Pki {
            client: Tls { server_ca: ca_pem, client: Some(ClientCertificate { certificate, key }), server_name: None },
            server_certificate,
            server_key,
        }
    }

    fn write(&self, dir: &Path) -> Result<ServerFiles, String> {
        let files = ServerFiles {
            ca: dir.join("ca.pem"),
            certificate: dir.join("server.pem"),
            key: dir.join("server-key.pem"),
        };
        for (path, contents) in [
            (&files.ca, &self.client.server_ca),
            (&files.certificate, &self.server_certificate),
            (&files.key, &self.server_key),
        ] {
            std::fs::write(path, contents).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        }
        Ok(files)
    }
}

/// Runs `work` on a runtime of its own, in a thread of its own, so that the
/// synchronous constructors can make etcd calls even from inside a test's runtime.
fn on_own_runtime<T: Send + 'static>(
    work: impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<T, String>> + Send>> + Send + 'static,
) -> Result<T, String> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start a runtime: {err}"))?;
        runtime.block_on(work())
    })
    .join()
    .map_err(|_| "the setup thread panicked".to_owned())?
}

/// Makes `credentials` etcd's root user and enables authentication, as
/// `etcdctl user add`, `role add root`, `user grant-role` and `auth enable` do.
fn enable_auth(endpoint: &str, credentials: &Credentials) -> Result<(), String> {
    let (endpoint, credentials) = (endpoint.to_owned(), credentials.clone());
    on_own_runtime(move || {
        Box::pin(async move {
            let connection = Connection { connect_timeout: Duration::from_secs(5), tls: None, credentials: None };
            let setup = async {
                let client = Client::connect(&[endpoint], connection).await?;
                client.user_add(&credentials.user, &credentials.password).await?;
                client.role_add("root").await?;
                client.user_grant_role(&credentials.user, "root").await?;
                client.auth_enable().await
            };
            setup.await.map_err(|err: EtcdError| err.to_string())
        })
    })
}

/// The etcd calls that tests make behind a state's back, on the state's own
/// connection (with its TLS settings and user).
#[derive(Clone)]
pub struct Raw {
    client: Client,
    keys: Keys,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raw").finish_non_exhaustive()
    }
}

impl Raw {
    /// Raw calls on `state`'s connection.
    pub fn new(state: &EtcdState) -> Raw {
        Raw { client: state.client.clone(), keys: state.keys.clone() }
    }

    /// etcd's current revision.
    pub async fn revision(&self) -> Result<i64, EtcdError> {
        let request = RangeRequest { key: vec![0], count_only: true, ..RangeRequest::default() };
        let response = self.client.range(request).await?;
        Ok(response.header.map_or(0, |header| header.revision))
    }

    /// Drops etcd's history before `revision`.
    pub async fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        self.client.compact(revision).await
    }

    /// Writes `value` at `key`, whatever is there.
    pub async fn put(&self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Result<(), EtcdError> {
        let put = RequestOp { request: Some(Request::RequestPut(PutRequest { key: key.into(), value: value.into() })) };
        self.client.txn(TxnRequest { compare: Vec::new(), success: vec![put], failure: Vec::new() }).await.map(drop)
    }

    /// The value stored at `key`, if any.
    pub async fn value(&self, key: impl Into<Vec<u8>>) -> Result<Option<Vec<u8>>, EtcdError> {
        let response = self.client.get(key.into()).await?;
        Ok(response.kvs.into_iter().next().map(|kv| kv.value))
    }

    /// Deletes `key`, whatever is there.
    pub async fn delete(&self, key: impl Into<Vec<u8>>) -> Result<(), EtcdError> {
        let delete = RequestOp { request: Some(Request::RequestDeleteRange(DeleteRangeRequest { key: key.into() })) };
        self.client.txn(TxnRequest { compare: Vec::new(), success: vec![delete], failure: Vec::new() }).await.map(drop)
    }

    /// How many keys start with `prefix`.
    pub async fn count(&self, prefix: impl Into<Vec<u8>>) -> Result<i64, EtcdError> {
        let key = prefix.into();
        let range_end = prefix_end(&key);
        let request = RangeRequest { key, range_end, count_only: true, ..RangeRequest::default() };
        Ok(self.client.range(request).await?.count)
    }

    /// The lease of the leader of the state's election `name`, if one leads.
    pub async fn leader_lease(&self, name: &str) -> Result<Option<i64>, EtcdError> {
        match self.client.leader(&self.keys.election(name)).await {
            Ok(response) => Ok(response.kv.map(|kv| kv.lease)),
            Err(err) if err.status().is_some_and(|status| status.message().contains("no leader")) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The key of the leader of the state's election `name`, if one leads.
    pub async fn leader_key(&self, name: &str) -> Result<Option<Vec<u8>>, EtcdError> {
        match self.client.leader(&self.keys.election(name)).await {
            Ok(response) => Ok(response.kv.map(|kv| kv.key)),
            Err(err) if err.status().is_some_and(|status| status.message().contains("no leader")) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Revokes a lease, deleting the keys attached to it.
    pub async fn revoke(&self, lease: i64) -> Result<(), EtcdError> {
        self.client.lease_revoke(lease).await
    }

    /// Sets `user`'s password. etcd invalidates the user's tokens even when the
    /// password stays the same, which is how tests make a state's token go stale.
    pub async fn change_password(&self, user: &str, password: &str) -> Result<(), EtcdError> {
        self.client.user_change_password(user, password).await
    }

    /// How many times the state's connection has authenticated with etcd (0 without a user).
    pub fn authentications(&self) -> u64 {
        self.client.authentications()
    }
}

/// A TCP proxy on loopback in front of an etcd server, which a test can cut
/// off: a client connected through it loses etcd as on a network partition,
/// while clients connected to the server directly keep it.
///
/// Cut off, the proxy resets every connection it forwards and accepts new
/// ones without ever answering them, so a client's calls fail at once on its
/// old connection and then hang on new ones, as behind a firewall that drops
/// packets. Restored, it resets the connections it held and forwards again.
/// It works below TLS, so it stands in front of any variant of server.
#[derive(Debug)]
pub struct Proxy {
    endpoint: String,
    shared: Arc<Mutex<ProxyConnections>>,
    accept: JoinHandle<()>,
}

/// The proxy's connections, and whether it is cut off; one lock, so a
/// connection accepted while the proxy is being cut off is either among the
/// forwarded ones that get reset or among the held ones.
#[derive(Debug, Default)]
struct ProxyConnections {
    cut_off: bool,
    /// Each a task holding the client's and the server's socket.
    forwarding: Vec<JoinHandle<()>>,
    /// Accepted while cut off: never read or written.
    held: Vec<tokio::net::TcpStream>,
}

impl Proxy {
    /// Starts forwarding to `server`, on a free port of 127.0.0.1, in tasks
    /// of the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When no port of 127.0.0.1 can be bound.
    pub async fn start(server: &EtcdServer) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("cannot bind a port for the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        let target = SocketAddr::from(([127, 0, 0, 1], server.client_port));
        let endpoint = format!("{}://127.0.0.1:{port}", server.scheme());
        let shared = Arc::new(Mutex::new(ProxyConnections::default()));
        let accept = tokio::spawn(accept_connections(listener, target, Arc::clone(&shared)));
        Proxy { endpoint, shared, accept }
    }

    /// The proxy's URL, with the server's scheme.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// Resets every connection the proxy forwards, and holds new ones
    /// unanswered until [`restore`](Proxy::restore). Returns once the old
    /// connections are closed.
    pub async fn cut_off(&self) {
        let forwarding = {
            let mut connections = self.shared.lock();
            connections.cut_off = true;
            std::mem::take(&mut connections.forwarding)
        };
        for connection in forwarding {
            connection.abort();
            // Resolves once the task and its sockets are dropped.
            let _ = connection.await;
        }
    }

    /// Resets the connections held while cut off, and forwards new ones again.
    pub fn restore(&self) {
        let mut connections = self.shared.lock();
        connections.cut_off = false;
        connections.held.clear();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        let mut connections = self.shared.lock();
        for connection in connections.forwarding.drain(..) {
            connection.abort();
        }
        connections.held.clear();
    }
}

async fn accept_connections(
    listener: tokio::net::TcpListener,
    target: SocketAddr,
    shared: Arc<Mutex<ProxyConnections>>,
) {
    while let Ok((client, _)) = listener.accept().await {
        // Dropping the socket then resets the connection rather than closing it.
        let _ = client.set_zero_linger();
        let _ = client.set_nodelay(true);
        let mut connections = shared.lock();
        if connections.cut_off {
            connections.held.push(client);
            continue;
        }
        connections.forwarding.retain(|connection| !connection.is_finished());
        connections.forwarding.push(tokio::spawn(async move {
            let Ok(mut server) = tokio::net::TcpStream::connect(target).await else { return };
            let _ = server.set_nodelay(true);
            let mut client = client;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }));
    }
}
