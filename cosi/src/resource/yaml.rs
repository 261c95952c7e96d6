//! YAML from outside the process, decoded with its aliases bounded.
//!
//! An alias repeats its anchor's whole value wherever it is written, so a
//! small text can stand for an enormous document: an anchored list of 10,000
//! values, aliased 10,000 times, is 60 KB of text and 10^8 values decoded.
//! `serde_yaml_ng` counts alias jumps but not what each one expands to, so
//! [`from_yaml`] first walks the document as a decoder would, aliases
//! expanded, spending a budget, and decodes only when the walk stays within
//! it. Text without a `*` has no alias and goes straight to the decoder.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess};

/// Values and bytes of strings per byte of text that a document may decode
/// to: more than any document without aliases can (a byte of text is at most
/// 1.5 values and bytes, as in `{a,b}`, or 1.5 bytes of string, as the escape `\L` is).
const SIZE_PER_BYTE: u64 = 3;

/// What aliases may add to a document, in values and bytes of strings, beyond
/// `SIZE_PER_BYTE` per byte of its text.
const ALIAS_ALLOWANCE: u64 = 1 << 18;

/// Decodes one YAML document as a `T`, refusing one whose aliases expand it
/// past 3 values or bytes of strings per byte of text plus 262,144 (more than
/// any document without aliases can be), as Go's `yaml.v3` refuses
/// "excessive aliasing".
///
/// Every decoder of YAML that another program wrote (a spec, a definition)
/// goes through here, so no text sizes a decode beyond a fixed multiple of its
/// own length.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
///
/// let text = "base: &base [1, 2]\ncopy: *base\n";
/// let value: BTreeMap<String, Vec<u32>> = cosi::resource::from_yaml(text)?;
/// assert_eq!(value["copy"], [1, 2]);
///
/// let ten = format!("[{}]", ["0"; 10].join(","));
/// let bomb = format!("a: &a {ten}\nb: &b [{}]\nc: [{}]\n", ["*a"; 100].join(","), ["*b"; 1000].join(","));
/// let err = cosi::resource::from_yaml::<serde_json::Value>(&bomb).unwrap_err();
/// assert!(err.to_string().contains("aliases"), "{err}");
/// # Ok::<(), cosi::resource::YamlError>(())
/// ```
pub fn from_yaml<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, YamlError> {
    if text.as_bytes().contains(&b'*') {
        check_expansion(text)?;
    }
    serde_yaml_ng::from_str(text).map_err(|err| YamlError(Repr::Yaml(err)))
}

/// Why [`from_yaml`] refused a document: its aliases expand it too far, or it
/// is not YAML of the wanted shape.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct YamlError(Repr);

impl YamlError {
    /// Whether the document was refused for what its aliases expand to.
    pub fn is_excessive_aliasing(&self) -> bool {
        matches!(self.0, Repr::Aliases { .. })
    }

    /// Where in the text the decoder stopped (line and column, from 1),
    /// when it says.
    pub fn location(&self) -> Option<(usize, usize)> {
        match &self.0 {
            Repr::Yaml(err) => err.location().map(|location| (location.line(), location.column())),
            Repr::Aliases { .. } => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum Repr {
    #[error("the YAML expands through its aliases to more than {limit} values and bytes of strings")]
    Aliases { limit: u64 },
    #[error(transparent)]
    Yaml(serde_yaml_ng::Error),
}

/// Walks the document with its aliases expanded, stopping as soon as it has
/// spent the budget its length allows.
fn check_expansion(text: &str) -> Result<(), YamlError> {
    let limit = (text.len() as u64).saturating_mul(SIZE_PER_BYTE).saturating_add(ALIAS_ALLOWANCE);
    let budget = Budget { left: Cell::new(limit), spent: Cell::new(false) };
    match Count(&budget).deserialize(serde_yaml_ng::Deserializer::from_str(text)) {
        Ok(()) => Ok(()),
        Err(_) if budget.spent.get() => Err(YamlError(Repr::Aliases { limit })),
        // The walk accepts any value, so this is the text's own error, which
        // decoding would meet too; decoding anyway could expand unbounded
        // past the point where the walk stopped.
        Err(err) => Err(YamlError(Repr::Yaml(err))),
    }
}

struct Budget {
    left: Cell<u64>,
    spent: Cell<bool>,
}

impl Budget {
    fn spend<E: de::Error>(&self, units: usize) -> Result<(), E> {
        match self.left.get().checked_sub(units as u64) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.spent.set(true);
                Err(E::custom("the YAML expands too far through its aliases"))
            }
        }
    }
}

/// A seed and visitor that decodes nothing: it visits every value, aliases
/// expanded as the decoder replays them, and spends one unit per value plus
/// one per byte of each string.
#[derive(Clone, Copy)]
struct Count<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        self.0.spend(1 + value.len())
    }

    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<(), E> {
        self.0.spend(1 + value.len())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.spend(1)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.spend(1)?;
        self.deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.spend(1)?;
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.spend(1)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.spend(1)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    /// A tagged value (`!Tag value`): the tag, then the value.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        self.0.spend(1)?;
        let ((), value) = data.variant_seed(self)?;
        value.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    /// 10,000 zeros anchored, then aliased 10,000 times: about 60 KB of text
    /// that expands to 10^8 values.
    pub(crate) fn bomb() -> String {
        format!("a: &a [{}]\nb: [{}]\n", ["0"; 10_000].join(","), ["*a"; 10_000].join(","))
    }

    #[test]
    fn an_alias_bomb_is_refused() {
        let bomb = bomb();
        let err = from_yaml::<serde_yaml_ng::Value>(&bomb).unwrap_err();
        assert!(err.is_excessive_aliasing(), "{err}");
        assert!(err.to_string().starts_with("the YAML expands through its aliases"), "{err}");
    }

    #[test]
    fn an_alias_bomb_is_refused_whatever_the_target() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Spec {
            a: Vec<u8>,
            b: Vec<Vec<u8>>,
        }
        let err = from_yaml::<Spec>(&bomb()).unwrap_err();
        assert!(err.is_excessive_aliasing(), "{err}");
    }

    #[test]
    fn a_few_anchors_and_aliases_still_decode() {
        let text = "base: &base {cpu: 2, tags: [a, b]}\nweb: *base\ndb: *base\nname: &n x*y\nalso: *n\n";
        let value: BTreeMap<String, serde_yaml_ng::Value> = from_yaml(text).unwrap();
        assert_eq!(value["web"], value["base"]);
        assert_eq!(value["db"]["tags"][1], serde_yaml_ng::Value::from("b"));
        assert_eq!(value["also"], serde_yaml_ng::Value::from("x*y"));
    }

    #[test]
    fn expansion_up_to_the_allowance_decodes() {
        // 1,000 values aliased 200 times: 200,000 values, under the allowance.
        let text = format!("a: &a [{}]\nb: [{}]\n", ["0"; 1_000].join(","), ["*a"; 200].join(","));
        let value: BTreeMap<String, Vec<serde_yaml_ng::Value>> = from_yaml(&text).unwrap();
        assert_eq!(value["b"].len(), 200);
    }

    #[test]
    fn long_strings_count_by_their_bytes() {
        // Few values, but each alias copies a 100 KB string: 40 MB decoded.
        let text = format!("a: &a {}\nb: [{}]\n", "x".repeat(100_000), ["*a"; 400].join(","));
        let err = from_yaml::<serde_yaml_ng::Value>(&text).unwrap_err();
        assert!(err.is_excessive_aliasing(), "{err}");
    }

    #[test]
    fn tagged_values_are_walked() {
        let text = format!("a: &a !T [{}]\nb: [{}]\n", ["0"; 10_000].join(","), ["*a"; 10_000].join(","));
        let err = from_yaml::<serde_yaml_ng::Value>(&text).unwrap_err();
        assert!(err.is_excessive_aliasing(), "{err}");
        let value: serde_yaml_ng::Value = from_yaml("a: &a !T {x: 1}\nb: *a\n").unwrap();
        assert_eq!(value["a"], value["b"]);
    }

    #[test]
    fn text_with_a_star_and_no_alias_decodes_as_before() {
        for text in ["pattern: '*.example.org'\n", "# a * comment\nx: 1\n", "x: a*b\n", "x: |\n  * item\n"] {
            assert_eq!(
                from_yaml::<serde_yaml_ng::Value>(text).unwrap(),
                serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn errors_are_the_decoders() {
        for text in ["x: [1, 2\n", "x: *missing\n", "a: 1\n---\nb: 2\n", "- *a\n"] {
            let ours = from_yaml::<serde_yaml_ng::Value>(text).unwrap_err();
            let theirs = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).unwrap_err();
            assert!(!ours.is_excessive_aliasing());
            assert_eq!(ours.to_string(), theirs.to_string(), "{text}");
            let location = theirs.location().map(|location| (location.line(), location.column()));
            assert_eq!(ours.location(), location, "{text}");
        }
    }

    #[test]
    fn an_alias_free_document_is_never_refused() {
        // The densest texts there are in values (a key, its byte and its null
        // value for every two bytes) and in bytes of strings, each with a `*`
        // so that it is walked, and long enough that the allowance alone
        // would not cover them.
        let values = format!("{{'*',{}a}}", "a,".repeat(600_000));
        let escapes = format!("\"*{}\"", "\\L".repeat(600_000));
        for text in [values, escapes] {
            if let Err(err) = from_yaml::<de::IgnoredAny>(&text) {
                panic!("{err}");
            }
        }
    }
}
