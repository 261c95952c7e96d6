//! Properties of label and ID queries, through the `cosi` facade.

use cosi::{IdQuery, LabelOp, LabelQuery, LabelTerm, Labels};
use proptest::prelude::*;

/// Label sets over a few keys, so that terms hit both present and missing keys.
fn labels() -> impl Strategy<Value = Labels> {
    prop::collection::btree_map("[a-d]", "[a-z0-9]{0,3}", 0..4).prop_map(|map| map.into_iter().collect())
}

fn key() -> impl Strategy<Value = String> {
    "[a-d]".prop_map(String::from)
}

/// Any term a well-behaved caller builds, inverted or not.
fn term() -> impl Strategy<Value = LabelTerm> {
    let value = "[a-z0-9]{0,3}";
    let plain = prop_oneof![
        key().prop_map(LabelTerm::exists),
        (key(), value).prop_map(|(k, v)| LabelTerm::equal(k, v)),
        (key(), prop::collection::vec(value, 1..4)).prop_map(|(k, vs)| LabelTerm::in_values(k, vs)),
        comparison(),
    ];
    (plain, any::<bool>()).prop_map(|(term, invert)| if invert { term.invert() } else { term })
}

/// A term with one of the ordering operators, not inverted.
fn comparison() -> impl Strategy<Value = LabelTerm> {
    let value = "[a-z0-9]{0,3}";
    prop_oneof![
        (key(), value).prop_map(|(k, v)| LabelTerm::lt(k, v)),
        (key(), value).prop_map(|(k, v)| LabelTerm::lte(k, v)),
        (key(), number()).prop_map(|(k, v)| LabelTerm::lt_numeric(k, v)),
        (key(), number()).prop_map(|(k, v)| LabelTerm::lte_numeric(k, v)),
    ]
}

fn is_numeric(op: LabelOp) -> bool {
    matches!(op, LabelOp::LtNumeric | LabelOp::LteNumeric)
}

/// A unit suffix as people write it and the factor it stands for.
fn unit() -> impl Strategy<Value = (&'static str, i64)> {
    prop::sample::select(vec![
        ("", 1),
        ("k", 1_000),
        ("K", 1_000),
        (" kB", 1_000),
        ("M", 1_000_000),
        ("mb ", 1_000_000),
        ("G", 1_000_000_000),
        ("GB", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("p", 1_000_000_000_000_000),
        ("Ki", 1 << 10),
        ("KiB", 1 << 10),
        (" mi", 1 << 20),
        ("Gi", 1 << 30),
        ("GiB", 1 << 30),
        ("Ti", 1 << 40),
        ("PI", 1 << 50),
    ])
}

/// A number in label syntax, small enough that no unit overflows it.
fn number() -> impl Strategy<Value = String> {
    (-2000i64..2000, unit()).prop_map(|(n, (unit, _))| format!("{n}{unit}"))
}

/// The characters the `regex` crate escapes, so the test needs no `regex` dependency.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

proptest! {
    #[test]
    fn inverting_a_decidable_term_flips_it(term in term(), mut labels in labels(), fallback in number()) {
        // Make the term decidable: comparisons need the key, numeric ones a number.
        let decidable = match labels.get(&term.key) {
            None => !term.op.is_comparison(),
            Some(value) => !is_numeric(term.op) || value.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty(),
        };
        if !decidable {
            labels.set(term.key.clone(), fallback);
        }
        prop_assert_ne!(term.matches(&labels), term.clone().invert().matches(&labels));
    }

    #[test]
    fn comparisons_never_match_a_missing_key(term in comparison(), mut labels in labels()) {
        labels.remove(&term.key);
        prop_assert!(!term.matches(&labels));
        prop_assert!(!term.invert().matches(&labels));
    }

    #[test]
    fn unparsable_numbers_never_match(
        lte in any::<bool>(),
        operand in number(),
        value in "[a-z.+ ]{0,4}|1[.x]5",
    ) {
        let term = if lte { LabelTerm::lte_numeric("k", operand) } else { LabelTerm::lt_numeric("k", operand) };
        let labels: Labels = [("k", value.as_str())].into_iter().collect();
        prop_assert!(!term.matches(&labels));
        prop_assert!(!term.invert().matches(&labels));
    }

    #[test]
    fn a_query_is_the_and_of_its_terms(terms in prop::collection::vec(term(), 0..5), labels in labels()) {
        let expected = terms.iter().all(|term| term.matches(&labels));
        let query = terms.into_iter().fold(LabelQuery::new(), LabelQuery::term);
        prop_assert_eq!(query.matches(&labels), expected);
    }

    #[test]
    fn built_queries_validate(terms in prop::collection::vec(term(), 0..5)) {
        let query = LabelQuery { terms };
        prop_assert!(query.validate().is_ok(), "{query:?}");
    }

    #[test]
    fn units_compare_like_the_multiplied_integer(
        n in -2000i64..2000,
        (unit, factor) in unit(),
        near in any::<bool>(),
        delta in -2i64..=2,
        far in -3_000_000_000_000_000i64..3_000_000_000_000_000,
    ) {
        let with_unit = format!("{n}{unit}");
        let value = n * factor;
        // Values close to each other are where an off-by-one would show.
        let other = if near { value + delta } else { far };
        let plain = other.to_string();
        let label = |v: &str| -> Labels { [("size", v)].into_iter().collect() };

        prop_assert_eq!(LabelTerm::lt_numeric("size", &plain).matches(&label(&with_unit)), value < other);
        prop_assert_eq!(LabelTerm::lte_numeric("size", &plain).matches(&label(&with_unit)), value <= other);
        prop_assert_eq!(LabelTerm::lt_numeric("size", &with_unit).matches(&label(&plain)), other < value);
        prop_assert_eq!(LabelTerm::lte_numeric("size", &with_unit).matches(&label(&plain)), other <= value);
        // A value always equals itself, whatever its spelling.
        prop_assert!(LabelTerm::lte_numeric("size", value.to_string()).matches(&label(&with_unit)));
        prop_assert!(!LabelTerm::lt_numeric("size", value.to_string()).matches(&label(&with_unit)));
    }

    #[test]
    fn lt_implies_lte(term in term(), labels in labels()) {
        let lte_op = match term.op {
            LabelOp::Lt => LabelOp::Lte,
            LabelOp::LtNumeric => LabelOp::LteNumeric,
            _ => return Ok(()),
        };
        let lt = LabelTerm { invert: false, ..term };
        let lte = LabelTerm { op: lte_op, ..lt.clone() };
        prop_assert!(!lt.matches(&labels) || lte.matches(&labels));
    }

    #[test]
    fn string_comparisons_follow_byte_order(value in any::<String>(), operand in any::<String>()) {
        let labels: Labels = [("k", value.as_str())].into_iter().collect();
        prop_assert_eq!(LabelTerm::lt("k", &operand).matches(&labels), value.as_bytes() < operand.as_bytes());
        prop_assert_eq!(LabelTerm::lte("k", &operand).matches(&labels), value.as_bytes() <= operand.as_bytes());
    }

    #[test]
    fn anchored_escaped_id_matches_only_itself(id in any::<String>(), other in any::<String>()) {
        let query = IdQuery::new(&format!("^{}$", escape(&id))).unwrap();
        prop_assert!(query.matches(&id));
        prop_assert_eq!(query.matches(&other), other == id);
        // Unanchored, the ID matches wherever it occurs.
        let query = IdQuery::new(&escape(&id)).unwrap();
        let surrounded = format!("{other}{id}{other}");
        prop_assert!(query.matches(&surrounded));
    }

    #[test]
    fn random_patterns_compile_or_fail_cleanly(
        pattern in prop_oneof![any::<String>(), r"[a-z0-9()\[\]{}*+?|^$\\.,:-]{0,24}"],
        id in any::<String>(),
    ) {
        match IdQuery::new(&pattern) {
            Ok(query) => {
                prop_assert_eq!(query.as_str(), pattern.as_str());
                let _matched = query.matches(&id);
            }
            Err(err) => prop_assert!(err.is_invalid_argument(), "{err}"),
        }
    }
}
