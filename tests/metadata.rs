//! Properties of resource metadata: equality, versions, phases and finalizers.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cosi::{Finalizers, Metadata, Phase, Version};
use proptest::prelude::*;

fn metadata() -> Metadata {
    Metadata::new("default", "Things.test.example.org", "thing")
}

/// Distinct finalizer names, in the order they are added.
fn finalizer_names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::btree_set("[a-z]{1,6}", 0..8).prop_map(|names| names.into_iter().collect())
}

fn time() -> impl Strategy<Value = SystemTime> {
    (0u64..4_000_000_000, 0u32..1_000_000_000).prop_map(|(secs, nanos)| UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Any time the platform holds, before the epoch too (Go's zero time is in year 1).
fn any_time() -> impl Strategy<Value = SystemTime> {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(secs, nanos)| {
        let whole = match u64::try_from(secs) {
            Ok(after) => UNIX_EPOCH + Duration::from_secs(after),
            Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
        };
        whole.checked_add(Duration::from_nanos(nanos.into())).unwrap_or(whole)
    })
}

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::UNDEFINED), any::<u64>().prop_map(Version::new)]
}

fn phase() -> impl Strategy<Value = Phase> {
    prop_oneof![Just(Phase::Running), Just(Phase::TearingDown)]
}

#[derive(Clone, Debug)]
enum FinalizerOp {
    Add(String),
    Remove(String),
}

fn finalizer_op() -> impl Strategy<Value = FinalizerOp> {
    // Few names, so that adds hit present names and removes hit absent ones.
    let name = "[a-c]";
    prop_oneof![name.prop_map(FinalizerOp::Add), name.prop_map(FinalizerOp::Remove)]
}

proptest! {
    #[test]
    fn finalizers_compare_as_a_set(
        (names, shuffled) in finalizer_names().prop_flat_map(|names| (Just(names.clone()), Just(names).prop_shuffle())),
    ) {
        let mut left = metadata();
        let mut right = metadata();
        for name in &names {
            left.finalizers_mut().add(name.as_str());
        }
        for name in &shuffled {
            right.finalizers_mut().add(name.as_str());
        }
        prop_assert_eq!(&left, &right);
        prop_assert_eq!(left.finalizers(), right.finalizers());
        prop_assert_eq!(names.iter().collect::<Finalizers>(), shuffled.iter().collect::<Finalizers>());
    }

    #[test]
    fn an_extra_finalizer_makes_metadata_unequal(names in finalizer_names(), extra in "[A-Z]{1,3}") {
        let mut left = metadata();
        for name in &names {
            left.finalizers_mut().add(name.as_str());
        }
        let mut right = left.clone();
        prop_assert!(right.finalizers_mut().add(extra.as_str()));
        prop_assert_ne!(&left, &right);
        prop_assert_ne!(left.finalizers(), right.finalizers());
        // Removing it again restores equality.
        prop_assert!(right.finalizers_mut().remove(&extra));
        prop_assert_eq!(&left, &right);
    }

    #[test]
    fn finalizers_with_the_same_length_but_other_names_differ(
        names in finalizer_names(),
        swap in any::<prop::sample::Index>(),
    ) {
        prop_assume!(!names.is_empty());
        let mut other = names.clone();
        let index = swap.index(other.len());
        other[index] = other[index].to_uppercase();
        let left: Finalizers = names.iter().collect();
        let right: Finalizers = other.iter().collect();
        prop_assert_eq!(left.len(), right.len());
        prop_assert_ne!(left, right);
    }

    #[test]
    fn finalizer_add_and_remove_report_changes(ops in prop::collection::vec(finalizer_op(), 0..20)) {
        let mut finalizers = Finalizers::default();
        // The model: names in the order they were first added, without duplicates.
        let mut model: Vec<String> = Vec::new();
        for op in ops {
            match op {
                FinalizerOp::Add(name) => {
                    let absent = !model.contains(&name);
                    prop_assert_eq!(finalizers.add(name.as_str()), absent);
                    if absent {
                        model.push(name);
                    }
                }
                FinalizerOp::Remove(name) => {
                    let present = model.contains(&name);
                    prop_assert_eq!(finalizers.remove(&name), present);
                    model.retain(|m| *m != name);
                }
            }
            let expected: Vec<&str> = model.iter().map(String::as_str).collect();
            prop_assert_eq!(finalizers.iter().collect::<Vec<_>>(), expected);
            prop_assert_eq!(finalizers.len(), model.len());
            prop_assert_eq!(finalizers.is_empty(), model.is_empty());
            for name in ["a", "b", "c"] {
                prop_assert_eq!(finalizers.has(name), model.iter().any(|m| m == name));
            }
        }
    }

    #[test]
    fn an_empty_label_differs_from_a_missing_one(
        key in "[a-z]{1,5}",
        others in prop::collection::btree_map("[A-Z]{1,3}", "[a-z]{0,3}", 0..3),
    ) {
        let mut without = metadata();
        for (k, v) in &others {
            without.labels_mut().set(k.as_str(), v.as_str());
            without.annotations_mut().set(k.as_str(), v.as_str());
        }

        let mut with_label = without.clone();
        with_label.labels_mut().set(key.as_str(), "");
        prop_assert!(with_label.labels().contains(&key));
        prop_assert_eq!(with_label.labels().get(&key), Some(""));
        prop_assert_ne!(with_label.labels(), without.labels());
        prop_assert_ne!(&with_label, &without);

        let mut with_annotation = without.clone();
        with_annotation.annotations_mut().set(key.as_str(), "");
        prop_assert_ne!(&with_annotation, &without);

        with_label.labels_mut().remove(&key);
        prop_assert_eq!(&with_label, &without);
    }

    #[test]
    fn finalizers_read_as_a_list_are_a_set(names in finalizer_names()) {
        // Each name twice, as a store or a peer could send them.
        let twice: Vec<&String> = names.iter().chain(&names).collect();
        let read: Finalizers = serde_json::from_str(&serde_json::to_string(&twice).expect("JSON")).expect("a list");
        let distinct: BTreeSet<&String> = names.iter().collect();
        prop_assert_eq!(read.len(), distinct.len());
        let added: Finalizers = names.iter().map(String::as_str).collect();
        prop_assert_eq!(&read, &added);
        // The first of each name, in the order it came.
        prop_assert_eq!(read.to_string(), added.to_string());
    }

    #[test]
    fn timestamps_do_not_affect_equality(created in time(), updated in time()) {
        let left = metadata();
        let mut right = left.clone();
        right.set_timestamps(created, updated);
        prop_assert_eq!(right.created(), created);
        prop_assert_eq!(right.updated(), updated);
        prop_assert_eq!(&left, &right);
    }

    #[test]
    fn timestamps_are_kept_to_the_nanosecond(created in any_time(), updated in any_time()) {
        let mut metadata = metadata();
        metadata.set_timestamps(created, updated);
        prop_assert_eq!(metadata.created(), created);
        prop_assert_eq!(metadata.updated(), updated);
        prop_assert_eq!(metadata.clone().updated(), updated);
    }

    #[test]
    fn version_phase_and_timestamps_are_kept_apart(
        version in version(),
        phase in phase(),
        created in any_time(),
        updated in any_time(),
    ) {
        // Set in every order: none of them may change another.
        let mut first = metadata();
        first.set_version(version);
        first.set_phase(phase);
        first.set_timestamps(created, updated);
        let mut second = metadata();
        second.set_timestamps(created, updated);
        second.set_phase(phase);
        second.set_version(version);
        for metadata in [&first, &second] {
            prop_assert_eq!(metadata.version(), version);
            prop_assert_eq!(metadata.phase(), phase);
            prop_assert_eq!((metadata.created(), metadata.updated()), (created, updated));
        }
        prop_assert_eq!(&first, &second);
    }

    #[test]
    fn identity_and_state_fields_affect_equality(version in version(), phase in phase(), owner in "[a-z]{1,8}") {
        let base = metadata();
        let mut changed = base.clone();
        changed.set_version(version);
        prop_assert_eq!(changed == base, version == base.version());

        let mut changed = base.clone();
        changed.set_phase(phase);
        prop_assert_eq!(changed == base, phase == base.phase());

        let mut changed = base.clone();
        changed.set_owner(Some(owner.as_str()));
        prop_assert_ne!(&changed, &base);
        // An empty owner is no owner.
        changed.set_owner(Some(""));
        prop_assert_eq!(&changed, &base);

        prop_assert_ne!(&Metadata::new("other", base.r#type(), base.id()), &base);
        prop_assert_ne!(&Metadata::new(base.namespace(), "Others.test.example.org", base.id()), &base);
        prop_assert_ne!(&Metadata::new(base.namespace(), base.r#type(), "other"), &base);
    }

    #[test]
    fn version_next_counts_up(value in 0..u64::MAX) {
        prop_assert_eq!(Version::new(value).next(), Version::new(value + 1));
        prop_assert_eq!(Version::new(value).next().get(), Some(value + 1));
    }

    #[test]
    fn version_round_trips_through_text(version in version()) {
        let text = version.to_string();
        prop_assert_eq!(text.parse::<Version>(), Ok(version));
    }

    #[test]
    fn version_rejects_non_numbers(text in "[a-z -]{1,10}") {
        prop_assume!(text != "undefined");
        prop_assert!(text.parse::<Version>().is_err());
    }

    #[test]
    fn phase_round_trips_through_text(phase in phase()) {
        prop_assert_eq!(phase.to_string().parse::<Phase>(), Ok(phase));
    }

    #[test]
    fn phase_rejects_unknown_names(text in "[a-zA-Z]{0,12}") {
        prop_assume!(text != "running" && text != "tearingDown");
        let err = text.parse::<Phase>().unwrap_err();
        prop_assert!(err.to_string().starts_with("unknown phase"), "{err}");
    }
}

#[test]
fn timestamps_at_the_ends_of_the_platforms_range_are_kept() {
    let earliest = UNIX_EPOCH - Duration::from_secs(i64::MAX.unsigned_abs() + 1);
    let latest = UNIX_EPOCH + Duration::new(i64::MAX.unsigned_abs(), 999_999_999);
    let just_before = UNIX_EPOCH - Duration::from_nanos(1);
    for time in [earliest, latest, just_before, UNIX_EPOCH] {
        let mut metadata = metadata();
        metadata.set_timestamps(time, time);
        assert_eq!((metadata.created(), metadata.updated()), (time, time), "{time:?}");
    }
}

#[test]
fn undefined_version_is_followed_by_one() {
    assert_eq!(Version::UNDEFINED.next(), Version::new(1));
    assert!(Version::UNDEFINED.is_undefined());
    assert!(!Version::UNDEFINED.next().is_undefined());
    assert_eq!(Version::UNDEFINED.to_string(), "undefined");
    assert_eq!("undefined".parse::<Version>(), Ok(Version::UNDEFINED));
}

#[test]
fn phase_names_match_go() {
    assert_eq!(Phase::Running.to_string(), "running");
    assert_eq!(Phase::TearingDown.to_string(), "tearingDown");
    assert_eq!(metadata().phase(), Phase::Running);
    assert!(metadata().version().is_undefined());
}

#[test]
fn finalizers_from_iter_drop_duplicates() {
    let finalizers: Finalizers = ["a", "b", "a"].into_iter().collect();
    assert_eq!(finalizers.iter().collect::<BTreeSet<_>>(), BTreeSet::from(["a", "b"]));
    assert_eq!(finalizers.len(), 2);
}

#[test]
fn metadata_round_trips_through_serde_and_rejects_malformed_fields() {
    let mut metadata = Metadata::new("network", "HostnameStatuses.net.example.org", "default");
    metadata.set_version(Version::new(7));
    metadata.set_owner(Some("hostname"));
    metadata.set_phase(Phase::TearingDown);
    metadata.labels_mut().set("app", "");
    metadata.annotations_mut().set("note", "kept");
    metadata.finalizers_mut().add("consumer");

    let json = serde_json::to_value(&metadata).unwrap();
    assert_eq!(json["namespace"], "network");
    assert_eq!(json["type"], "HostnameStatuses.net.example.org");
    assert_eq!(json["version"], 7);
    assert_eq!(json["phase"], "tearingDown");
    assert_eq!(json["labels"]["app"], "");
    let back: Metadata = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, metadata);
    assert_eq!(back.created(), metadata.created());
    assert_eq!(back.updated(), metadata.updated());

    for (field, value) in [("version", serde_json::json!("seven")), ("phase", serde_json::json!("sleeping"))] {
        let mut bad = json.clone();
        bad[field] = value;
        let err = serde_json::from_value::<Metadata>(bad).unwrap_err();
        assert!(!err.to_string().is_empty(), "{field}");
    }
    let mut bad = json.clone();
    bad["created"]["nanos"] = serde_json::json!(1_000_000_000u32);
    assert!(serde_json::from_value::<Metadata>(bad).unwrap_err().to_string().contains("nanos"));
}
