//! The harnesses of the fuzz targets: one function per decoder that reads
//! bytes from outside the process, each taking arbitrary bytes.
//!
//! A harness returns normally whatever its input; it panics only when the
//! code under test does something it must never do (panic, or break a
//! round-trip property), which is how a fuzzer tells a defect. Each is run
//!
//! - coverage-guided by libFuzzer, from the entry points in `fuzz_targets/`
//!   (feature `libfuzzer`, see `fuzz/run`);
//! - over its seeds and every regression input in `fuzz/regressions/<target>/`
//!   by `cargo test -p cosi-fuzz`, so a crash once found stays fixed;
//! - over structured inputs by the property tests in `tests/properties.rs`.
//!
//! | target | reads |
//! |---|---|
//! | [`grpc_request`] | a gRPC request (first byte: the RPC) into `StateService`, through the conversion layer |
//! | [`queries`] | label and ID queries from the wire, run by list and watch against labelled resources |
//! | [`redb_record`] | a stored redb record, with and without encryption |
//! | [`redb_file()`] | a whole redb store file (redb's pages too), opened, read, written and closed |
//! | [`unix_headers()`] | HTTP/2 frames a client sends on the gRPC server's Unix socket, whose header blocks the server rewrites |
//! | [`spec_yaml`] | a spec's YAML (or JSON, which YAML includes) text, decoded as typed specs and as a resource definition |
//! | [`metadata_json`] | metadata as JSON, the form redb records hold |
//! | [`etcd_value`] | a value under the etcd prefix (with its key), and a client's etcd bookmark |
//! | [`machine_yaml`] | the files a user of the example OS edits: `machine.yaml`, `platform.json`, `run/kernel/net.json`, `cmdline` |
//!
//! A new target is a function here, its name in [`TARGETS`] and [`run`], an
//! entry point in `fuzz_targets/` with a `[[bin]]` in `Cargo.toml`, and seeds
//! in `seeds/<target>/`; `fuzz/run` then fuzzes it with the others.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::{Arc, OnceLock};

use cosi::resource::{
    DefinitionOptions, DynamicResource, EncodedSpec, Metadata, Resource, ResourceDefinition, Sensitivity, Typed,
};
use cosi::state::{CreateOptions, MemoryState, Namespace, Registry, State, StateExt as _};
use cosi::testing::resources::{IntResource, PathResource, StrResource};
use cosi_grpc::StateService;
use cosi_grpc::proto::{self, state_server::State as _};
use cosi_redb::EncryptionKey;
use futures_util::StreamExt;
use prost::Message;
use tonic::Request;

mod redb_file;
mod unix_headers;

pub use redb_file::{redb_file, redb_file_outcome};
pub use unix_headers::unix_headers;

/// The names of the targets, as `fuzz_targets/`, `fuzz/run` and `fuzz/regressions/` name them.
pub const TARGETS: &[&str] = &[
    "grpc_request",
    "queries",
    "redb_record",
    "redb_file",
    "spec_yaml",
    "metadata_json",
    "etcd_value",
    "machine_yaml",
    "unix_headers",
];

/// Runs the target called `name` on `data`; `false` for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "grpc_request" => grpc_request(data),
        "queries" => queries(data),
        "redb_record" => redb_record(data),
        "redb_file" => redb_file(data),
        "spec_yaml" => spec_yaml(data),
        "metadata_json" => metadata_json(data),
        "etcd_value" => etcd_value(data),
        "machine_yaml" => machine_yaml(data),
        "unix_headers" => unix_headers(data),
        _ => return false,
    }
    true
}

/// One runtime for every input: libFuzzer calls a target millions of times.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime for the harness")
    })
}

const NAMESPACE: &str = "default";

/// A fresh state holding definitions and a few labelled resources, so that
/// requests find something to read, update, watch and match.
async fn populated() -> Arc<MemoryState> {
    let state = Arc::new(MemoryState::default());
    let registry = Registry::new(&*state);
    let _ = registry.register_defaults().await;
    let sensitive = DefinitionOptions { sensitivity: Sensitivity::Sensitive, ..DefinitionOptions::default() };
    if let Ok(definition) = ResourceDefinition::new("Secrets.fuzz.cosi.dev", NAMESPACE, sensitive) {
        let _ = registry.register_definition(definition).await;
    }
    let labels: [&[(&str, &str)]; 4] = [
        &[("app", "web"), ("size", "1Gi")],
        &[("app", "db"), ("size", "512Mi"), ("tier", "")],
        &[("size", "-3"), ("zone", "a")],
        &[],
    ];
    for (n, labels) in labels.iter().enumerate() {
        let mut resource = DynamicResource::from(Typed::new_in(NAMESPACE, format!("r{n}"), PathResource::default()));
        for (key, value) in *labels {
            resource.metadata_mut().labels_mut().set(*key, *value);
        }
        let _ = state.create_dynamic(resource, CreateOptions::default()).await;
    }
    let _ = (*state).create(Typed::new_in(NAMESPACE, "i", IntResource { value: 1 }), CreateOptions::default()).await;
    state
}

/// Drains up to `limit` messages of a response stream without waiting for more.
async fn drain<T>(stream: impl futures_util::Stream<Item = T> + Unpin, limit: usize) {
    let mut stream = stream.take(limit);
    while let Ok(Some(_)) = tokio::time::timeout(std::time::Duration::ZERO, stream.next()).await {}
}

/// A gRPC request into the service: the first byte picks the RPC, the rest
/// is its protobuf message, as a client would send it.
pub fn grpc_request(data: &[u8]) {
    let Some((&rpc, message)) = data.split_first() else { return };
    runtime().block_on(async {
        let state = populated().await;
        let service = StateService::new(state);
        match rpc % 8 {
            0 => {
                let Ok(request) = proto::GetRequest::decode(message) else { return };
                let _ = service.get(Request::new(request)).await;
            }
            1 => {
                let Ok(request) = proto::ListRequest::decode(message) else { return };
                if let Ok(response) = service.list(Request::new(request)).await {
                    drain(response.into_inner(), 64).await;
                }
            }
            2 => {
                let Ok(request) = proto::CreateRequest::decode(message) else { return };
                let _ = service.create(Request::new(request)).await;
            }
            3 => {
                let Ok(request) = proto::UpdateRequest::decode(message) else { return };
                let _ = service.update(Request::new(request)).await;
            }
            4 => {
                let Ok(request) = proto::DestroyRequest::decode(message) else { return };
                let _ = service.destroy(Request::new(request)).await;
            }
            5 => {
                let Ok(request) = proto::WatchRequest::decode(message) else { return };
                if let Ok(response) = service.watch(Request::new(request)).await {
                    drain(response.into_inner(), 16).await;
                }
            }
            6 => {
                let Ok(request) = proto::TeardownRequest::decode(message) else { return };
                let _ = service.teardown(Request::new(request)).await;
            }
            _ => {
                let Ok(request) = proto::TeardownAndDestroyRequest::decode(message) else { return };
                let _ = service.teardown_and_destroy(Request::new(request)).await;
            }
        }
    });
}

/// Label and ID queries from the wire (a `ListOptions` message), run by a
/// list and an aggregated bootstrap watch over labelled resources; both must
/// select the same resources.
pub fn queries(data: &[u8]) {
    let Ok(options) = proto::ListOptions::decode(data) else { return };
    runtime().block_on(async {
        let state = populated().await;
        let service = StateService::new(state);
        let list = proto::ListRequest {
            namespace: NAMESPACE.into(),
            r#type: PathResource::TYPE.into(),
            options: Some(options.clone()),
        };
        let listed: Option<Vec<Option<String>>> = match service.list(Request::new(list)).await {
            Ok(response) => {
                let items: Vec<_> = response.into_inner().collect().await;
                Some(items.into_iter().filter_map(Result::ok).filter_map(|item| item.resource).map(id_of).collect())
            }
            Err(_) => None,
        };
        let watch = proto::WatchRequest {
            namespace: NAMESPACE.into(),
            r#type: PathResource::TYPE.into(),
            id: None,
            options: Some(proto::WatchOptions {
                bootstrap_contents: true,
                aggregated: true,
                label_query: options.label_query,
                id_query: options.id_query,
                ..proto::WatchOptions::default()
            }),
            api_version: 1,
        };
        let watched: Option<Vec<Option<String>>> = match service.watch(Request::new(watch)).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                let mut ids = Vec::new();
                while let Ok(Some(Ok(response))) =
                    tokio::time::timeout(std::time::Duration::from_millis(50), stream.next()).await
                {
                    let done = response.event.iter().any(|event| event.event_type() == proto::EventType::Bootstrapped);
                    ids.extend(
                        response
                            .event
                            .into_iter()
                            .filter(|event| event.event_type() == proto::EventType::Created)
                            .filter_map(|event| event.resource)
                            .map(id_of),
                    );
                    if done {
                        break;
                    }
                }
                Some(ids)
            }
            Err(_) => None,
        };
        if let (Some(listed), Some(watched)) = (listed, watched) {
            let listed: Vec<String> = listed.into_iter().flatten().collect();
            let watched: Vec<String> = watched.into_iter().flatten().collect();
            assert_eq!(listed, watched, "a list and a bootstrap watch with one query disagree");
        }
    });
}

fn id_of(resource: proto::Resource) -> Option<String> {
    resource.metadata.map(|metadata| metadata.id)
}

/// The key the encrypted cases use.
fn key() -> EncryptionKey {
    EncryptionKey::new([0x5a; 32])
}

/// A stored redb record: the first byte picks plain, encrypted, a format 1
/// record read as a migration does, or a structured round trip; decoding
/// must refuse or return the resource the key names, and what decodes must
/// encode and decode back to itself.
pub fn redb_record(data: &[u8]) {
    let Some((&mode, record)) = data.split_first() else { return };
    let record_key = ("ns", "Things.fuzz.cosi.dev", "a");
    let key = key();
    let decoded = match mode % 4 {
        0 => cosi_redb::fuzzing::decode_record(record_key, record, None).map(|resource| (resource, None)),
        1 => cosi_redb::fuzzing::decode_record(record_key, record, Some(&key)).map(|resource| (resource, Some(&key))),
        2 => cosi_redb::fuzzing::decode_legacy_record(record_key, record, Some(&key))
            .map(|resource| (resource, Some(&key))),
        _ => return record_round_trip(record),
    };
    let Ok((resource, key)) = decoded else { return };
    assert_eq!(resource.metadata().pointer().id(), "a", "a record decoded as another resource");
    let again = cosi_redb::fuzzing::encode_record(&resource, key).expect("a decoded resource encodes");
    let back = cosi_redb::fuzzing::decode_record(record_key, &again, key).expect("a record just encoded decodes");
    assert_eq!(back, resource, "a record changed through a round trip");
}

/// A resource built from the bytes (its labels, finalizers, owner and an
/// encoded spec), encoded and decoded with and without encryption.
fn record_round_trip(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\u{0}');
    let mut metadata = Metadata::new("ns", "Things.fuzz.cosi.dev", "a");
    metadata.set_owner(parts.next().filter(|owner| !owner.is_empty()));
    for part in parts.by_ref().take(8) {
        match part.split_once('=') {
            Some((key, value)) => drop(metadata.labels_mut().set(key, value)),
            None => drop(metadata.finalizers_mut().add(part)),
        }
    }
    let rest: String = parts.collect::<Vec<_>>().join("\u{0}");
    let resource = match rest.is_empty() {
        true => DynamicResource::without_spec(metadata),
        false => DynamicResource::encoded(
            metadata,
            EncodedSpec { proto: rest.as_bytes().to_vec(), yaml: Some(rest.clone()) },
        ),
    };
    let key = key();
    for key in [None, Some(&key)] {
        let record = cosi_redb::fuzzing::encode_record(&resource, key).expect("a resource encodes");
        let back = cosi_redb::fuzzing::decode_record(("ns", "Things.fuzz.cosi.dev", "a"), &record, key)
            .expect("a record just encoded decodes");
        assert_eq!(back, resource, "a resource changed through its record");
    }
}

/// A spec's YAML text, as clients send it and typed reads decode it: as
/// several spec types, and as a resource definition (which readers' access
/// checks decode, from YAML or from protobuf).
pub fn spec_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    spec_yaml_as::<PathResource>(text);
    spec_yaml_as::<IntResource>(text);
    spec_yaml_as::<StrResource>(text);
    spec_yaml_as::<Namespace>(text);
    spec_yaml_as::<ResourceDefinition>(text);
    let _ = cosi::resource::from_yaml::<serde_yaml_ng::Value>(text);
    for (proto, yaml) in [(Vec::new(), Some(text.to_owned())), (data.to_vec(), None)] {
        let resource =
            DynamicResource::encoded(Metadata::new(NAMESPACE, "Fuzz.cosi.dev", "fuzz"), EncodedSpec { proto, yaml });
        let _ = cosi_grpc::definition_from_spec(resource.spec());
    }
}

/// `text` decoded as the spec of a `T`, as `Typed::<T>::try_from` decodes a
/// spec that arrived encoded. The seam for `machine.yaml` and any other spec type.
pub fn spec_yaml_as<T: Resource>(text: &str) {
    let spec = EncodedSpec { proto: Vec::new(), yaml: Some(text.to_owned()) };
    let resource = DynamicResource::encoded(Metadata::new(NAMESPACE, T::TYPE, "fuzz"), spec);
    let _ = Typed::<T>::try_from(resource);
}

/// Metadata as JSON, the form a redb record holds it in; what decodes must
/// encode and decode back to itself.
pub fn metadata_json(data: &[u8]) {
    let Ok(metadata) = serde_json::from_slice::<Metadata>(data) else { return };
    let again = serde_json::to_vec(&metadata).expect("decoded metadata encodes");
    let back: Metadata = serde_json::from_slice(&again).expect("metadata just encoded decodes");
    assert_eq!(back, metadata, "metadata changed through JSON");
}

/// The etcd prefix and kind the etcd cases use.
const ETCD_PREFIX: &str = "/cosi";

/// A value read from etcd, or a client's etcd bookmark: the first byte picks
///
/// - a value under the key of `Things.fuzz.cosi.dev(ns/a)`;
/// - a key and a value (split at the first zero byte), so that keys the
///   value does not belong to are refused;
/// - a bookmark a client hands back to resume a watch.
///
/// A value that decodes must name the resource its key belongs to, and
/// encode and decode back to itself; a bookmark that decodes must be the
/// bookmark of the revision it names.
pub fn etcd_value(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let pointer = cosi::resource::Pointer::new("ns", "Things.fuzz.cosi.dev", "a");
    let fixed = cosi_etcd::fuzzing::resource_key(ETCD_PREFIX, &pointer);
    let (key, value) = match mode % 3 {
        0 => (fixed.as_slice(), rest),
        1 => match rest.iter().position(|byte| *byte == 0) {
            Some(split) => (&rest[..split], &rest[split + 1..]),
            None => (rest, &[][..]),
        },
        _ => {
            let kind = pointer.kind();
            let Ok(revision) = cosi_etcd::fuzzing::decode_bookmark(ETCD_PREFIX, &kind, rest) else { return };
            assert!(revision >= 0, "a bookmark decoded to a negative revision");
            let again = cosi_etcd::fuzzing::encode_bookmark(ETCD_PREFIX, &kind, revision);
            assert_eq!(again, rest, "a bookmark that decodes is the bookmark of its revision");
            return;
        }
    };
    let Ok(resource) = cosi_etcd::fuzzing::decode_value(ETCD_PREFIX, key, value) else { return };
    let own_key = cosi_etcd::fuzzing::resource_key(ETCD_PREFIX, resource.metadata().pointer());
    assert_eq!(own_key, key, "a value decoded under a key that is not its resource's");
    let again = cosi_etcd::fuzzing::encode_value(&resource).expect("a decoded resource encodes");
    let back = cosi_etcd::fuzzing::decode_value(ETCD_PREFIX, key, &again).expect("a value just encoded decodes");
    assert_eq!(back, resource, "a resource changed through its etcd value");
}

/// The files a user of the example OS edits while it runs, each parsed as the
/// OS parses it: `machine.yaml`, `platform.json`, the fake kernel's
/// `run/kernel/net.json` and the boot `cmdline`. What `machine.yaml`
/// accepts must keep every path it names inside the sandbox.
pub fn machine_yaml(data: &[u8]) {
    use example_os::machine_config::Config;

    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text) {
        Ok(config) => {
            for file in
                config.files.0.iter().map(|file| &file.path).chain(config.services.0.iter().flat_map(|s| &s.after))
            {
                if let Ok(path) = file.relative() {
                    let path = path.as_str();
                    assert!(
                        !path.starts_with('/') && !path.split('/').any(|part| part == ".." || part.is_empty()),
                        "machine.yaml accepted a path that leaves the sandbox: {path:?}"
                    );
                }
            }
            for key in config.sysctls.keys() {
                let path = key.proc_path();
                assert!(!path.split('/').any(|part| part == ".." || part.is_empty()), "sysctl path {path:?}");
            }
            let _ = config.time_servers();
        }
        Err(error) => {
            if let Some((line, column)) = error.location() {
                assert!(line >= 1 && column >= 1, "a location counts from 1: {line}:{column}");
            }
        }
    }
    let _ = example_os::platform::PlatformConfig::parse(text);
    let _ = example_os::kernel::Net::parse(text);
    let _ = example_os::platform::Cmdline::parse(text);
}
