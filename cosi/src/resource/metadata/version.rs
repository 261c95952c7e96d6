//! Resource versions.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A resource version: undefined before the first write, then 1, 2, 3...
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
///
/// let version = Version::new(1);
/// assert_eq!(version.get(), Some(1));
/// assert_eq!(version.next(), Version::new(2));
/// assert!(Version::UNDEFINED.is_undefined());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(Option<u64>);

impl Version {
    /// The version of a resource that was never stored.
    pub const UNDEFINED: Version = Version(None);

    /// A defined version.
    pub const fn new(value: u64) -> Self {
        Version(Some(value))
    }

    /// The number, or `None` when undefined.
    pub const fn get(self) -> Option<u64> {
        self.0
    }

    /// The version after this one: undefined is followed by 1.
    #[must_use]
    pub const fn next(self) -> Self {
        match self.0 {
            Some(value) => Version(Some(value.saturating_add(1))),
            None => Version(Some(1)),
        }
    }

    /// Whether no write has happened yet.
    pub const fn is_undefined(self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value}"),
            None => f.write_str("undefined"),
        }
    }
}

impl std::str::FromStr for Version {
    type Err = ParseError;

    /// Parses `undefined` or a decimal number, the wire form of a version.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "undefined" {
            return Ok(Version::UNDEFINED);
        }
        s.parse::<u64>().map(Version::new).map_err(|err| ParseError(format!("error parsing version {s:?}: {err}")))
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(value) => serializer.serialize_u64(value),
            None => serializer.serialize_str("undefined"),
        }
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Number(u64),
            Text(String),
        }
        match Repr::deserialize(deserializer)? {
            Repr::Number(value) => Ok(Version::new(value)),
            Repr::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// An error parsing a metadata field from text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub(super) String);
