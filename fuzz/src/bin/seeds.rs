//! Writes the seed inputs of every target into `fuzz/seeds/<target>/`:
//! well-formed examples the fuzzers start from and mutate.
//! Run `cargo run -p cosi-fuzz --bin seeds` after changing a format.

#![forbid(unsafe_code)]

use std::path::Path;

use cosi::resource::{DynamicResource, EncodedSpec, Metadata, Resource};
use cosi::state::{CreateOptions, State as _, StateExt as _};
use cosi::testing::resources::PathResource;
use cosi_grpc::proto;
use prost::Message;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let write = |target: &str, name: &str, data: &[u8]| -> std::io::Result<()> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), data)
    };
    let r#type = PathResource::TYPE.to_owned();
    let resource = |id: &str| proto::Resource {
        metadata: Some(proto::Metadata {
            namespace: "default".into(),
            r#type: r#type.clone(),
            id: id.into(),
            version: "undefined".into(),
            phase: "running".into(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            finalizers: vec!["f".into()],
            ..proto::Metadata::default()
        }),
        spec: Some(proto::Spec { proto_spec: Vec::new(), yaml_spec: "value: x\n".into() }),
    };
    let term = |key: &str, op: proto::label_term::Operation, values: &[&str]| proto::LabelTerm {
        key: key.into(),
        op: op.into(),
        value: values.iter().map(|value| (*value).to_owned()).collect(),
        invert: false,
    };
    use proto::label_term::Operation;
    let options = proto::ListOptions {
        label_query: vec![
            proto::LabelQuery {
                terms: vec![term("app", Operation::Equal, &["web"]), term("size", Operation::LteNumeric, &["1Gi"])],
            },
            proto::LabelQuery {
                terms: vec![term("tier", Operation::Exists, &[]), term("app", Operation::In, &["db", "x"])],
            },
        ],
        id_query: Some(proto::IdQuery { regexp: "^r[0-9]$".into() }),
    };
    let pointer = || ("default".to_owned(), r#type.clone(), "r0".to_owned());

    let (namespace, ty, id) = pointer();
    let requests: [(&str, u8, Vec<u8>); 8] = [
        ("get", 0, proto::GetRequest { namespace, r#type: ty, id, options: None }.encode_to_vec()),
        (
            "list",
            1,
            proto::ListRequest { namespace: "default".into(), r#type: r#type.clone(), options: Some(options.clone()) }
                .encode_to_vec(),
        ),
        (
            "create",
            2,
            proto::CreateRequest {
                resource: Some(resource("new")),
                options: Some(proto::CreateOptions { owner: "me".into() }),
            }
            .encode_to_vec(),
        ),
        (
            "update",
            3,
            proto::UpdateRequest {
                new_resource: Some(resource("r0")),
                options: Some(proto::UpdateOptions { owner: String::new(), expected_phase: Some("running".into()) }),
            }
            .encode_to_vec(),
        ),
        (
            "destroy",
            4,
            proto::DestroyRequest {
                namespace: "default".into(),
                r#type: r#type.clone(),
                id: "r1".into(),
                options: None,
            }
            .encode_to_vec(),
        ),
        (
            "watch",
            5,
            proto::WatchRequest {
                namespace: "default".into(),
                r#type: r#type.clone(),
                id: None,
                options: Some(proto::WatchOptions {
                    bootstrap_contents: true,
                    aggregated: true,
                    bootstrap_bookmark: true,
                    label_query: options.label_query.clone(),
                    ..Default::default()
                }),
                api_version: 1,
            }
            .encode_to_vec(),
        ),
        (
            "teardown",
            6,
            proto::TeardownRequest {
                namespace: "default".into(),
                r#type: r#type.clone(),
                id: "r2".into(),
                options: None,
            }
            .encode_to_vec(),
        ),
        (
            "teardown-and-destroy",
            7,
            proto::TeardownAndDestroyRequest {
                namespace: "default".into(),
                r#type: r#type.clone(),
                id: "r3".into(),
                options: None,
            }
            .encode_to_vec(),
        ),
    ];
    for (name, rpc, message) in requests {
        let mut data = vec![rpc];
        data.extend(message);
        write("grpc_request", name, &data)?;
    }

    write("queries", "labels-and-id", &options.encode_to_vec())?;
    write("queries", "empty", &[])?;

    let mut metadata = Metadata::new("ns", "Things.fuzz.cosi.dev", "a");
    metadata.labels_mut().set("k", "v");
    metadata.finalizers_mut().add("f");
    metadata.set_owner(Some("owner"));
    let stored =
        DynamicResource::encoded(metadata.clone(), EncodedSpec { proto: vec![1, 2, 3], yaml: Some("a: 1\n".into()) });
    let key = cosi_redb::EncryptionKey::new([0x5a; 32]);
    let plain = cosi_redb::fuzzing::encode_record(&stored, None).map_err(std::io::Error::other)?;
    let sealed = cosi_redb::fuzzing::encode_record(&stored, Some(&key)).map_err(std::io::Error::other)?;
    write("redb_record", "plain", &[&[0][..], &plain].concat())?;
    write("redb_record", "encrypted", &[&[1][..], &sealed].concat())?;
    write("redb_record", "round-trip", b"\x03owner\x00k=v\x00fin\x00spec")?;

    let encrypted = cosi_redb::Options::default().encryption_key(cosi_redb::EncryptionKey::new([0x5a; 32]));
    write("redb_file", "plain.redb", &store_file(cosi_redb::Options::default(), &stored)?)?;
    write("redb_file", "encrypted.redb", &store_file(encrypted, &stored)?)?;

    write("spec_yaml", "value", b"value: x\n")?;
    // JSON is YAML too: a spec sent as JSON text takes the same decoder.
    write("spec_yaml", "json", br#"{"value": "x", "type": "Things.fuzz.cosi.dev", "aliases": ["t"]}"#)?;
    write("spec_yaml", "definition", b"type: Things.fuzz.cosi.dev\ndisplayType: Thing\ndefaultNamespace: default\naliases: [thing]\nsensitivity: sensitive\nprintColumns:\n- name: Value\n  jsonPath: '{.value}'\n")?;

    write("metadata_json", "metadata", &serde_json::to_vec(&metadata).map_err(std::io::Error::other)?)?;

    let value = cosi_etcd::fuzzing::encode_value(&stored).map_err(std::io::Error::other)?;
    write("etcd_value", "value", &[&[0][..], &value].concat())?;
    let key = cosi_etcd::fuzzing::resource_key("/cosi", stored.metadata().pointer());
    write("etcd_value", "key-and-value", &[&[1][..], &key, &[0], &value].concat())?;
    let bookmark = cosi_etcd::fuzzing::encode_bookmark("/cosi", &stored.metadata().pointer().kind(), 42);
    write("etcd_value", "bookmark", &[&[2][..], &bookmark].concat())?;
    Ok(())
}

/// A small store file, as `RedbState` writes one: the default namespaces and
/// definitions, `stored`, and a typed resource.
fn store_file(options: cosi_redb::Options, stored: &DynamicResource) -> std::io::Result<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.redb");
    let state = cosi_redb::RedbState::open(&path, options).map_err(std::io::Error::other)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime
        .block_on(async {
            cosi::state::Registry::new(&state).register_defaults().await?;
            state.create_dynamic(stored.clone(), CreateOptions::owner("owner")).await?;
            let typed = cosi::resource::Typed::new("a", PathResource { value: "x".into() });
            state.create(typed, CreateOptions::default()).await.map(drop)
        })
        .map_err(std::io::Error::other)?;
    drop(state);
    std::fs::read(&path)
}
