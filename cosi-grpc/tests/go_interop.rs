//! Interoperability with Go COSI (`cosi-project/runtime`, pinned in `interop/go/go.mod`), both ways:
//!
//! - Go COSI's own `StateSuite`, through Go COSI's gRPC client, against our server.
//! - Our state conformance suite, through our client, against Go COSI's gRPC server
//!   in front of its in-memory state (`interop/go/cmd/cosi-go-server`).
//!
//! Both need the `go` tool. Without it they fail and say how to get it, or
//! are skipped with `COSI_ALLOW_SKIP=1` outside CI (`cosi::testing::server`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use cosi::resource::{Kind, Resource as _, ResourceDefinition};
use cosi::state::{ListOptions, MemoryState, Namespace, Registry, State};
use cosi_grpc::{Client, ClientSecurity, Endpoint, Security, Server};
use tokio::io::{AsyncBufReadExt, BufReader};

fn go_module() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../interop/go")
}

/// Whether `go` runs; when it does not, fails the test or lets it skip (`cosi::testing::server::missing`).
fn go_available() -> bool {
    let found = std::process::Command::new("go").arg("version").output().is_ok_and(|output| output.status.success());
    if !found {
        cosi::testing::server::missing(
            "the `go` tool (Go 1.26 or newer), to run Go COSI",
            "install Go from your distribution or go.dev, then run `go mod download` in interop/go",
        );
    }
    found
}

#[test]
fn go_client_passes_go_state_suite_against_our_server_and_reads_our_meta_namespace() {
    if !go_available() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let state = MemoryState::default();
        Registry::new(&state).register_defaults().await.expect("publish the meta namespace");
        let listening = Server::new(state)
            .bind(&"tcp://127.0.0.1:0".parse().expect("endpoint"), Security::Insecure)
            .await
            .expect("the server binds");
        let Endpoint::Tcp(address) = *listening.endpoint() else { unreachable!("a TCP endpoint") };
        tokio::spawn(listening.serve());

        let output = tokio::process::Command::new("go")
            // Go's own TestTeardownAndDestroy races with itself over gRPC (see the
            // Go file); TestTeardownAndDestroyOverGRPC checks the same without the race.
            .args(["test", "-count=1", "-v", "./conformance"])
            .args(["-run", "^(TestStateSuiteOverGRPC|TestTeardownAndDestroyOverGRPC|TestMetaResources)$"])
            .args(["-skip", "^TestStateSuiteOverGRPC$/^TestTeardownAndDestroy$"])
            .current_dir(go_module())
            .env("COSI_GRPC_ADDRESS", address.to_string())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(600), output)
            .await
            .expect("go test finishes within 10 minutes")
            .expect("go test starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "Go COSI's StateSuite failed against our server:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("--- PASS: TestStateSuiteOverGRPC"),
            "the Go suite did not run (skipped?):\n{stdout}\n{stderr}"
        );
        assert!(stdout.contains("--- PASS: TestMetaResources"), "Go could not read our meta namespace:\n{stdout}");
        assert!(
            stdout.contains("--- PASS: TestTeardownAndDestroyOverGRPC"),
            "Go's TeardownAndDestroy did not wait for our finalizer's removal:\n{stdout}"
        );
        assert!(!stdout.contains("TestStateSuiteOverGRPC/TestTeardownAndDestroy "), "the racy case ran:\n{stdout}");
        let passed = stdout.matches("    --- PASS: TestStateSuiteOverGRPC/").count();
        assert!(passed >= 20, "expected the Go suite's cases to run, {passed} passed:\n{stdout}");
    });
}

/// The Go server binary, built once per test run.
fn go_server_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cosi-go-server");
        let output = std::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg("./cmd/cosi-go-server")
            .current_dir(go_module())
            .output()
            .expect("go build starts");
        assert!(output.status.success(), "cannot build the Go server: {}", String::from_utf8_lossy(&output.stderr));
        binary
    })
}

/// Starts a Go COSI server for the calling case's runtime (it is killed when the
/// runtime shuts down) and returns our client connected to it.
async fn go_server() -> Client {
    let mut child = tokio::process::Command::new(go_server_binary())
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Go server starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await.expect("the Go server prints its address");
    let address = line.trim().strip_prefix("listening on ").expect("`listening on ADDRESS`").to_owned();
    // The task owns the process: it ends, and the process is killed, with the case's runtime.
    tokio::spawn(async move {
        let _child = child;
        std::future::pending::<()>().await
    });
    let endpoint: Endpoint = address.parse().expect("a TCP address");
    Client::connect(&endpoint, ClientSecurity::Insecure).await.expect("our client connects to the Go server")
}

#[test]
fn our_client_reads_go_resource_definitions() {
    if !go_available() {
        return;
    }
    cosi::testing::run_case(go_server, |state| async move {
        let kind = Kind::new("meta", ResourceDefinition::TYPE);
        let listed = state.list_dynamic(&kind, &ListOptions::default()).await.expect("list Go's definitions");
        let definitions: Vec<ResourceDefinition> =
            listed.iter().filter_map(|resource| cosi_grpc::definition_from_spec(resource.spec())).collect();
        assert_eq!(definitions.len(), listed.len(), "every Go definition should decode: {listed:?}");
        let namespace = definitions
            .iter()
            .find(|definition| definition.r#type == Namespace::TYPE)
            .expect("Go publishes the Namespace definition");
        assert_eq!(namespace.display_type, "Namespace");
        assert!(namespace.aliases.iter().any(|alias| alias == "ns"), "{namespace:?}");
    });
}

// Our conformance suite, one test per case, against a fresh Go server; when
// Go is missing, each case fails saying how to get it (or skips, as above).
//
// `lenient` leaves out the two cases that check where this implementation is
// stricter than Go COSI on purpose, not how the wire behaves:
// `invalid_bookmark` (Go accepts a bookmark of another namespace of the same
// type) and `invalid_input` (Go accepts empty namespaces and IDs, and stores
// the owner an update's metadata names).
cosi::state_conformance_tests!(our_suite_against_go_server, go_server_if_available, optional, lenient);

async fn go_server_if_available() -> Option<Client> {
    match go_available() {
        true => Some(go_server().await),
        false => None,
    }
}
