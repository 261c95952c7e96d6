//! Typed and dynamic resources: conversions share specs, mismatches are errors.

use cosi::prelude::*;
use cosi::resource::EncodedSpec;
use cosi::state::MemoryState;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
struct HostnameSpec {
    hostname: String,
    domain: Option<String>,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Links.net.example.org", namespace = "network")]
struct Link {
    mtu: u32,
}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "RouteTables.net.example.org", namespace = "network")]
struct RouteTable {
    routes: Vec<Vec<u32>>,
}

fn hostname(name: &str) -> HostnameSpec {
    HostnameSpec { hostname: name.to_owned(), domain: None }
}

#[tokio::test]
async fn get_and_list_of_10_000_share_the_stored_specs() {
    let state = MemoryState::default();
    for i in 0..10_000 {
        state.create(Typed::new(format!("h{i:05}"), hostname("x")), CreateOptions::default()).await.unwrap();
    }
    let first = state.list::<HostnameSpec>(&ListOptions::default()).await.unwrap();
    let second = state.list::<HostnameSpec>(&ListOptions::default()).await.unwrap();
    assert_eq!(first.len(), 10_000);
    assert!(first.iter().zip(&second).all(|(a, b)| std::ptr::eq(a.spec(), b.spec())), "a list copied a spec");

    let got = state.get::<HostnameSpec>("h04242").await.unwrap();
    assert!(std::ptr::eq(got.spec(), first[4242].spec()), "a get copied a spec");
    let dynamic = state.get_dynamic(&HostnameSpec::pointer("h04242")).await.unwrap();
    assert!(dynamic.spec().downcast::<HostnameSpec>().is_some_and(|spec| std::ptr::eq(spec, got.spec())));
}

#[tokio::test]
async fn editing_a_read_resource_copies_its_spec_and_leaves_the_stored_one_alone() {
    let state = MemoryState::default();
    state.create(Typed::new("default", hostname("before")), CreateOptions::default()).await.unwrap();

    let mut edited = state.get::<HostnameSpec>("default").await.unwrap();
    edited.hostname = "after".to_owned();
    assert_eq!(state.get::<HostnameSpec>("default").await.unwrap().hostname, "before");

    let stored = state.update(edited, UpdateOptions::default()).await.unwrap();
    assert_eq!(stored.hostname, "after");
    assert_eq!(stored.metadata().version(), Version::new(2));
}

#[test]
fn converting_to_the_wrong_type_is_an_error_naming_the_resource() {
    let link: DynamicResource = Typed::new("eth0", Link { mtu: 1500 }).into();
    let err = Typed::<HostnameSpec>::try_from(link).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("Links.net.example.org(network/eth0)"), "{err}");

    // The same type name over a spec of another Rust type (a misconfigured client) is an error too.
    let mut metadata = Metadata::new("network", HostnameSpec::TYPE, "bogus");
    metadata.labels_mut().set("a", "b");
    let mislabelled = DynamicResource::new(metadata, Link { mtu: 9000 });
    assert!(Typed::<HostnameSpec>::try_from(&mislabelled).unwrap_err().is_invalid_argument());
}

#[test]
fn an_encoded_spec_is_kept_byte_for_byte_and_decodes_from_its_yaml() {
    let encoded =
        EncodedSpec { proto: vec![0x0a, 0x05, b't', b'a', b'l', b'o', b's'], yaml: Some("hostname: talos\n".into()) };
    let resource = DynamicResource::encoded(Metadata::new("network", HostnameSpec::TYPE, "default"), encoded.clone());
    assert_eq!(resource.spec().as_encoded(), Some(&encoded));

    let typed = Typed::<HostnameSpec>::try_from(&resource).unwrap();
    assert_eq!(*typed.spec(), hostname("talos"));

    let garbage = DynamicResource::encoded(
        Metadata::new("network", HostnameSpec::TYPE, "default"),
        EncodedSpec { proto: vec![], yaml: Some("hostname: [unclosed".into()) },
    );
    let err = Typed::<HostnameSpec>::try_from(&garbage).unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("cannot decode"), "{err}");
}

/// A typed read of a spec whose YAML aliases expand past any document of its
/// length (60 KB of text, 10^8 numbers) is refused, without expanding it.
#[test]
fn a_typed_read_refuses_an_alias_bomb() {
    let bomb = format!("base: &a [{}]\nroutes: [{}]\n", ["0"; 10_000].join(","), ["*a"; 10_000].join(","));
    let resource = DynamicResource::encoded(
        Metadata::new("network", RouteTable::TYPE, "main"),
        EncodedSpec { proto: vec![], yaml: Some(bomb) },
    );
    let err = Typed::<RouteTable>::try_from(&resource).unwrap_err();
    assert!(err.is_invalid_argument() && err.to_string().contains("expands through its aliases"), "{err}");

    let legitimate = DynamicResource::encoded(
        Metadata::new("network", RouteTable::TYPE, "main"),
        EncodedSpec { proto: vec![], yaml: Some("base: &a [1, 2]\nroutes: [*a, *a, [3]]\n".into()) },
    );
    let typed = Typed::<RouteTable>::try_from(&legitimate).unwrap();
    assert_eq!(typed.routes, [vec![1, 2], vec![1, 2], vec![3]]);
}

#[test]
fn specs_compare_by_value_and_tombstones_are_recognised() {
    let of = |spec| DynamicResource::from(Typed::new("a", spec));
    let link = DynamicResource::from(Typed::new("a", Link { mtu: 1 }));
    assert_eq!(of(hostname("a")).spec(), of(hostname("a")).spec());
    assert_ne!(of(hostname("a")).spec(), of(hostname("b")).spec());
    assert_ne!(link.spec(), of(hostname("a")).spec());
    let tombstone = DynamicResource::tombstone(&HostnameSpec::pointer("gone"));
    assert_ne!(of(hostname("a")).spec(), tombstone.spec());
    assert_eq!(tombstone.spec(), DynamicResource::tombstone(&HostnameSpec::pointer("other")).spec());

    assert!(tombstone.is_tombstone());
    assert!(!DynamicResource::from(Typed::new("here", hostname("a"))).is_tombstone());
}

#[test]
fn a_typed_spec_serializes_through_the_dynamic_resource() {
    let resource: DynamicResource = Typed::new("default", hostname("talos")).into();
    let serialize = resource.spec().as_serialize().expect("a typed spec");
    let json = serde_json::to_string(&serialize).unwrap();
    assert_eq!(json, r#"{"hostname":"talos","domain":null}"#);
}
