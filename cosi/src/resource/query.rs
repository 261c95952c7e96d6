//! Resource queries: [`LabelQuery`] selects on labels, [`IdQuery`] on IDs.
//!
//! Both are plain values that lists and watches carry. Evaluation never fails:
//! a label the query cannot judge (a missing key for a comparison, a value that
//! is not a number) simply does not match. Malformed queries are rejected up
//! front by [`LabelQuery::validate`] and [`IdQuery::new`] with
//! [`Error::InvalidArgument`].

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use regex_automata::meta;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind};

use crate::resource::Labels;
use crate::state::Error;

/// A conjunction of label terms: a resource matches when every term does.
///
/// The empty query matches everything. Where an operation takes several
/// queries, a resource matches when any of them does, so OR is expressed as a
/// list of queries and AND as a list of terms.
///
/// # Example
///
/// ```
/// use cosi::{LabelQuery, Labels};
///
/// let query = LabelQuery::new()
///     .exists("tier")
///     .equal("app", "web")
///     .not_in("zone", ["a", "b"])
///     .lt_numeric("mem", "2Gi");
/// query.validate()?;
///
/// let labels: Labels = [("tier", "front"), ("app", "web"), ("zone", "c"), ("mem", "512Mi")].into_iter().collect();
/// assert!(query.matches(&labels));
///
/// // Comparisons never match a missing key, inverted or not.
/// let labels: Labels = [("tier", "front"), ("app", "web")].into_iter().collect();
/// assert!(!LabelQuery::new().lt_numeric("mem", "2Gi").matches(&labels));
/// assert!(!LabelQuery::new().not_lt_numeric("mem", "2Gi").matches(&labels));
/// # Ok::<(), cosi::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelQuery {
    /// The terms, ANDed.
    pub terms: Vec<LabelTerm>,
}

/// One condition on one label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelTerm {
    /// The label key.
    pub key: String,
    /// The operand: one value for every operator but [`LabelOp::In`], none for [`LabelOp::Exists`].
    pub values: Vec<String>,
    /// The comparison.
    pub op: LabelOp,
    /// Negates the result, except where the term cannot be judged (see [`LabelTerm::matches`]).
    pub invert: bool,
}

/// The comparison a [`LabelTerm`] makes between a label and its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LabelOp {
    /// The key is set, to any value.
    Exists,
    /// The value equals the operand.
    Equal,
    /// The value is one of the operands.
    In,
    /// The value sorts byte-wise before the operand.
    Lt,
    /// The value sorts byte-wise before or equal to the operand.
    Lte,
    /// The value is a smaller number than the operand (see [`LabelOp::is_numeric`] for the syntax).
    LtNumeric,
    /// The value is a number smaller than or equal to the operand.
    LteNumeric,
}

/// A regular expression on resource IDs.
///
/// The syntax is that of the `regex` crate, which follows RE2 as Go's `regexp`
/// does; one difference is that `\d`, `\w` and `\s` are Unicode-aware here
/// (`(?-u:\w)` is the ASCII class Go means by `\w`). The match is unanchored
/// unless the pattern anchors itself: `^web` selects IDs starting with `web`,
/// `^web$` only `web`.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let query = IdQuery::new("^eth[0-9]+$")?;
/// assert!(query.matches("eth0"));
/// assert!(!query.matches("lo"));
/// assert!(IdQuery::new("(").is_err());
/// # Ok::<(), cosi::Error>(())
/// ```
pub struct IdQuery {
    regex: meta::Regex,
    pattern: Arc<str>,
    /// The one cache its matches use (a clone has its own). The regex's own
    /// pool would keep a cache per thread that ever matched, so what a query
    /// holds could not be told; with one, [`IdQuery::memory_usage`] can.
    /// Boxed: it is large, and options carrying a query are moved about.
    cache: Box<Mutex<meta::Cache>>,
}

impl LabelQuery {
    /// The empty query, which matches everything.
    pub const fn new() -> Self {
        LabelQuery { terms: Vec::new() }
    }

    /// Adds `term`; the general form of the builders below.
    #[must_use]
    pub fn term(mut self, term: LabelTerm) -> Self {
        self.terms.push(term);
        self
    }

    /// Requires `key` to be set.
    #[must_use]
    pub fn exists(self, key: impl Into<String>) -> Self {
        self.term(LabelTerm::exists(key))
    }

    /// Requires `key` to be missing.
    #[must_use]
    pub fn not_exists(self, key: impl Into<String>) -> Self {
        self.term(LabelTerm::exists(key).invert())
    }

    /// Requires `key` to be set to `value`.
    #[must_use]
    pub fn equal(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::equal(key, value))
    }

    /// Requires `key` to be missing or set to another value than `value`.
    #[must_use]
    pub fn not_equal(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::equal(key, value).invert())
    }

    /// Requires `key` to be set to one of `values`.
    #[must_use]
    pub fn in_values(self, key: impl Into<String>, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.term(LabelTerm::in_values(key, values))
    }

    /// Requires `key` to be missing or set to none of `values`.
    #[must_use]
    pub fn not_in(self, key: impl Into<String>, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.term(LabelTerm::in_values(key, values).invert())
    }

    /// Requires `key` to be set to a value sorting byte-wise before `value`.
    #[must_use]
    pub fn lt(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lt(key, value))
    }

    /// Requires `key` to be set to a value sorting byte-wise at or after `value`.
    #[must_use]
    pub fn not_lt(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lt(key, value).invert())
    }

    /// Requires `key` to be set to a value sorting byte-wise before or equal to `value`.
    #[must_use]
    pub fn lte(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lte(key, value))
    }

    /// Requires `key` to be set to a value sorting byte-wise after `value`.
    #[must_use]
    pub fn not_lte(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lte(key, value).invert())
    }

    /// Requires `key` to be set to a number below `value`.
    #[must_use]
    pub fn lt_numeric(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lt_numeric(key, value))
    }

    /// Requires `key` to be set to a number at or above `value`.
    #[must_use]
    pub fn not_lt_numeric(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lt_numeric(key, value).invert())
    }

    /// Requires `key` to be set to a number at or below `value`.
    #[must_use]
    pub fn lte_numeric(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lte_numeric(key, value))
    }

    /// Requires `key` to be set to a number above `value`.
    #[must_use]
    pub fn not_lte_numeric(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.term(LabelTerm::lte_numeric(key, value).invert())
    }

    /// Whether `labels` satisfy every term.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.terms.iter().all(|term| term.matches(labels))
    }

    /// Checks that every term is well-formed: a non-empty key, exactly one value
    /// for the single-operand operators, at least one for [`LabelOp::In`], and a
    /// number for the numeric ones.
    pub fn validate(&self) -> Result<(), Error> {
        for (index, term) in self.terms.iter().enumerate() {
            term.check().map_err(|reason| Error::invalid_argument(format!("label term {index} {term}: {reason}")))?;
        }
        Ok(())
    }
}

impl LabelTerm {
    /// `key` is set.
    pub fn exists(key: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::Exists, Vec::new())
    }

    /// `key` is set to `value`.
    pub fn equal(key: impl Into<String>, value: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::Equal, vec![value.into()])
    }

    /// `key` is set to one of `values`.
    pub fn in_values(key: impl Into<String>, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        LabelTerm::new(key, LabelOp::In, values.into_iter().map(Into::into).collect())
    }

    /// `key` is set to a value sorting byte-wise before `value`.
    pub fn lt(key: impl Into<String>, value: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::Lt, vec![value.into()])
    }

    /// `key` is set to a value sorting byte-wise before or equal to `value`.
    pub fn lte(key: impl Into<String>, value: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::Lte, vec![value.into()])
    }

    /// `key` is set to a number below `value`.
    pub fn lt_numeric(key: impl Into<String>, value: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::LtNumeric, vec![value.into()])
    }

    /// `key` is set to a number at or below `value`.
    pub fn lte_numeric(key: impl Into<String>, value: impl Into<String>) -> Self {
        LabelTerm::new(key, LabelOp::LteNumeric, vec![value.into()])
    }

    /// The negated term; inverting twice gives the term back.
    #[must_use]
    pub fn invert(mut self) -> Self {
        self.invert = !self.invert;
        self
    }

    /// Whether `labels` satisfy the term.
    ///
    /// A missing key satisfies no comparison ([`LabelOp::Lt`], [`LabelOp::Lte`],
    /// [`LabelOp::LtNumeric`], [`LabelOp::LteNumeric`]), and a value that is not
    /// a number satisfies no numeric one, whether the term is inverted or not:
    /// such labels are neither below nor at or above the operand. For the
    /// other operators a missing key matches only the inverted term.
    pub fn matches(&self, labels: &Labels) -> bool {
        // `None` is "undecided", which inversion does not turn into a match.
        self.evaluate(labels).is_some_and(|matched| matched != self.invert)
    }

    fn new(key: impl Into<String>, op: LabelOp, values: Vec<String>) -> Self {
        LabelTerm { key: key.into(), values, op, invert: false }
    }

    /// The result before inversion, `None` when the labels cannot be judged.
    fn evaluate(&self, labels: &Labels) -> Option<bool> {
        let Some(value) = labels.get(&self.key) else {
            return if self.op.is_comparison() { None } else { Some(false) };
        };
        let operand = match self.values.first() {
            Some(operand) => operand.as_str(),
            None if self.op == LabelOp::Exists => return Some(true),
            None => return Some(false),
        };
        match self.op {
            LabelOp::Exists => Some(true),
            LabelOp::Equal => Some(value == operand),
            LabelOp::In => Some(self.values.iter().any(|candidate| candidate == value)),
            LabelOp::Lt => Some(value < operand),
            LabelOp::Lte => Some(value <= operand),
            LabelOp::LtNumeric => Some(parse_number(value)? < parse_number(operand)?),
            LabelOp::LteNumeric => Some(parse_number(value)? <= parse_number(operand)?),
        }
    }

    /// Why the term is malformed, if it is.
    fn check(&self) -> Result<(), String> {
        if self.key.is_empty() {
            return Err("the key is empty".to_owned());
        }
        match (self.op, self.values.as_slice()) {
            (LabelOp::Exists, _) => Ok(()),
            (_, []) => Err(format!("{} needs a value", self.op)),
            (LabelOp::In, _) => Ok(()),
            (_, [_, _, ..]) => Err(format!("{} takes a single value, got {}", self.op, self.values.len())),
            (op, [operand]) if op.is_numeric() && parse_number(operand).is_none() => {
                Err(format!("{operand:?} is not a number with an optional unit suffix"))
            }
            (_, [_]) => Ok(()),
        }
    }
}

impl fmt::Display for LabelTerm {
    /// The builder call that makes the term, such as `not_in("zone", ["a", "b"])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.invert {
            f.write_str("not_")?;
        }
        match (self.op, self.values.as_slice()) {
            (LabelOp::Exists, _) => write!(f, "exists({:?})", self.key),
            // The inverted form of `in_values` is `not_in`.
            (LabelOp::In, values) if self.invert => write!(f, "in({:?}, {values:?})", self.key),
            (LabelOp::In, values) => write!(f, "in_values({:?}, {values:?})", self.key),
            (op, [value]) => write!(f, "{op}({:?}, {value:?})", self.key),
            (op, values) => write!(f, "{op}({:?}, {values:?})", self.key),
        }
    }
}

impl LabelOp {
    /// Whether the operator compares values as numbers.
    ///
    /// A number is an optional `-` and decimal digits (a 64-bit integer),
    /// optionally followed by a unit whose first letters count, case-insensitively:
    /// `ki`, `mi`, `gi`, `ti`, `pi` multiply by 2^10 to 2^50, otherwise `k`, `m`,
    /// `g`, `t`, `p` by 10^3 to 10^15. So `512Mi`, `4GB` and `-1 k` are numbers;
    /// `1.5k`, `1 i` and `1 1` are not.
    pub fn is_numeric(self) -> bool {
        matches!(self, LabelOp::LtNumeric | LabelOp::LteNumeric)
    }

    /// Whether the operator orders values, and so cannot judge a missing key.
    pub fn is_comparison(self) -> bool {
        matches!(self, LabelOp::Lt | LabelOp::Lte | LabelOp::LtNumeric | LabelOp::LteNumeric)
    }
}

impl fmt::Display for LabelOp {
    /// The name of the builder method, such as `lt_numeric`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LabelOp::Exists => "exists",
            LabelOp::Equal => "equal",
            LabelOp::In => "in_values",
            LabelOp::Lt => "lt",
            LabelOp::Lte => "lte",
            LabelOp::LtNumeric => "lt_numeric",
            LabelOp::LteNumeric => "lte_numeric",
        })
    }
}

/// The largest compiled ID regex, in bytes: it stops a hostile pattern such as
/// `(a{1000}){1000}` from taking memory before the query even runs. Unicode
/// classes are large (`\w{100}` compiles to several MiB), so a tighter limit
/// would reject patterns that Go accepts.
const ID_QUERY_SIZE_LIMIT: usize = 10 << 20;

impl IdQuery {
    /// Compiles `pattern`; an invalid or oversized pattern is an invalid argument.
    pub fn new(pattern: &str) -> Result<Self, Error> {
        let config =
            meta::Config::new().nfa_size_limit(Some(ID_QUERY_SIZE_LIMIT)).hybrid_cache_capacity(ID_QUERY_SIZE_LIMIT);
        IdQuery::build(pattern, config)
    }

    /// Compiles `pattern` into at most `bytes` of program (each of the
    /// regex's automata), for patterns from untrusted clients, which a server
    /// keeps for the life of a watch. It matches only with engines whose
    /// memory is fixed once compiled (no lazy DFA, whose cache grows as it
    /// runs), so [`IdQuery::memory_usage`] is all it ever holds. IDs are
    /// short, so the slower engines cost little.
    pub fn with_size_limit(pattern: &str, bytes: usize) -> Result<Self, Error> {
        let config = meta::Config::new()
            .nfa_size_limit(Some(bytes))
            .onepass_size_limit(Some(bytes))
            .dfa_size_limit(Some(bytes))
            .hybrid(false)
            .backtrack(false);
        IdQuery::build(pattern, config)
    }

    /// Compiles `pattern` as the `regex` crate's `Regex` does (the syntax is
    /// that crate's), with the engines and limits of `config`.
    fn build(pattern: &str, config: meta::Config) -> Result<Self, Error> {
        let regex = meta::Builder::new()
            .configure(config.match_kind(MatchKind::LeftmostFirst).utf8_empty(true))
            .syntax(syntax::Config::new().utf8(true))
            .build(pattern)
            .map_err(|err| {
                let reason = match (err.size_limit(), err.syntax_error()) {
                    (Some(limit), _) => format!("the compiled pattern exceeds the size limit of {limit} bytes"),
                    (None, Some(syntax)) => syntax.to_string(),
                    (None, None) => err.to_string(),
                };
                Error::invalid_argument(format!("invalid ID query {pattern:?}: {reason}"))
            })?;
        Ok(IdQuery { cache: Box::new(Mutex::new(full_cache(&regex))), regex, pattern: Arc::from(pattern) })
    }

    /// Whether `id` matches the pattern somewhere.
    pub fn matches(&self, id: &str) -> bool {
        self.regex.is_match_with(&mut self.cache.lock(), &Input::new(id))
    }

    /// The pattern the query was built from.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// The heap memory the query holds, in bytes: its compiled program, its
    /// match cache and its pattern. A query from [`IdQuery::with_size_limit`]
    /// never holds more; one from [`IdQuery::new`] may grow its cache as it
    /// matches, up to its limit.
    pub fn memory_usage(&self) -> usize {
        self.regex.memory_usage() + self.cache.lock().memory_usage() + self.pattern.len()
    }
}

/// A clone has a cache of its own, so that clones match without waiting for each other.
impl Clone for IdQuery {
    fn clone(&self) -> Self {
        let cache = Box::new(Mutex::new(full_cache(&self.regex)));
        IdQuery { regex: self.regex.clone(), pattern: Arc::clone(&self.pattern), cache }
    }
}

/// A match cache for `regex` with every engine's part made now: they are
/// otherwise made at their engine's first use, and what the query holds
/// would grow after it was counted.
fn full_cache(regex: &meta::Regex) -> meta::Cache {
    let mut cache = regex.create_cache();
    cache.reset(regex);
    cache
}

impl fmt::Debug for IdQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IdQuery").field(&self.as_str()).finish()
    }
}

/// Two queries are equal when their patterns are, character for character.
impl PartialEq for IdQuery {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for IdQuery {}

/// Parses a label value as a number with an optional unit suffix (see [`LabelOp::is_numeric`]).
///
/// Results that overflow 64 bits are not numbers: Go wraps them around, which
/// would order `9000Pi` below `1`.
fn parse_number(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().ok()?;
    let unit = unit.trim().to_lowercase();
    // Only the prefix of the unit counts, so `4GB` is 4e9 and `10kg` is 10000.
    let multiplier: i64 = match unit.as_bytes() {
        [] => 1,
        [b'p', b'i', ..] => 1 << 50,
        [b't', b'i', ..] => 1 << 40,
        [b'g', b'i', ..] => 1 << 30,
        [b'm', b'i', ..] => 1 << 20,
        [b'k', b'i', ..] => 1 << 10,
        [b'p', ..] => 1_000_000_000_000_000,
        [b't', ..] => 1_000_000_000_000,
        [b'g', ..] => 1_000_000_000,
        [b'm', ..] => 1_000_000,
        [b'k', ..] => 1_000,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().copied().collect()
    }

    /// The term's result plain and inverted.
    fn both(term: LabelTerm, labels: &Labels) -> (bool, bool) {
        (term.clone().matches(labels), term.invert().matches(labels))
    }

    #[test]
    fn exists_on_empty_labels_is_false() {
        assert_eq!(both(LabelTerm::exists("a"), &Labels::default()), (false, true));
    }

    #[test]
    fn comparison_on_missing_key_is_undecided() {
        let labels = labels(&[("other", "1")]);
        for term in [
            LabelTerm::lt("a", "5"),
            LabelTerm::lte("a", "5"),
            LabelTerm::lt_numeric("a", "5"),
            LabelTerm::lte_numeric("a", "5"),
        ] {
            assert_eq!(both(term.clone(), &labels), (false, false), "{term}");
            assert_eq!(both(term.clone(), &Labels::default()), (false, false), "{term}");
        }
    }

    #[test]
    fn other_ops_on_missing_key_are_false() {
        let labels = labels(&[("other", "1")]);
        for term in [LabelTerm::exists("a"), LabelTerm::equal("a", "1"), LabelTerm::in_values("a", ["1"])] {
            assert_eq!(both(term.clone(), &labels), (false, true), "{term}");
        }
        assert_eq!(both(LabelTerm::equal("a", "1"), &Labels::default()), (false, true));
    }

    #[test]
    fn missing_operand_is_false() {
        let labels = labels(&[("a", "1")]);
        for op in [LabelOp::Equal, LabelOp::In, LabelOp::Lt, LabelOp::Lte, LabelOp::LtNumeric, LabelOp::LteNumeric] {
            let term = LabelTerm::new("a", op, Vec::new());
            assert_eq!(both(term, &labels), (false, true), "{op}");
        }
    }

    #[test]
    fn exists_ignores_the_value() {
        assert_eq!(both(LabelTerm::exists("a"), &labels(&[("a", "")])), (true, false));
    }

    #[test]
    fn equal_compares_the_first_value() {
        let labels = labels(&[("a", "x")]);
        assert_eq!(both(LabelTerm::equal("a", "x"), &labels), (true, false));
        assert_eq!(both(LabelTerm::equal("a", "y"), &labels), (false, true));
        assert_eq!(both(LabelTerm::equal("a", ""), &labels), (false, true));
    }

    #[test]
    fn in_looks_through_all_values() {
        let labels = labels(&[("a", "x")]);
        assert_eq!(both(LabelTerm::in_values("a", ["y", "x"]), &labels), (true, false));
        assert_eq!(both(LabelTerm::in_values("a", ["y", "z"]), &labels), (false, true));
    }

    #[test]
    fn lt_and_lte_compare_bytes() {
        let labels = labels(&[("a", "10")]);
        // "10" < "9" byte-wise, though not as numbers.
        assert_eq!(both(LabelTerm::lt("a", "9"), &labels), (true, false));
        assert_eq!(both(LabelTerm::lt("a", "10"), &labels), (false, true));
        assert_eq!(both(LabelTerm::lte("a", "10"), &labels), (true, false));
        assert_eq!(both(LabelTerm::lte("a", "1"), &labels), (false, true));
    }

    #[test]
    fn numeric_ops_compare_numbers() {
        let labels = labels(&[("mem", "4GiB")]);
        assert_eq!(both(LabelTerm::lt_numeric("mem", "5G"), &labels), (true, false));
        assert_eq!(both(LabelTerm::lt_numeric("mem", "4Gi"), &labels), (false, true));
        assert_eq!(both(LabelTerm::lte_numeric("mem", "4Gi"), &labels), (true, false));
        assert_eq!(both(LabelTerm::lte_numeric("mem", "4G"), &labels), (false, true));
    }

    #[test]
    fn unparsable_numbers_are_undecided() {
        let bad = labels(&[("mem", "lots")]);
        assert_eq!(both(LabelTerm::lt_numeric("mem", "5"), &bad), (false, false));
        assert_eq!(both(LabelTerm::lte_numeric("mem", "5"), &bad), (false, false));
        let good = labels(&[("mem", "1")]);
        assert_eq!(both(LabelTerm::lt_numeric("mem", "five"), &good), (false, false));
        assert_eq!(both(LabelTerm::lte_numeric("mem", "five"), &good), (false, false));
    }

    #[test]
    fn query_ands_terms_and_empty_matches_all() {
        let labels = labels(&[("app", "web"), ("mem", "100")]);
        assert!(LabelQuery::new().matches(&labels));
        assert!(LabelQuery::new().matches(&Labels::default()));
        assert!(LabelQuery::new().equal("app", "web").lt_numeric("mem", "1k").matches(&labels));
        assert!(!LabelQuery::new().equal("app", "web").lt_numeric("mem", "10").matches(&labels));
        assert!(LabelQuery::new().not_exists("zone").not_in("app", ["db"]).matches(&labels));
    }

    #[test]
    fn parses_numbers_with_units() {
        for (text, expected) in [
            ("1", Some(1)),
            ("2000", Some(2000)),
            ("-5", Some(-5)),
            ("4GiB", Some(4 << 30)),
            ("4GB", Some(4_000_000_000)),
            ("10kg", Some(10_000)),
            (" 1 k", Some(1000)),
            ("-1 k", Some(-1000)),
            ("1Ki", Some(1024)),
            ("1mi", Some(1 << 20)),
            ("1 Ti ", Some(1 << 40)),
            ("1pi", Some(1 << 50)),
            ("1P", Some(1_000_000_000_000_000)),
            ("1t", Some(1_000_000_000_000)),
            ("3M", Some(3_000_000)),
            ("1.1 k", None),
            ("1 i", None),
            ("1 1", None),
            ("1-2", None),
            ("", None),
            ("k", None),
            ("-", None),
            ("+1", None),
            ("1x", None),
            ("99999999999999999999", None),
            ("9000Pi", None),
            ("-9000Pi", None),
            ("8191Pi", Some(8191 << 50)),
            ("-9223372036854775808", Some(i64::MIN)),
        ] {
            assert_eq!(parse_number(text), expected, "{text:?}");
        }
    }

    #[test]
    fn validate_accepts_well_formed_queries() {
        let query = LabelQuery::new()
            .exists("a")
            .not_equal("b", "")
            .in_values("c", ["x", "y"])
            .lt("d", "z")
            .lte_numeric("e", "-3Mi")
            .term(LabelTerm { key: "f".into(), values: vec!["ignored".into()], op: LabelOp::Exists, invert: true });
        query.validate().unwrap();
        LabelQuery::new().validate().unwrap();
    }

    #[test]
    fn validate_rejects_malformed_terms() {
        let many = |op| LabelTerm::new("k", op, vec!["1".into(), "2".into()]);
        for (term, reason) in [
            (LabelTerm::exists(""), "the key is empty"),
            (LabelTerm::new("k", LabelOp::Equal, Vec::new()), "equal needs a value"),
            (LabelTerm::new("k", LabelOp::In, Vec::new()), "in_values needs a value"),
            (many(LabelOp::Equal), "equal takes a single value, got 2"),
            (many(LabelOp::Lt), "lt takes a single value, got 2"),
            (many(LabelOp::Lte), "lte takes a single value, got 2"),
            (many(LabelOp::LtNumeric), "lt_numeric takes a single value, got 2"),
            (many(LabelOp::LteNumeric), "lte_numeric takes a single value, got 2"),
            (LabelTerm::lt_numeric("k", "1.5k"), "\"1.5k\" is not a number with an optional unit suffix"),
            (LabelTerm::lte_numeric("k", "").invert(), "\"\" is not a number with an optional unit suffix"),
        ] {
            let err = LabelQuery::new().exists("fine").term(term.clone()).validate().unwrap_err();
            assert!(err.is_invalid_argument(), "{err}");
            assert_eq!(err.to_string(), format!("invalid argument: label term 1 {term}: {reason}"));
        }
    }

    #[test]
    fn terms_display_as_builder_calls() {
        assert_eq!(LabelTerm::exists("a").to_string(), r#"exists("a")"#);
        assert_eq!(LabelTerm::exists("a").invert().to_string(), r#"not_exists("a")"#);
        assert_eq!(LabelTerm::in_values("a", ["x"]).to_string(), r#"in_values("a", ["x"])"#);
        assert_eq!(LabelTerm::in_values("a", ["x", "y"]).invert().to_string(), r#"not_in("a", ["x", "y"])"#);
        assert_eq!(LabelTerm::lt_numeric("a", "1k").invert().to_string(), r#"not_lt_numeric("a", "1k")"#);
        assert_eq!(LabelTerm::new("a", LabelOp::Equal, Vec::new()).to_string(), r#"equal("a", [])"#);
    }

    #[test]
    fn id_query_matches_unanchored_unless_anchored() {
        let query = IdQuery::new("web").unwrap();
        assert!(query.matches("web"));
        assert!(query.matches("my-web-1"));
        assert!(!query.matches("db"));
        let anchored = IdQuery::new("^web$").unwrap();
        assert!(anchored.matches("web"));
        assert!(!anchored.matches("web-1"));
        assert!(IdQuery::new("").unwrap().matches("anything"));
        assert_eq!(anchored.as_str(), "^web$");
        assert_eq!(format!("{anchored:?}"), r#"IdQuery("^web$")"#);
        assert_eq!(anchored, IdQuery::new("^web$").unwrap());
        assert_ne!(anchored, IdQuery::new("^(web)$").unwrap());
    }

    #[test]
    fn id_query_rejects_bad_and_huge_patterns() {
        let err = IdQuery::new("(a").unwrap_err();
        assert!(err.is_invalid_argument());
        assert!(err.to_string().starts_with(r#"invalid argument: invalid ID query "(a": "#), "{err}");
        let err = IdQuery::new("(a{1000}){1000}").unwrap_err();
        assert!(err.is_invalid_argument());
        assert!(err.to_string().contains("size limit"), "{err}");
        let err = IdQuery::with_size_limit("(a{100}){100}", 64 << 10).unwrap_err();
        assert!(err.to_string().contains("exceeds the size limit of 65536 bytes"), "{err}");
    }

    #[test]
    fn a_bounded_id_query_holds_what_it_says_and_no_more_as_it_matches() {
        // Unanchored with Unicode classes: matched by the PikeVM, whose
        // cache the regex would otherwise make at its first match.
        let query = IdQuery::with_size_limit(r"(\pL|x)*y(\pL|z)*q", 1 << 20).unwrap();
        let before = query.memory_usage();
        assert!(before > 100 << 10, "the program and the cache count: {before}");
        for n in 0..1_000 {
            let id = format!("{}{n}y{}", "ab".repeat(n % 100), "é".repeat(n % 50));
            assert!(!query.matches(&id), "{id}");
            assert!(query.matches(&format!("{id}q")), "{id}q");
        }
        assert_eq!(query.memory_usage(), before, "matching grows nothing");
        let clone = query.clone();
        assert!(clone.matches("yq") && clone == query);
        assert_eq!(clone.memory_usage(), before, "a clone holds as much");
    }
}
