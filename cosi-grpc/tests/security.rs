//! Transport security: mutual TLS with roles from the client certificate,
//! Unix socket permissions, and the refusal of insecure non-loopback listeners.
//!
//! Certificates are generated per test run (rcgen); no key is committed.

mod support;

use std::sync::Arc;

use cosi::resource::{
    DefinitionOptions, DynamicResource, EncodedSpec, Kind, Metadata, Resource as _, ResourceDefinition, Sensitivity,
    Typed,
};
use cosi::state::{
    CreateOptions, DestroyOptions, Error, ListOptions, META_NAMESPACE, MemoryState, Registry, State, UpdateOptions,
    WatchKindOptions, WatchOptions,
};
use cosi_grpc::testing::Pki;
use cosi_grpc::{
    ADMIN_ROLE, Client, ClientSecurity, ClientTls, Endpoint, Limits, READER_ROLE, Security, ServeError, Server,
};

const PUBLIC_TYPE: &str = "Hostnames.test.cosi.dev";
const SENSITIVE_TYPE: &str = "Secrets.test.cosi.dev";
const NAMESPACE: &str = "default";
/// A type without any definition.
const UNDEFINED_TYPE: &str = "Undefined.test.cosi.dev";
/// A sensitive type whose definition's ID is not its lowercased type.
const HIDDEN_TYPE: &str = "Hiddens.test.cosi.dev";
/// A type whose definition does not decode.
const GARBLED_TYPE: &str = "Garbleds.test.cosi.dev";
/// A public type whose definition's ID is not its lowercased type.
const RENAMED_TYPE: &str = "Renameds.test.cosi.dev";

struct Fixture {
    pki: Pki,
    endpoint: Endpoint,
}

impl Fixture {
    /// A TLS server in front of a state with one public and one sensitive type, one resource of each.
    async fn start() -> Self {
        Fixture::start_with(Limits::default()).await
    }

    async fn start_with(limits: Limits) -> Self {
        let state = MemoryState::default();
        let registry = Registry::new(&state);
        registry.register_defaults().await.expect("register the meta definitions");
        for (r#type, sensitivity) in
            [(PUBLIC_TYPE, Sensitivity::NonSensitive), (SENSITIVE_TYPE, Sensitivity::Sensitive)]
        {
            let options = DefinitionOptions { sensitivity, ..DefinitionOptions::default() };
            let definition = ResourceDefinition::new(r#type, NAMESPACE, options).expect("a valid definition");
            registry.register_definition(definition).await.expect("register a definition");
            state
                .create_dynamic(resource(r#type, "existing"), CreateOptions::default())
                .await
                .expect("create a resource");
        }

        // Types whose definitions a reader must not trust: none at all, a
        // sensitive one under an ID other than the lowercased type, and one
        // that does not decode under the conventional ID; and a public type
        // defined under another ID, which stays readable.
        let definition = |r#type: &str, sensitivity| {
            let options = DefinitionOptions { sensitivity, ..DefinitionOptions::default() };
            ResourceDefinition::new(r#type, NAMESPACE, options).expect("a valid definition")
        };
        let unusual = [
            ("hidden-secrets", definition(HIDDEN_TYPE, Sensitivity::Sensitive)),
            ("renamed-public", definition(RENAMED_TYPE, Sensitivity::NonSensitive)),
        ];
        for (id, definition) in unusual {
            let stored = DynamicResource::from(Typed::new_in(META_NAMESPACE, id, definition));
            state.create_dynamic(stored, CreateOptions::default()).await.expect("create a definition");
        }
        let garbled = EncodedSpec { proto: vec![0xff, 0xff, 0xff], yaml: Some("type: [unclosed".into()) };
        let garbled = DynamicResource::encoded(
            Metadata::new(META_NAMESPACE, ResourceDefinition::TYPE, GARBLED_TYPE.to_lowercase()),
            garbled,
        );
        state.create_dynamic(garbled, CreateOptions::default()).await.expect("create an undecodable definition");
        for r#type in [UNDEFINED_TYPE, HIDDEN_TYPE, GARBLED_TYPE, RENAMED_TYPE] {
            state
                .create_dynamic(resource(r#type, "existing"), CreateOptions::default())
                .await
                .expect("create a resource");
        }

        let pki = Pki::new("cosi test CA");
        let listening = Server::new(state)
            .limits(limits)
            .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::MutualTls(pki.server_tls()))
            .await
            .expect("the TLS server binds");
        let endpoint = listening.endpoint().clone();
        tokio::spawn(listening.serve());
        Fixture { pki, endpoint }
    }

    async fn client(&self, organizations: &[&str]) -> Result<Client, cosi_grpc::ConnectError> {
        self.connect(self.pki.client_tls(organizations)).await
    }

    /// A new connection with this certificate.
    async fn connect(&self, tls: ClientTls) -> Result<Client, cosi_grpc::ConnectError> {
        Client::connect(&self.endpoint, ClientSecurity::MutualTls(tls)).await
    }
}

fn resource(r#type: &str, id: &str) -> DynamicResource {
    DynamicResource::encoded(
        Metadata::new(NAMESPACE, r#type, id),
        cosi::resource::EncodedSpec { proto: vec![], yaml: Some("value: x\n".into()) },
    )
}

fn is_denied(err: &Error) -> bool {
    err.is_access_denied()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reads_and_writes_everything() {
    let fixture = Fixture::start().await;
    let admin = fixture.client(&[ADMIN_ROLE]).await.expect("the admin connects");
    for r#type in [PUBLIC_TYPE, SENSITIVE_TYPE] {
        let created =
            admin.create_dynamic(resource(r#type, "new"), CreateOptions::default()).await.expect("admin creates");
        admin.update_dynamic(DynamicResource::clone(&created), UpdateOptions::default()).await.expect("admin updates");
        let listed =
            admin.list_dynamic(&Kind::new(NAMESPACE, r#type), &ListOptions::default()).await.expect("admin lists");
        assert_eq!(listed.len(), 2, "{type}: the admin should see both resources");
        admin.destroy_dynamic(created.metadata().pointer(), DestroyOptions::default()).await.expect("admin destroys");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_cannot_write_and_sees_no_sensitive_resource() {
    let fixture = Fixture::start().await;
    let reader = fixture.client(&[READER_ROLE]).await.expect("the reader connects");

    let public = Kind::new(NAMESPACE, PUBLIC_TYPE);
    let existing = reader.get_dynamic(&public.pointer("existing")).await.expect("a reader reads a public resource");
    assert_eq!(reader.list_dynamic(&public, &ListOptions::default()).await.expect("a reader lists").len(), 1);
    let mut watch = reader.watch_kind_dynamic(&public, WatchKindOptions::bootstrap()).await.expect("a reader watches");
    assert!(watch.recv().await.is_some_and(|event| event.resource().is_some_and(|r| r.id() == "existing")));

    let writes: [(&str, Result<(), Error>); 4] = [
        ("create", reader.create_dynamic(resource(PUBLIC_TYPE, "new"), CreateOptions::default()).await.map(drop)),
        ("update", reader.update_dynamic(DynamicResource::clone(&existing), UpdateOptions::default()).await.map(drop)),
        ("destroy", reader.destroy_dynamic(existing.metadata().pointer(), DestroyOptions::default()).await),
        ("teardown", reader.teardown_dynamic(existing.metadata().pointer(), Default::default()).await.map(drop)),
    ];
    for (what, result) in writes {
        let err = result.expect_err(&format!("a reader's {what} should be refused"));
        assert!(is_denied(&err), "{what}: expected permission denied, got {err:?}");
        assert!(!err.is_owner_conflict(), "{what}: a refused role is not an owner conflict");
    }

    let sensitive = Kind::new(NAMESPACE, SENSITIVE_TYPE);
    let err = reader.get_dynamic(&sensitive.pointer("existing")).await.expect_err("a sensitive get is refused");
    assert!(is_denied(&err), "get: expected permission denied, got {err:?}");
    let err = reader.list_dynamic(&sensitive, &ListOptions::default()).await.expect_err("a sensitive list is refused");
    assert!(is_denied(&err), "list: expected permission denied, got {err:?}");
    let err = reader
        .watch_kind_dynamic(&sensitive, WatchKindOptions::bootstrap())
        .await
        .expect_err("a sensitive watch is refused");
    assert!(is_denied(&err), "watch: expected permission denied, got {err:?}");
    assert_eq!(
        reader.get_dynamic(&public.pointer("existing")).await.expect("the reader's connection still works").id(),
        "existing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_filtering_fails_closed_for_readers() {
    let fixture = Fixture::start().await;
    let reader = fixture.client(&[READER_ROLE]).await.expect("the reader connects");
    let admin = fixture.client(&[ADMIN_ROLE]).await.expect("the admin connects");
    for r#type in [SENSITIVE_TYPE, UNDEFINED_TYPE, HIDDEN_TYPE, GARBLED_TYPE] {
        let kind = Kind::new(NAMESPACE, r#type);
        let pointer = kind.pointer("existing");
        let refusals = [
            ("get", reader.get_dynamic(&pointer).await.map(drop)),
            ("list", reader.list_dynamic(&kind, &ListOptions::default()).await.map(drop)),
            ("watch", reader.watch_dynamic(&pointer, WatchOptions::default()).await.map(drop)),
            ("kind watch", reader.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap()).await.map(drop)),
        ];
        for (call, result) in refusals {
            let err = result.err().unwrap_or_else(|| panic!("{type}: a reader's {call} should be refused"));
            assert!(is_denied(&err), "{type}: {call}: expected permission denied, got {err:?}");
        }
        // The admin is not filtered.
        admin.get_dynamic(&pointer).await.expect("the admin reads it");
    }
    // A public type is found by its definition's type, whatever the definition's ID.
    let renamed = Kind::new(NAMESPACE, RENAMED_TYPE);
    assert_eq!(reader.get_dynamic(&renamed.pointer("existing")).await.expect("readable").id(), "existing");
    // Readers read the definitions themselves (they are not sensitive).
    let definitions = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
    assert!(!reader.list_dynamic(&definitions, &ListOptions::default()).await.expect("definitions").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_without_role_is_refused() {
    let fixture = Fixture::start().await;
    let nobody = fixture.client(&["example:other"]).await.expect("the TLS handshake succeeds");
    let err = nobody.get_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE).pointer("existing")).await.expect_err("refused");
    assert!(is_denied(&err), "expected permission denied, got {err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_without_certificate_is_refused() {
    let fixture = Fixture::start().await;
    let Endpoint::Tcp(address) = fixture.endpoint else { unreachable!("a TCP endpoint") };
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(fixture.pki.ca_pem()))
        .domain_name("localhost");
    let connected = async {
        let channel =
            tonic::transport::Endpoint::from_shared(format!("https://{address}"))?.tls_config(tls)?.connect().await?;
        let client = Client::from_channel(channel);
        client
            .get_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE).pointer("existing"))
            .await
            .map_err(Box::<dyn std::error::Error>::from)?;
        Ok::<_, Box<dyn std::error::Error>>(())
    };
    assert!(connected.await.is_err(), "a client without a certificate must not get through");

    // A certificate from another CA is refused as well.
    let other = Pki::new("another CA");
    let (certificate, key) = other.issue(&["client"], &[ADMIN_ROLE]);
    let tls =
        ClientTls { server_ca: fixture.pki.ca_pem().to_owned(), certificate, key, server_name: "localhost".into() };
    let result = match Client::connect(&fixture.endpoint, ClientSecurity::MutualTls(tls)).await {
        Ok(client) => client.get_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE).pointer("existing")).await.map(drop),
        Err(err) => Err(Error::backend(err)),
    };
    assert!(result.is_err(), "a certificate from an unknown CA must not get through");
}

#[tokio::test]
async fn insecure_tcp_is_refused_off_loopback() {
    let endpoint: Endpoint = "tcp://0.0.0.0:0".parse().expect("endpoint");
    let err = Server::new(MemoryState::default()).bind(&endpoint, Security::Insecure).await.err();
    assert!(matches!(err, Some(ServeError::InsecureNonLoopback(_))), "expected a refusal, got {err:?}");
}

#[tokio::test]
async fn unix_socket_is_private_and_removed_on_shutdown() {
    use std::os::unix::fs::PermissionsExt;

    let path = support::socket_path();
    let listening = Server::new(MemoryState::default())
        .bind(&Endpoint::Unix(path.clone()), Security::Insecure)
        .await
        .expect("bind the socket");
    let mode = std::fs::metadata(&path).expect("the socket exists").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket should be readable and writable by its owner only");

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listening.serve_with_shutdown(async move {
        let _ = stopped.await;
    }));
    let client = Client::connect(&Endpoint::Unix(path.clone()), ClientSecurity::Insecure).await.expect("connect");
    let kind = Kind::new(NAMESPACE, PUBLIC_TYPE);
    assert!(client.list_dynamic(&kind, &ListOptions::default()).await.expect("list").is_empty());
    let _ = stop.send(());
    server.await.expect("the server task").expect("the server stops cleanly");
    assert!(!path.exists(), "the socket should be removed when the server stops");
}

#[tokio::test]
async fn binding_removes_only_a_socket_nobody_answers_on() {
    use std::os::unix::fs::PermissionsExt;

    async fn bind(path: &std::path::Path) -> Result<cosi_grpc::Listening, ServeError> {
        Server::new(MemoryState::default()).bind(&Endpoint::Unix(path.to_path_buf()), Security::Insecure).await
    }

    // A file that is not a socket is never removed.
    let file = support::socket_path();
    std::fs::write(&file, b"precious").expect("write a file");
    let err = bind(&file).await.err();
    assert!(matches!(err, Some(ServeError::Bind { .. })), "expected a bind error, got {err:?}");
    assert_eq!(std::fs::read(&file).expect("the file is still there"), b"precious");

    // A live server's socket is an error and keeps working.
    let live = support::socket_path();
    let listening = bind(&live).await.expect("bind");
    tokio::spawn(listening.serve());
    let err = bind(&live).await.err();
    assert!(matches!(err, Some(ServeError::Bind { .. })), "expected a bind error, got {err:?}");
    let client = Client::connect(&Endpoint::Unix(live.clone()), ClientSecurity::Insecure).await.expect("connect");
    client.list_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE), &ListOptions::default()).await.expect("still served");

    // The socket of a server that died is replaced, restricted, and nothing
    // of the binding is left beside it.
    let dead = support::socket_path();
    drop(std::os::unix::net::UnixListener::bind(&dead).expect("a socket"));
    let _listening = bind(&dead).await.expect("a dead socket is replaced");
    let mode = std::fs::metadata(&dead).expect("the socket exists").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir = dead.parent().expect("a directory");
    let entries: Vec<_> =
        std::fs::read_dir(dir).expect("list").map(|entry| entry.expect("entry").file_name()).collect();
    let mut lock = dead.file_name().expect("a name").to_owned();
    lock.push(".lock");
    let mut expected = vec![dead.file_name().expect("a name").to_owned(), lock];
    let mut entries = entries;
    entries.sort();
    expected.sort();
    assert_eq!(entries, expected, "only the socket and its lock file are left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_racing_on_one_path_end_with_one_serving_and_the_others_refused() {
    const SERVERS: usize = 8;
    let runtime = tokio::runtime::Handle::current();
    for round in 0..50 {
        // A dead socket at the path, so that every server probes and removes.
        let path = support::socket_path();
        drop(std::os::unix::net::UnixListener::bind(&path).expect("a socket"));
        // Threads of their own, released at once, so that the binds overlap.
        let start = Arc::new(std::sync::Barrier::new(SERVERS));
        let binds: Vec<_> = (0..SERVERS)
            .map(|_| {
                let (path, start, runtime) = (path.clone(), Arc::clone(&start), runtime.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let server = Server::new(MemoryState::default());
                    runtime.block_on(server.bind(&Endpoint::Unix(path), Security::Insecure))
                })
            })
            .collect();
        let mut bound = Vec::new();
        for bind in binds {
            match bind.join().expect("the bind thread") {
                Ok(listening) => bound.push(listening),
                Err(ServeError::Bind { source, .. }) => {
                    assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse, "round {round}: {source}");
                    assert!(source.to_string().contains("a server is listening there"), "{source}");
                }
                Err(other) => panic!("round {round}: expected a refusal, got {other}"),
            }
        }
        assert_eq!(bound.len(), 1, "round {round}: exactly one server binds the path");
        // The one bound is the one clients reach.
        tokio::spawn(bound.pop().expect("one").serve());
        let client = Client::connect(&Endpoint::Unix(path.clone()), ClientSecurity::Insecure).await.expect("connect");
        client.list_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE), &ListOptions::default()).await.expect("served");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_shutdown_leaves_another_servers_socket_alone() {
    let path = support::socket_path();
    let endpoint = Endpoint::Unix(path.clone());
    let first = Server::new(MemoryState::default()).bind(&endpoint, Security::Insecure).await.expect("bind");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let first = tokio::spawn(first.serve_with_shutdown(async move {
        let _ = stopped.await;
    }));
    // Its socket is removed from under it (a cleaner, an operator), and
    // another server binds the path.
    std::fs::remove_file(&path).expect("remove the first socket");
    let second = Server::new(MemoryState::default()).bind(&endpoint, Security::Insecure).await.expect("bind again");
    tokio::spawn(second.serve());

    let _ = stop.send(());
    first.await.expect("the first server's task").expect("the first server stops cleanly");
    assert!(path.exists(), "the second server's socket is still there");
    let client = Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("connect to the second");
    client.list_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE), &ListOptions::default()).await.expect("served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_watch_ends_when_its_type_becomes_sensitive() {
    let fixture = Fixture::start().await;
    let reader = fixture.client(&[READER_ROLE]).await.expect("the reader connects");
    let admin = fixture.client(&[ADMIN_ROLE]).await.expect("the admin connects");
    let kind = Kind::new(NAMESPACE, RENAMED_TYPE);
    let mut watch = reader.watch_kind_dynamic(&kind, WatchKindOptions::default()).await.expect("readable for now");

    // The admin makes the type sensitive (its definition lives under another ID).
    let options = DefinitionOptions { sensitivity: Sensitivity::Sensitive, ..DefinitionOptions::default() };
    let sensitive = ResourceDefinition::new(RENAMED_TYPE, NAMESPACE, options).expect("a valid definition");
    let pointer = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE).pointer("renamed-public");
    let stored = admin.get_dynamic(&pointer).await.expect("the definition");
    let mut changed = DynamicResource::from(Typed::new_in(META_NAMESPACE, "renamed-public", sensitive));
    changed.metadata_mut().set_version(stored.metadata().version());
    admin.update_dynamic(changed, UpdateOptions::default()).await.expect("the admin updates the definition");
    admin.create_dynamic(resource(RENAMED_TYPE, "secret"), CreateOptions::default()).await.expect("create");

    let event = tokio::time::timeout(std::time::Duration::from_secs(10), watch.recv())
        .await
        .expect("the watch ends within 10 s instead of retrying");
    match event {
        Some(cosi::state::Event::Errored { error }) => assert!(is_denied(&error), "expected a refusal, got {error:?}"),
        other => panic!("the reader saw {other:?} after its type became sensitive"),
    }
    let after = tokio::time::timeout(std::time::Duration::from_secs(5), watch.recv()).await;
    assert!(matches!(after, Ok(None)), "the watch ends after its error, got {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_created_again_as_sensitive_is_seen_at_once() {
    let fixture = Fixture::start().await;
    let reader = fixture.client(&[READER_ROLE]).await.expect("the reader connects");
    let admin = fixture.client(&[ADMIN_ROLE]).await.expect("the admin connects");
    let resource = Kind::new(NAMESPACE, RENAMED_TYPE).pointer("existing");
    reader.get_dynamic(&resource).await.expect("readable at first");

    // Destroyed and created again under the same ID, at the same version, now sensitive.
    let pointer = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE).pointer("renamed-public");
    admin.destroy_dynamic(&pointer, DestroyOptions::default()).await.expect("destroy the definition");
    let options = DefinitionOptions { sensitivity: Sensitivity::Sensitive, ..DefinitionOptions::default() };
    let sensitive = ResourceDefinition::new(RENAMED_TYPE, NAMESPACE, options).expect("a valid definition");
    let again = DynamicResource::from(Typed::new_in(META_NAMESPACE, "renamed-public", sensitive));
    admin.create_dynamic(again, CreateOptions::default()).await.expect("create it again");

    let err = reader.get_dynamic(&resource).await.expect_err("now sensitive");
    assert!(is_denied(&err), "expected a refusal, got {err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificates_watches_are_counted_over_all_its_connections() {
    let fixture = Fixture::start_with(Limits { max_watches_per_client: 2, ..Limits::default() }).await;
    let certificate = fixture.pki.client_tls(&[READER_ROLE]);
    async fn watch(client: &Client) -> cosi::Result<cosi::state::Watch> {
        client.watch_kind_dynamic(&Kind::new(NAMESPACE, PUBLIC_TYPE), WatchKindOptions::default()).await
    }

    let mut open = Vec::new();
    let mut connections = Vec::new();
    for _ in 0..2 {
        let connection = fixture.connect(certificate.clone()).await.expect("connect");
        open.push(watch(&connection).await.expect("within the certificate's limit"));
        connections.push(connection);
    }
    let third = fixture.connect(certificate.clone()).await.expect("connect");
    let refused = watch(&third).await.expect_err("a third watch of one certificate, on a third connection");
    assert!(refused.to_string().contains("this client holds its limit of 2 open watches"), "{refused}");

    // Another certificate is another client.
    let other = fixture.client(&[READER_ROLE]).await.expect("connect");
    let _other = watch(&other).await.expect("another certificate's watch");

    // A closed watch gives its place back to its certificate.
    open.pop();
    let mut reopened = None;
    for _ in 0..100 {
        match watch(&third).await {
            Ok(watch) => {
                reopened = Some(watch);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    assert!(reopened.is_some(), "the place of a closed watch is not given back");
}

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), future).await.expect("within 30 s")
}

/// Whether `future` is still pending after a while: for what must wait.
async fn still_waits<T>(future: &mut (impl std::future::Future<Output = T> + Unpin)) -> bool {
    tokio::time::timeout(std::time::Duration::from_millis(500), future).await.is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshakes_in_progress_are_capped_and_the_next_connection_waits() {
    let fixture = Fixture::start_with(Limits { max_tls_handshakes: 1, ..Limits::default() }).await;
    let Endpoint::Tcp(address) = fixture.endpoint else { unreachable!("a TCP endpoint") };
    let established = fixture.client(&[READER_ROLE]).await.expect("connect before");
    // A client that never says hello holds the one handshake place...
    let slow = tokio::net::TcpStream::connect(address).await.expect("connect");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    // ...so the next connection waits, and connections past their handshake are served.
    let mut next = Box::pin(fixture.client(&[READER_ROLE]));
    assert!(still_waits(&mut next).await, "a handshake ran while another held the only place");
    let kind = Kind::new(NAMESPACE, PUBLIC_TYPE);
    within(established.list_dynamic(&kind, &ListOptions::default()))
        .await
        .expect("an established connection is served");

    drop(slow);
    let next = within(next).await.expect("connects once the slow handshake ended");
    within(next.list_dynamic(&kind, &ListOptions::default())).await.expect("served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificates_connections_past_its_share_are_closed_and_others_are_served() {
    let fixture = Fixture::start_with(Limits { max_connections_per_certificate: 2, ..Limits::default() }).await;
    let certificate = fixture.pki.client_tls(&[READER_ROLE]);
    let kind = Kind::new(NAMESPACE, PUBLIC_TYPE);
    let served = |client: Client| {
        let kind = kind.clone();
        async move { within(client.list_dynamic(&kind, &ListOptions::default())).await.map(|_| client) }
    };

    let first = served(fixture.connect(certificate.clone()).await.expect("connect")).await.expect("the first");
    let _second = served(fixture.connect(certificate.clone()).await.expect("connect")).await.expect("the second");
    // The third is closed as soon as its handshake shows the certificate.
    let third = match within(fixture.connect(certificate.clone())).await {
        Ok(client) => served(client).await.err(),
        Err(refused) => Some(cosi::Error::other(refused)),
    };
    assert!(third.is_some(), "a third connection of one certificate was served");

    // Another certificate is another client.
    served(fixture.client(&[READER_ROLE]).await.expect("connect")).await.expect("another certificate");

    // A closed connection gives its place back, once the server has seen it close.
    drop(first);
    within(async {
        loop {
            if let Ok(client) = fixture.connect(certificate.clone()).await
                && client.list_dynamic(&kind, &ListOptions::default()).await.is_ok()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn an_unusable_certificate_key_or_ca_is_a_clear_error() {
    let pki = Pki::new("cosi test CA");
    let good = pki.server_tls();
    let cases = [
        (
            cosi_grpc::ServerTls { certificate: "not PEM".into(), ..good.clone() },
            "the server certificate: no certificate",
        ),
        (cosi_grpc::ServerTls { key: "not PEM".into(), ..good.clone() }, "the server key"),
        (cosi_grpc::ServerTls { client_ca: String::new(), ..good.clone() }, "the client CA: no certificate"),
        (cosi_grpc::ServerTls { key: pki.server_tls().key, ..good.clone() }, "the server certificate and key"),
    ];
    for (tls, expected) in cases {
        let listening = Server::new(MemoryState::default())
            .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::MutualTls(tls))
            .await
            .expect("binds");
        let err = within(listening.serve()).await.expect_err("refuses to serve");
        assert!(matches!(err, ServeError::TlsConfig(_)), "{err:?}");
        assert!(err.to_string().starts_with(&format!("invalid TLS configuration: {expected}")), "{err}");
    }
}
