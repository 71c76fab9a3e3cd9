//! What is wrong with a section of the configuration: the one error type of every section's
//! `TryFrom<Raw…>`, a list of (key, message) problems, never only the first.

use crate::bounds::Bound;

/// Every problem found in a section (or in the whole configuration), each naming its key
/// (`robots.max_age`, `exceptions[2].expires`) and saying what is wrong. The loader adds to
/// each where its value came from (`robots_proxy::config::Problem`).
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.joined())]
pub struct Problems(Vec<(String, String)>);

impl Problems {
    /// No problem yet.
    pub fn new() -> Self {
        Problems(Vec::new())
    }

    /// Adds a problem with `key`.
    pub fn push(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.0.push((key.into(), message.into()));
    }

    /// Adds the problem `message()` with `key` unless `ok`.
    pub fn need(&mut self, ok: bool, key: &str, message: impl FnOnce() -> String) {
        if !ok {
            self.push(key, message());
        }
    }

    /// Adds every value of `section` out of its bound ([`Bound`]).
    pub fn bounds<S>(&mut self, bounds: &[Bound<S>], section: &S) {
        for bound in bounds {
            if let Some(message) = bound.problem(section) {
                self.push(bound.key, message);
            }
        }
    }

    /// Adds the problems of another section (or of a part of this one).
    pub fn absorb(&mut self, other: Problems) {
        self.0.extend(other.0);
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, as (key, message), in the order found.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, m)| (k.as_str(), m.as_str()))
    }

    /// The problems, as (key, message), in the order found.
    pub fn into_vec(self) -> Vec<(String, String)> {
        self.0
    }

    /// `Ok(value())` if there is no problem, else the problems: the end of a `TryFrom<Raw…>`,
    /// which builds the section only from a raw one that passed every check.
    pub fn or_build<T>(self, value: impl FnOnce() -> T) -> Result<T, Problems> {
        if self.0.is_empty() {
            Ok(value())
        } else {
            Err(self)
        }
    }
}

impl<K: Into<String>> FromIterator<(K, String)> for Problems {
    fn from_iter<I: IntoIterator<Item = (K, String)>>(iter: I) -> Self {
        Problems(iter.into_iter().map(|(k, m)| (k.into(), m)).collect())
    }
}

impl Problems {
    /// `key: message; key: message`.
    fn joined(&self) -> String {
        let shown: Vec<String> = self.0.iter().map(|(k, m)| format!("{k}: {m}")).collect();
        shown.join("; ")
    }
}

/// Declares `$raw`, the section `$section` as written (`[$name]`), and makes the checks of
/// `TryFrom<$raw> for $section` (which the section's own file implements, with
/// [`Problems`] as its error) the only way to deserialize a `$section`.
///
/// `$section` must derive `Serialize` and `Deserialize` with `#[serde(remote = "Self")]` (and
/// its `default` and `deny_unknown_fields` as ever): serde then makes its derived code inherent
/// functions, which `$raw` deserializes with (every key and its errors as written, nothing
/// checked), and the `Serialize` and `Deserialize` implementations this macro writes call
/// (deserializing a `$section` anywhere goes through `TryFrom`). One list of fields: a new key
/// is a field of `$section`, its default, and its check in the `TryFrom`.
#[macro_export]
macro_rules! raw_section {
    ($section:ident, $raw:ident, $name:literal) => {
        #[doc = concat!(
                    "`[", $name, "]` as written, before its checks: [`", stringify!($section),
                    "`] is made from it by `TryFrom`, which refuses it with every problem found."
                )]
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $raw(pub $section);

        impl<'de> serde::Deserialize<'de> for $raw {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $section::deserialize(d).map($raw)
            }
        }

        impl<'de> serde::Deserialize<'de> for $section {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = <$raw as serde::Deserialize>::deserialize(d)?;
                $section::try_from(raw).map_err(serde::de::Error::custom)
            }
        }

        impl serde::Serialize for $section {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $section::serialize(self, s)
            }
        }
    };
}
