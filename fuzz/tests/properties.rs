//! The structured property fuzzer: proptest drives every harness with inputs
//! shaped like what each decoder expects (valid messages with arbitrary
//! fields, near-valid YAML and records), which a byte-level fuzzer reaches
//! slowly. `PROPTEST_CASES` sets how many inputs each property tries (the
//! default, 64, keeps `cargo test` quick; `fuzz/run` documents a longer run).

use cosi_grpc::proto;
use proptest::prelude::*;
use prost::Message;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(64);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,8}",
        "r[0-9]",
        "(default|meta|ns)",
        "(PathResources|Ints|Secrets)\\.(fuzz|test)\\.cosi\\.dev",
        "(app|size|tier|zone)",
        "-?[0-9]{1,3}(Ki|Mi|Gi|k|M)?",
        ".{0,12}",
    ]
}

fn term() -> impl Strategy<Value = proto::LabelTerm> {
    (text(), -1..10i32, prop::collection::vec(text(), 0..4), any::<bool>())
        .prop_map(|(key, op, value, invert)| proto::LabelTerm { key, op, value, invert })
}

fn list_options() -> impl Strategy<Value = proto::ListOptions> {
    let queries = prop::collection::vec(prop::collection::vec(term(), 0..4), 0..3)
        .prop_map(|queries| queries.into_iter().map(|terms| proto::LabelQuery { terms }).collect());
    const PATTERNS: [&str; 8] = ["r[0-9]", "^r.*$", "(", "[a-", ".*", "r{2,}", "\\w+", "(?-u:\\w){1,64}"];
    let id = prop::option::of(prop_oneof![prop::sample::select(&PATTERNS[..]).prop_map(str::to_owned), text()]);
    (queries, id).prop_map(|(label_query, id)| proto::ListOptions {
        label_query,
        id_query: id.map(|regexp| proto::IdQuery { regexp }),
    })
}

fn resource() -> impl Strategy<Value = proto::Resource> {
    (text(), text(), text(), "(undefined|[0-9]{1,3}|-1|x)", "(|running|tearingDown|bogus)", text(), text()).prop_map(
        |(namespace, r#type, id, version, phase, owner, yaml)| proto::Resource {
            metadata: Some(proto::Metadata {
                namespace,
                r#type,
                id,
                version,
                phase,
                owner,
                ..proto::Metadata::default()
            }),
            spec: Some(proto::Spec { proto_spec: yaml.as_bytes().to_vec(), yaml_spec: yaml }),
        },
    )
}

fn request() -> impl Strategy<Value = Vec<u8>> {
    let pointer = || (text(), text(), text());
    prop_oneof![
        pointer().prop_map(|(namespace, r#type, id)| {
            let mut out = vec![0];
            out.extend(proto::GetRequest { namespace, r#type, id, options: None }.encode_to_vec());
            out
        }),
        (text(), text(), list_options()).prop_map(|(namespace, r#type, options)| {
            let mut out = vec![1];
            out.extend(proto::ListRequest { namespace, r#type, options: Some(options) }.encode_to_vec());
            out
        }),
        (resource(), text()).prop_map(|(resource, owner)| {
            let mut out = vec![2];
            let options = Some(proto::CreateOptions { owner });
            out.extend(proto::CreateRequest { resource: Some(resource), options }.encode_to_vec());
            out
        }),
        (resource(), prop::option::of(text())).prop_map(|(resource, expected_phase)| {
            let mut out = vec![3];
            let options = Some(proto::UpdateOptions { owner: String::new(), expected_phase });
            out.extend(proto::UpdateRequest { new_resource: Some(resource), options }.encode_to_vec());
            out
        }),
        (
            pointer(),
            any::<bool>(),
            -2..3i32,
            list_options(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..24))
        )
            .prop_map(|((namespace, r#type, id), kind, tail_events, options, start_from_bookmark)| {
                let mut out = vec![5];
                let request = proto::WatchRequest {
                    namespace,
                    r#type,
                    id: (!kind).then_some(id),
                    options: Some(proto::WatchOptions {
                        bootstrap_contents: kind,
                        tail_events,
                        label_query: options.label_query,
                        id_query: options.id_query,
                        aggregated: kind,
                        start_from_bookmark,
                        bootstrap_bookmark: kind,
                    }),
                    api_version: 1,
                };
                out.extend(request.encode_to_vec());
                out
            }),
    ]
}

fn yaml() -> impl Strategy<Value = String> {
    prop_oneof![
        "value: [a-z]{0,8}\n",
        "value: -?[0-9]{1,20}\n",
        "type: [A-Za-z.]{0,30}\ndefaultNamespace: [a-z]{0,8}\nsensitivity: (0|1|2|sensitive)\n",
        "description: .{0,20}\n",
        "\\[{0,200}",
        "(a: ){0,150}b",
        "&a \\[\\*a\\]",
        ".{0,64}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grpc_requests(data in request()) {
        cosi_fuzz::grpc_request(&data);
    }

    #[test]
    fn queries(options in list_options()) {
        cosi_fuzz::queries(&options.encode_to_vec());
    }

    #[test]
    fn redb_records(mode in 0u8..4, body in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut data = vec![mode];
        data.extend(body);
        cosi_fuzz::redb_record(&data);
    }

    #[test]
    fn redb_round_trips(parts in prop::collection::vec(text(), 0..10)) {
        let mut data = vec![3];
        data.extend(parts.join("\u{0}").into_bytes());
        cosi_fuzz::redb_record(&data);
    }

    #[test]
    fn spec_yaml(text in yaml()) {
        cosi_fuzz::spec_yaml(text.as_bytes());
    }

    #[test]
    fn metadata_json(id in text(), version in "(undefined|[0-9]{1,20}|-1)", labels in prop::collection::vec((text(), text()), 0..4)) {
        let labels: serde_json::Map<String, serde_json::Value> =
            labels.into_iter().map(|(key, value)| (key, serde_json::Value::String(value))).collect();
        let json = serde_json::json!({
            "namespace": "ns", "type": "Things.fuzz.cosi.dev", "id": id, "version": version,
            "phase": "running", "labels": labels,
        });
        cosi_fuzz::metadata_json(json.to_string().as_bytes());
    }
}
