//! Finalizers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The finalizers of a resource: an ordered set of names, compared as a set.
/// A list read from a store or the wire keeps the first of each name, as Go does.
#[derive(Clone, Debug, Default, Eq, Serialize)]
#[serde(transparent)]
pub struct Finalizers(Vec<String>);

impl<'de> Deserialize<'de> for Finalizers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer).map(Finalizers::from_iter)
    }
}

impl Finalizers {
    /// No finalizers: what a resource without any reads.
    pub(super) const EMPTY: Finalizers = Finalizers(Vec::new());

    /// Adds `name`; returns whether it was absent.
    pub fn add(&mut self, name: impl Into<String>) -> bool {
        let name = name.into();
        if self.has(&name) {
            return false;
        }
        self.0.push(name);
        true
    }

    /// Removes `name`; returns whether it was present.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|f| f != name);
        self.0.len() != before
    }

    /// Whether `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|f| f == name)
    }

    /// Whether there is no finalizer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of finalizers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The finalizers in the order they were added.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl PartialEq for Finalizers {
    fn eq(&self, other: &Self) -> bool {
        if self.0.len() != other.0.len() {
            return false;
        }
        // Both sides are sets, so one containment check per element is enough;
        // finalizer lists are short, which makes this cheaper than sorting.
        self.0.iter().all(|f| other.has(f))
    }
}

impl fmt::Display for Finalizers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

impl<S: Into<String>> FromIterator<S> for Finalizers {
    /// Keeps the first of each name, in linear time: a list from the wire
    /// may be long.
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut names: Vec<String> = iter.into_iter().map(Into::into).collect();
        // A few names (most resources have none or one): compared in place.
        if names.len() <= 16 {
            let mut kept = Finalizers(Vec::with_capacity(names.len()));
            for name in names {
                kept.add(name);
            }
            return kept;
        }
        let first: Vec<bool> = {
            let mut seen = std::collections::HashSet::with_capacity(names.len());
            names.iter().map(|name| seen.insert(name.as_str())).collect()
        };
        let mut first = first.into_iter();
        names.retain(|_| first.next().unwrap_or(false));
        Finalizers(names)
    }
}
