//! `cosictl` end to end: `serve` in a child process, `get` against it.

use std::process::{Command, Output, Stdio};

use cosi::resource::{DefinitionOptions, DynamicResource, EncodedSpec, Metadata, PrintColumn, ResourceDefinition};
use cosi::state::{CreateOptions, Registry, State};
use cosi_grpc::{Client, ClientSecurity, Endpoint};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

const COSICTL: &str = env!("CARGO_BIN_EXE_cosictl");

/// `cosictl serve` on a free loopback port; killed if the test fails before stopping it.
struct Served {
    child: Child,
    endpoint: String,
    _lines: Lines<BufReader<ChildStdout>>,
}

async fn serve() -> Served {
    serve_state("memory").await
}

/// `cosictl serve --state STATE` on a free loopback port.
async fn serve_state(state: &str) -> Served {
    serve_with(&["--state", state]).await
}

/// `cosictl serve ARGS` on a free loopback port.
async fn serve_with(args: &[&str]) -> Served {
    let mut child = tokio::process::Command::new(COSICTL)
        .args(["serve", "--listen", "tcp://127.0.0.1:0", "--insecure"])
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cosictl serve starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = lines.next_line().await.expect("read").expect("cosictl serve prints its address");
    let endpoint = line.strip_prefix("listening on ").expect("`listening on ENDPOINT`").to_owned();
    Served { child, endpoint, _lines: lines }
}

fn definition(r#type: &str, aliases: &[&str], columns: &[(&str, &str)]) -> ResourceDefinition {
    let options = DefinitionOptions {
        aliases: aliases.iter().map(|alias| (*alias).to_owned()).collect(),
        print_columns: columns
            .iter()
            .map(|(name, path)| PrintColumn { name: (*name).to_owned(), json_path: (*path).to_owned() })
            .collect(),
        ..DefinitionOptions::default()
    };
    ResourceDefinition::new(r#type, "network", options).expect("a valid definition")
}

fn resource(r#type: &str, id: &str, yaml: &str) -> DynamicResource {
    let spec = EncodedSpec { proto: Vec::new(), yaml: Some(yaml.to_owned()) };
    DynamicResource::encoded(Metadata::new("network", r#type, id), spec)
}

async fn populate(endpoint: &str) -> Client {
    let endpoint: Endpoint = endpoint.parse().expect("endpoint");
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect");
    let registry = Registry::new(&client);
    registry
        .register_definition(definition("Hostnames.net.example.org", &["hostname"], &[("Hostname", "{.hostname}")]))
        .await
        .expect("register");
    registry.register_definition(definition("Links.net.example.org", &[], &[])).await.expect("register");
    registry.register_definition(definition("Links.other.example.org", &[], &[])).await.expect("register");
    client
        .create_dynamic(
            resource("Hostnames.net.example.org", "default", "hostname: talos\ndomainname: example.org\n"),
            CreateOptions::default(),
        )
        .await
        .expect("create");
    client
}

fn get(endpoint: &str, args: &[&str]) -> Output {
    Command::new(COSICTL).arg("get").args(args).args(["--endpoint", endpoint]).output().expect("cosictl get runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "cosictl failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_resolves_aliases_and_prints_every_format() {
    let mut served = serve().await;
    let client = populate(&served.endpoint).await;
    let endpoint = served.endpoint.clone();

    let table = stdout(&get(&endpoint, &["hostname"]));
    let lines: Vec<Vec<&str>> = table.lines().map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAMESPACE", "TYPE", "ID", "VERSION", "HOSTNAME"], "{table}");
    assert_eq!(lines[1], ["network", "Hostnames.net.example.org", "default", "1", "talos"], "{table}");
    // The full type, the plural and a dotted prefix resolve too, and one ID can be asked for.
    for name in ["Hostnames.net.example.org", "hostnames", "hostnames.net"] {
        assert_eq!(stdout(&get(&endpoint, &[name, "default"])), table, "{name}");
    }

    let yaml = stdout(&get(&endpoint, &["hostname", "-o", "yaml"]));
    let document: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(yaml.trim_start_matches("---\n")).expect("one YAML document");
    assert_eq!(document["spec"]["hostname"].as_str(), Some("talos"), "{yaml}");
    assert_eq!(document["metadata"]["id"].as_str(), Some("default"), "{yaml}");
    // Keys keep their order: the metadata first, and the spec's as its author wrote them.
    let at = |text: &str| yaml.find(text).unwrap_or_else(|| panic!("{text:?} in {yaml}"));
    assert!(at("metadata:") < at("spec:"), "{yaml}");
    assert!(at("hostname: talos") < at("domainname: example.org"), "{yaml}");

    let json = stdout(&get(&endpoint, &["hostname", "-o", "json"]));
    let document: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert_eq!(document["spec"]["hostname"], "talos", "{json}");
    assert!(json.find("\"hostname\"") < json.find("\"domainname\""), "{json}");

    // The endpoint may also come first, as `cosictl -e unix:sandbox/cosi.sock get hostname` has it.
    let before = Command::new(COSICTL).args(["-e", &endpoint, "get", "hostname"]).output().expect("cosictl runs");
    assert_eq!(stdout(&before), table);

    let definitions = stdout(&get(&endpoint, &["rd"]));
    assert!(definitions.contains("hostnames.net.example.org"), "{definitions}");

    let ambiguous = get(&endpoint, &["links"]);
    assert!(!ambiguous.status.success());
    let message = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(
        message.contains("ambiguous")
            && message.contains("Links.net.example.org")
            && message.contains("Links.other.example.org"),
        "{message}"
    );
    let unknown = get(&endpoint, &["nonsense"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown resource type \"nonsense\""));
    let missing = get(&endpoint, &["hostname", "absent"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("doesn't exist"), "{missing:?}");

    // --watch prints the current state, then changes.
    let mut watcher = tokio::process::Command::new(COSICTL)
        .args(["get", "hostname", "--watch", "-o", "json", "--endpoint", &endpoint])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cosictl get --watch starts");
    let mut lines = BufReader::new(watcher.stdout.take().expect("stdout")).lines();
    let first: serde_json::Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line")).expect("json");
    assert_eq!((first["event"].as_str(), first["metadata"]["id"].as_str()), (Some("+"), Some("default")));
    client
        .create_dynamic(resource("Hostnames.net.example.org", "other", "hostname: next\n"), CreateOptions::default())
        .await
        .expect("create");
    let next: serde_json::Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line")).expect("json");
    assert_eq!((next["event"].as_str(), next["spec"]["hostname"].as_str()), (Some("+"), Some("next")));
    watcher.kill().await.expect("stop the watcher");

    served.terminate().await;
}

/// A spec whose YAML aliases expand 60 KB of text to 10^8 values is not
/// expanded: `get` prints it without its columns, and says why its spec is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_does_not_expand_an_alias_bomb() {
    let mut served = serve().await;
    let client = populate(&served.endpoint).await;
    let bomb = format!("hostname: &a [{}]\nmore: [{}]\n", ["0"; 10_000].join(","), ["*a"; 10_000].join(","));
    client
        .create_dynamic(resource("Hostnames.net.example.org", "bomb", &bomb), CreateOptions::default())
        .await
        .expect("create");

    let table = stdout(&get(&served.endpoint, &["hostname", "bomb"]));
    let lines: Vec<Vec<&str>> = table.lines().map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(lines[1], ["network", "Hostnames.net.example.org", "bomb", "1"], "{table}");
    let json = stdout(&get(&served.endpoint, &["hostname", "bomb", "-o", "json"]));
    assert!(json.len() < 1_000, "{} bytes", json.len());
    let document: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(document["spec"], serde_json::Value::Null);
    let why = document["specError"].as_str().expect("why the spec is missing");
    assert!(why.contains("expands through its aliases"), "{why}");
    served.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_names_the_types_that_share_an_automatically_derived_alias() {
    let mut served = serve().await;
    let endpoint: Endpoint = served.endpoint.parse().expect("endpoint");
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect");
    let registry = Registry::new(&client);
    // Both derive `hs`, which a runtime accepts (as Talos does): asking for it is what fails.
    for r#type in ["HostnameSpecs.net.example.org", "HostnameStatuses.net.example.org"] {
        registry.register_definition(definition(r#type, &[], &[])).await.expect("register");
    }
    let ambiguous = get(&served.endpoint, &["hs"]);
    assert!(!ambiguous.status.success());
    let message = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(
        message.contains("\"hs\" is ambiguous")
            && message.contains("HostnameSpecs.net.example.org")
            && message.contains("HostnameStatuses.net.example.org"),
        "{message}"
    );
    // Their other aliases name one type each.
    for name in ["hostnamespec", "hostnamestatus", "hostnamestatuses"] {
        stdout(&get(&served.endpoint, &[name]));
    }
    served.terminate().await;
}

impl Served {
    /// Sends SIGTERM and checks that the server exits 0.
    async fn terminate(&mut self) {
        let pid = self.child.id().expect("the server runs").to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
        assert!(killed.success());
        let status = self.child.wait().await.expect("the server exits");
        assert!(status.success(), "cosictl serve should exit 0 on SIGTERM, got {status}");
    }
}

/// The hostname resource, as `cosictl get -o json` prints it.
fn hostname(endpoint: &str) -> serde_json::Value {
    let json = stdout(&get(endpoint, &["hostname", "default", "-o", "json"]));
    serde_json::from_str(json.trim()).expect("one JSON object")
}

/// `cosictl serve` that must fail, with a message containing `expected` and no panic.
fn serve_fails(state: &str, expected: &str) {
    serve_with_fails(&["--state", state], expected);
}

/// `cosictl serve ARGS` that must fail, with a message containing `expected` and no panic.
fn serve_with_fails(args: &[&str], expected: &str) {
    let output = Command::new(COSICTL)
        .args(["serve", "--listen", "tcp://127.0.0.1:0", "--insecure"])
        .args(args)
        .output()
        .expect("cosictl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "serve {args:?} should fail");
    assert!(stderr.contains(expected), "serve {args:?}: expected {expected:?} in {stderr}");
    assert!(!stderr.contains("panicked"), "serve {args:?} panicked: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_redb_keeps_secrets_closed() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state.redb");
    let state = format!("redb:{}", path.display());
    let key = dir.path().join("key");
    std::fs::write(&key, format!("{}\n", "5a".repeat(32))).expect("write the key");

    // A key file others can read is refused.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let key_arg = key.display().to_string();
    serve_with_fails(&["--state", &state, "--encryption-key-file", &key_arg], "chmod 600");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    serve_with_fails(&["--state", "memory", "--encryption-key-file", &key_arg], "needs a redb state");
    let short = dir.path().join("short");
    std::fs::write(&short, "abc").expect("write");
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    serve_with_fails(&["--state", &state, "--encryption-key-file", &short.display().to_string()], "64 hexadecimal");

    let mut served = serve_with(&["--state", &state, "--encryption-key-file", &key_arg]).await;
    populate(&served.endpoint).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    served.terminate().await;

    let mode = std::fs::metadata(&path).expect("the store exists").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the store file must be private, got {mode:o}");
    let bytes = std::fs::read(&path).expect("read the store");
    assert!(!bytes.windows(b"talos".len()).any(|window| window == b"talos"), "a spec is stored in the clear");
    serve_fails(&state, "open it with its key");
    let mut served = serve_with(&["--state", &state, "--encryption-key-file", &key_arg]).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos", "the key opens the store again");
    served.terminate().await;
}

/// A store file that group or others may read is served with a warning on
/// stderr, or refused with `--require-private-store`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_redb_warns_about_a_store_others_may_read_or_refuses_it() {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::AsyncReadExt;

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state.redb");
    let state = format!("redb:{}", path.display());
    serve_state(&state).await.terminate().await;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");

    serve_with_fails(&["--state", &state, "--require-private-store"], "mode 644 lets group or others");
    serve_with_fails(&["--state", "memory", "--require-private-store"], "needs a redb state");

    let mut child = tokio::process::Command::new(COSICTL)
        .args(["serve", "--listen", "tcp://127.0.0.1:0", "--insecure", "--state", &state])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cosictl serve starts");
    let mut stderr = child.stderr.take().expect("stderr");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut served = Served { child, endpoint: String::new(), _lines: lines };
    let line = served._lines.next_line().await.expect("read").expect("cosictl serve prints its address");
    assert!(line.starts_with("listening on "), "{line}");
    served.terminate().await;
    let mut logged = String::new();
    stderr.read_to_string(&mut logged).await.expect("read stderr");
    assert!(logged.contains("WARN") && logged.contains(&path.display().to_string()), "{logged}");
    assert!(logged.contains("mode 644") && logged.contains("chmod 600"), "{logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_applies_its_limit_flags() {
    let mut served = serve_with(&["--max-watches-per-client", "2", "--max-message-size", "65536"]).await;
    let endpoint: Endpoint = served.endpoint.parse().expect("endpoint");
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect");
    let kind = cosi::resource::Kind::new("network", "Hostnames.net.example.org");
    let mut watches = Vec::new();
    for _ in 0..2 {
        let options = cosi::state::WatchKindOptions::default();
        watches.push(client.watch_kind_dynamic(&kind, options).await.expect("within the limit"));
    }
    let refused = client.watch_kind_dynamic(&kind, cosi::state::WatchKindOptions::default()).await;
    let Err(err) = refused else { panic!("a third watch on one connection is refused") };
    assert!(err.to_string().contains("limit of 2 open watches"), "{err}");
    let big = resource("Hostnames.net.example.org", "big", &"x".repeat(100_000));
    let err = client.create_dynamic(big, CreateOptions::default()).await.expect_err("over --max-message-size");
    assert!(err.to_string().contains("message length too large"), "{err}");
    served.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_redb_keeps_data_across_restarts_and_closes_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("state.redb");
    let state = format!("redb:{}", path.display());

    let mut served = serve_state(&state).await;
    populate(&served.endpoint).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    // The file is this server's while it runs.
    serve_fails(&state, &format!("cannot open the state {state}"));
    served.terminate().await;

    // Closed on SIGTERM: redb opens it without repair.
    let mut builder = redb::Builder::new();
    builder.set_repair_callback(|session| session.abort());
    drop(builder.open(&path).expect("the file reopens without repair after SIGTERM"));

    let mut served = serve_state(&state).await;
    let resource = hostname(&served.endpoint);
    assert_eq!(resource["spec"]["hostname"], "talos", "{resource}");
    assert_eq!(resource["metadata"]["version"], 1, "{resource}");
    served.terminate().await;

    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, b"this is not a redb file, and it is long enough to have a header").expect("write");
    serve_fails(&format!("redb:{}", garbage.display()), "cannot open the state redb:");
    serve_fails(&format!("redb:{}", dir.path().join("missing/state.redb").display()), "cannot open the state redb:");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_etcd_serves_the_cluster_and_survives_a_restart() {
    let Some(etcd) = cosi_etcd::testing::EtcdServer::start() else { return };
    let state = format!("etcd:{}", etcd.endpoint());

    let mut served = serve_state(&state).await;
    populate(&served.endpoint).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    served.terminate().await;

    // A second server on the same cluster sees what the first wrote.
    let mut served = serve_state(&state).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    served.terminate().await;
}

/// Writes `contents` to `name` in `dir`, readable by its owner only.
fn private_file(dir: &std::path::Path, name: &str, contents: &str) -> String {
    use std::os::unix::fs::PermissionsExt;

    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write a file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_etcd_over_tls_with_a_client_certificate() {
    let Some(etcd) = cosi_etcd::testing::EtcdServer::start_tls() else { return };
    let state = format!("etcd:{}", etcd.endpoint());
    let tls = etcd.tls().expect("a TLS server's client settings");
    let client = tls.client.clone().expect("a client certificate");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca = private_file(dir.path(), "ca.pem", &tls.server_ca);
    let cert = private_file(dir.path(), "client.pem", &client.certificate);
    let key = private_file(dir.path(), "client-key.pem", &client.key);

    let mut served = serve_with(&["--state", &state, "--etcd-ca", &ca, "--etcd-cert", &cert, "--etcd-key", &key]).await;
    populate(&served.endpoint).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    served.terminate().await;

    serve_fails(&state, "https:// etcd endpoints need --etcd-ca");
    // etcd requires a client certificate: without one, nothing is served.
    serve_with_fails(&["--state", &state, "--etcd-ca", &ca], &format!("cannot open the state {state}"));
    serve_with_fails(&["--state", &state, "--etcd-ca", &ca, "--etcd-cert", &cert], "--etcd-key");
    let plain = state.replacen("https://", "http://", 1);
    serve_with_fails(&["--state", &plain, "--etcd-ca", &ca], "--etcd-ca is for https://");
    serve_with_fails(&["--state", "memory", "--etcd-ca", &ca], "need an etcd state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_etcd_as_a_user_with_a_password_file() {
    use std::os::unix::fs::PermissionsExt;

    let Some(etcd) = cosi_etcd::testing::EtcdServer::start_with_auth() else { return };
    let state = format!("etcd:{}", etcd.endpoint());
    let credentials = etcd.credentials().expect("an authenticating server's user");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let password = private_file(dir.path(), "password", &format!("{}\n", credentials.password));
    let user = credentials.user.as_str();

    let mut served = serve_with(&["--state", &state, "--etcd-user", user, "--etcd-password-file", &password]).await;
    populate(&served.endpoint).await;
    assert_eq!(hostname(&served.endpoint)["spec"]["hostname"], "talos");
    served.terminate().await;

    // Without the user etcd refuses every call; a wrong password fails at once, saying why.
    serve_fails(&state, "user name is empty");
    let wrong = private_file(dir.path(), "wrong", "not the password");
    serve_with_fails(
        &["--state", &state, "--etcd-user", user, "--etcd-password-file", &wrong],
        "authentication failed",
    );
    // The password never goes on the command line, nor in a file others can read.
    serve_with_fails(&["--state", &state, "--etcd-user", user, "--etcd-password", "secret"], "--etcd-password");
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    serve_with_fails(&["--state", &state, "--etcd-user", user, "--etcd-password-file", &password], "chmod 600");
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    serve_with_fails(&["--state", &state, "--etcd-user", user], "--etcd-password-file");
    let empty = private_file(dir.path(), "empty", "\n");
    serve_with_fails(&["--state", &state, "--etcd-user", user, "--etcd-password-file", &empty], "it is empty");
    // Off this machine, a password goes only over TLS (refused before any connection is made).
    serve_with_fails(
        &["--state", "etcd:http://192.0.2.1:2379", "--etcd-user", user, "--etcd-password-file", &password],
        "in plaintext",
    );
}

#[test]
fn serve_refuses_malformed_states_and_unreachable_etcd() {
    for (state, expected) in
        [("sqlite:x", "unknown state"), ("redb:", "redb:PATH"), ("etcd:127.0.0.1:2379", "not an etcd endpoint")]
    {
        serve_fails(state, expected);
    }
    // Nothing listens on port 1: connecting fails with a clear error.
    serve_fails("etcd:http://127.0.0.1:1", "cannot open the state etcd:http://127.0.0.1:1");
    // A peer that accepts connections but never answers: the bounded wait gives up.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = silent.local_addr().expect("address");
    serve_fails(&format!("etcd:http://{address}"), "no answer within");
}

/// An error says its cause, not only tonic's "transport error".
#[test]
fn a_failed_connection_says_why() {
    // Nothing listens on port 1.
    let output = get("tcp://127.0.0.1:1", &["hostname"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cannot connect to tcp://127.0.0.1:1"), "{stderr}");
    assert!(stderr.to_lowercase().contains("connection refused"), "{stderr}");
}

/// A certificate or a key without the rest of mutual TLS is refused, not
/// dropped for a plain connection.
#[test]
fn tls_options_come_together() {
    for args in [&["--cert", "c.pem"][..], &["--key", "k.pem"], &["--cert", "c.pem", "--key", "k.pem"]] {
        let output = Command::new(COSICTL).args(args).args(["get", "hostname"]).output().expect("cosictl runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains("--ca"), "{args:?}: {stderr}");
    }
}

#[test]
fn serve_refuses_insecure_tcp_off_loopback_and_tcp_without_tls() {
    let output = Command::new(COSICTL)
        .args(["serve", "--listen", "tcp://0.0.0.0:0", "--insecure"])
        .output()
        .expect("cosictl runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("loopback"), "{output:?}");

    let output = Command::new(COSICTL).args(["serve", "--listen", "tcp://127.0.0.1:0"]).output().expect("cosictl runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("mutual TLS"), "{output:?}");
}
