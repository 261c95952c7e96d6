//! Labels and annotations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A map of string keys to string values, used for labels and annotations.
///
/// A key set to the empty string is different from a missing key.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let mut labels = Labels::default();
/// labels.set("tier", "gold");
/// assert_eq!(labels.get("tier"), Some("gold"));
/// assert!(LabelQuery::default().equal("tier", "gold").matches(&labels));
/// assert_eq!(labels.remove("tier").as_deref(), Some("gold"));
/// assert!(labels.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    /// No labels: what a resource without any reads.
    pub(super) const EMPTY: Labels = Labels(BTreeMap::new());

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether `key` is set (possibly to the empty string).
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(key.into(), value.into())
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Labels(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}
