//! Clients built on gRPC's C core (Python's `grpcio`, C++, Ruby, PHP) over
//! the Unix socket. They send the socket's path, percent-encoded, as the
//! `:authority` of every request (`tmp%2Fdir%2Fs.sock`), which is no valid
//! authority: the server must serve them all the same.
//!
//! The first test speaks HTTP/2 by hand, as the C core does; the second runs
//! the wire-level conformance (`interop/python/conformance.py`) with Python's
//! `grpcio`, its stubs generated from our `.proto` files at run time with
//! `grpcio-tools`. That needs a Python with both: `target/python/bin/python3`
//! under the workspace (which `.ci/run` makes), or `COSI_PYTHON`, or
//! `python3`; where none has them the test fails, or is skipped with
//! `COSI_ALLOW_SKIP=1` outside CI (`cosi::testing::server`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cosi::state::MemoryState;
use cosi_grpc::{Endpoint, Security, Server};
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A frame: its header, then its payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame").to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// An HPACK string literal, not Huffman-coded (short: one length byte).
fn string(text: &str) -> Vec<u8> {
    let mut out = vec![u8::try_from(text.len()).expect("shorter than 127 bytes")];
    out.extend_from_slice(text.as_bytes());
    out
}

/// A `Get` of a resource that does not exist, with the request headers a C
/// core client sends; the `:authority` is `authority`, HPACK-encoded.
fn get_request(stream: u32, authority: &[u8]) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    block.push(0x04); // :path, a literal without indexing, its name from the static table
    block.extend(string("/cosi.resource.State/Get"));
    block.extend_from_slice(authority);
    for (name, value) in [("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", "grpc-c/50.0.0")] {
        block.push(0x00); // a literal without indexing, with a literal name
        block.extend(string(name));
        block.extend(string(value));
    }
    let message = cosi_grpc::proto::GetRequest {
        namespace: "default".into(),
        r#type: "Nothings.test.cosi.dev".into(),
        id: "missing".into(),
        options: None,
    }
    .encode_to_vec();
    let mut data = vec![0];
    data.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    data.extend_from_slice(&message);
    let mut request = frame(0x1, 0x4, stream, &block); // HEADERS, END_HEADERS
    request.extend(frame(0x0, 0x1, stream, &data)); // DATA, END_STREAM
    request
}

/// The `grpc-status` the server answers on each of `streams`, or why there is none.
async fn statuses(socket: &mut tokio::net::UnixStream, streams: &[u32]) -> Vec<Result<String, String>> {
    let mut decoder = loona_hpack::Decoder::new();
    let mut answers: Vec<Option<Result<String, String>>> = vec![None; streams.len()];
    let mut block = Vec::new();
    while answers.iter().any(Option::is_none) {
        let mut header = [0_u8; 9];
        socket.read_exact(&mut header).await.expect("a frame from the server");
        let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let mut payload = vec![0; len];
        socket.read_exact(&mut payload).await.expect("the frame's payload");
        let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let Some(index) = streams.iter().position(|&wanted| wanted == stream) else { continue };
        match header[3] {
            // HEADERS or CONTINUATION (the server sends neither padded nor with priority).
            0x1 | 0x9 => {
                block.extend_from_slice(&payload);
                if header[4] & 0x4 != 0 {
                    decoder
                        .decode_with_cb(&block, |name, value| {
                            if &*name == b"grpc-status" {
                                answers[index] = Some(Ok(String::from_utf8_lossy(&value).into_owned()));
                            }
                        })
                        .expect("the server's headers decode");
                    block.clear();
                }
            }
            // RST_STREAM: what the server did before it accepted any authority.
            0x3 => answers[index] = Some(Err(format!("stream {stream} reset with error code {payload:?}"))),
            _ => (),
        }
    }
    answers.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_the_socket_path_as_authority_is_served() {
    let path = support::socket_path();
    let listening = Server::new(MemoryState::default())
        .bind(&Endpoint::Unix(path.clone()), Security::Insecure)
        .await
        .expect("bind");
    tokio::spawn(listening.serve());

    let mut socket = tokio::net::UnixStream::connect(&path).await.expect("connect");
    let mut sent = PREFACE.to_vec();
    sent.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    // The C core's form: the path, percent-encoded, indexed in the dynamic table...
    let mut authority = vec![0x41]; // :authority, a literal with incremental indexing
    authority.extend(string("tmp%2Fcosi-test%2Fstate.sock"));
    sent.extend(get_request(1, &authority));
    // ...and the next request refers to it there (index 62, the newest entry).
    sent.extend(get_request(3, &[0xbe]));
    // A valid authority is left as it is.
    let mut valid = vec![0x01];
    valid.extend(string("localhost"));
    sent.extend(get_request(5, &valid));
    socket.write_all(&sent).await.expect("send the requests");

    let answers = tokio::time::timeout(Duration::from_secs(30), statuses(&mut socket, &[1, 3, 5]))
        .await
        .expect("answers within 30 s");
    // NOT_FOUND: the handler ran, and found nothing.
    let not_found = Ok("5".to_owned());
    assert_eq!(answers, [not_found.clone(), not_found.clone(), not_found]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_that_does_not_decode_closes_the_connection_and_the_server_goes_on() {
    let path = support::socket_path();
    let listening = Server::new(MemoryState::default())
        .bind(&Endpoint::Unix(path.clone()), Security::Insecure)
        .await
        .expect("bind");
    tokio::spawn(listening.serve());

    let mut socket = tokio::net::UnixStream::connect(&path).await.expect("connect");
    let mut sent = PREFACE.to_vec();
    sent.extend(frame(0x4, 0, 0, &[]));
    // An index far past both tables.
    sent.extend(frame(0x1, 0x5, 1, &[0xff, 0xff, 0xff, 0x0f]));
    socket.write_all(&sent).await.expect("send");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(30), socket.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the connection is closed");

    let client = cosi_grpc::Client::connect(&Endpoint::Unix(path), cosi_grpc::ClientSecurity::Insecure)
        .await
        .expect("another connection");
    let kind = cosi::resource::Kind::new("default", "Nothings.test.cosi.dev");
    cosi::state::State::list_dynamic(&client, &kind, &cosi::state::ListOptions::default()).await.expect("served");
}

/// The workspace's root.
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace")
}

/// How to get a Python that runs the conformance script.
const INSTALL: &str = "apt-get install python3-grpcio python3-venv, then, in the workspace, \
     /usr/bin/python3 -m venv --system-site-packages target/python && \
     target/python/bin/pip install grpcio-tools==VERSION-OF-GRPCIO (as .ci/run does)";

/// A Python that has `grpc` and `grpc_tools`, if there is one.
fn python() -> Option<PathBuf> {
    let candidates = std::env::var_os("COSI_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace().join("target/python/bin/python3"), PathBuf::from("python3")]);
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import grpc, grpc_tools.protoc"])
            .output()
            .is_ok_and(|output| output.status.success())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_runs_the_wire_conformance_over_the_unix_socket() {
    let Some(python) = python() else {
        cosi::testing::server::missing("Python with grpcio and grpcio-tools", INSTALL);
        return;
    };
    let path = support::socket_path();
    let listening = Server::new(MemoryState::default())
        .bind(&Endpoint::Unix(path.clone()), Security::Insecure)
        .await
        .expect("bind");
    tokio::spawn(listening.serve());

    let stubs = path.parent().expect("the socket's directory").join("stubs");
    let script = workspace().join("interop/python/conformance.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg("--socket")
        .arg(&path)
        .arg("--proto")
        .arg(workspace().join("cosi-grpc/proto"))
        .arg("--stubs")
        .arg(&stubs)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the script ends within 120 s")
        .expect("the script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the conformance script failed:\n{stdout}\n{stderr}");
    // Each check prints a line; the last says how many passed.
    assert!(stdout.lines().last().is_some_and(|last| last.starts_with("conformance: ")), "{stdout}");
}
