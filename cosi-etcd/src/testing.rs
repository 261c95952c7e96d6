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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

/// An etcd server on loopback that this process started. Dropping it stops etcd
/// and removes its data.
#[derive(Debug)]
pub struct EtcdServer {
    binary: PathBuf,
    data: DataDir,
    client_port: u16,
    peer_port: u16,
    process: Option<Guarded>,
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
        Self::start_with(false)
    }

    /// One server shared by every test of this process, started on first use;
    /// `None` as for [`start`](EtcdServer::start). Tests sharing it keep to key
    /// prefixes of their own.
    pub fn shared() -> Option<&'static EtcdServer> {
        static SHARED: OnceLock<Option<EtcdServer>> = OnceLock::new();
        SHARED.get_or_init(|| Self::start_with(true)).as_ref()
    }

    fn start_with(shared: bool) -> Option<EtcdServer> {
        let binary = find_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("cosi-etcd-")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::Builder::new().prefix("cosi-etcd-").tempdir())
            .expect("cannot create a data directory for etcd");
        let data = if shared { DataDir::Shared(dir.keep()) } else { DataDir::Owned(dir) };
        let mut server = EtcdServer { binary, data, client_port: 0, peer_port: 0, process: None };
        // A port picked as free may be taken before etcd binds it: try a few times.
        for attempt in 1..=3 {
            server.client_port = free_port();
            server.peer_port = free_port();
            match server.launch() {
                Ok(()) => return Some(server),
                Err(reason) if attempt == 3 => panic!("etcd did not start: {reason}"),
                Err(_) => {}
            }
        }
        None
    }

    /// The client URL, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
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
        let client = format!("http://127.0.0.1:{}", self.client_port);
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
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match &self.data {
            DataDir::Shared(path) => command.env("COSI_ETCD_REMOVE_DIR", path),
            DataDir::Owned(_) => command.env_remove("COSI_ETCD_REMOVE_DIR"),
        };
        let mut child = command.spawn().map_err(|err| format!("cannot run sh: {err}"))?;
        let stdin = child.stdin.take().ok_or("no standard input for the guard")?;
        self.process = Some(Guarded { child, stdin });
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if healthy(self.client_port) {
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
