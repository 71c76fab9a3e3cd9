//! Problem reporting: what is wrong with a configuration, where each value came from, and
//! every key that fails to deserialize (not only the first).

use std::fmt;

use figment::error::{Actual, Kind};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata};

use super::*;

/// Every key that fails to deserialize, not only the first, and the configuration left when
/// they are removed (their defaults in force), so that the other keys can be checked too.
///
/// serde stops at the first error, so each bad key is removed from the merged values (leaving
/// its default in force) and the rest deserialized again, until nothing fails. Origins are looked
/// up in the original `figment`, which knows which source supplied each key.
pub(super) fn extraction_problems(
    first: figment::Error,
    figment: &Figment,
    env: &EnvProvider,
) -> (Vec<Problem>, Option<RawConfig>) {
    let mut problems = Vec::new();
    // A source that could not be read at all (a TOML syntax error) leaves nothing to retry.
    let Ok(Value::Dict(_, mut merged)) = figment.extract::<Value>() else {
        problems.extend(first.into_iter().map(|e| Problem::from_figment(&e, figment, env)));
        return (problems, None);
    };
    let mut error = first;
    // Each round removes one key, so this ends; the bound is a guard, far above the key count.
    for _ in 0..256 {
        let mut removed = false;
        for e in error {
            let problem = Problem::from_figment(&e, figment, env);
            if let Some(key) = &problem.key {
                let path: Vec<&str> = key.split('.').collect();
                // The key itself, or failing that the table holding it.
                removed |= (1..=path.len()).rev().any(|n| remove(&mut merged, &path[..n]));
            }
            problems.push(problem);
        }
        if !removed {
            break;
        }
        let retry = Figment::from(Serialized::defaults(Value::Dict(Tag::Default, merged.clone())));
        match retry.extract::<RawConfig>() {
            Ok(rest) => return (problems, Some(rest)),
            Err(next) => error = next,
        }
    }
    (problems, None)
}

pub(super) fn remove(dict: &mut Dict, path: &[&str]) -> bool {
    match path {
        [] => false,
        [last] => dict.remove(*last).is_some(),
        [first, rest @ ..] => match dict.get_mut(*first) {
            Some(Value::Dict(_, inner)) => remove(inner, rest),
            _ => false,
        },
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file that was named could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// One or more keys are unknown or have bad values.
    #[error("{}", ProblemList(.0))]
    Invalid(Vec<Problem>),
}

impl ConfigError {
    /// The individual problems (empty for [`ConfigError::ReadFile`]).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid(problems) => problems,
            ConfigError::ReadFile { .. } => &[],
        }
    }
}

pub(super) struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => f.write_str("invalid configuration"),
            [one] => write!(f, "invalid configuration: {one}"),
            many => {
                write!(f, "invalid configuration ({} problems):", many.len())?;
                for problem in many {
                    write!(f, "\n  {problem}")?;
                }
                Ok(())
            }
        }
    }
}

/// One thing wrong with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key, dotted (`robots.max_age`); `None` when the problem is not about one key (a TOML
    /// syntax error).
    pub key: Option<String>,
    /// Where the bad value came from, when known.
    pub origin: Option<Origin>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.key, &self.origin) {
            (Some(key), Some(origin)) => write!(f, "{key} (from {origin}): {}", self.message),
            (Some(key), None) => write!(f, "{key}: {}", self.message),
            (None, Some(origin)) => write!(f, "{origin}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The built-in default.
    Default,
    /// The configuration file.
    File(PathBuf),
    /// An environment variable; its name when known.
    Env(Option<String>),
    /// A command-line flag.
    CommandLine,
}

impl Origin {
    pub(super) fn from_metadata(
        metadata: &Metadata,
        key: Option<&str>,
        env: &EnvProvider,
    ) -> Origin {
        if metadata.name == ENV_PROVIDER {
            return Origin::Env(key.and_then(|k| env.names.get(k)).cloned());
        }
        match metadata.source.as_ref().and_then(|s| s.file_path()) {
            Some(path) => Origin::File(path.to_owned()),
            None => Origin::Default,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("the built-in default"),
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Env(Some(name)) => write!(f, "environment variable {name}"),
            Origin::Env(None) => write!(f, "environment variables {ENV_PREFIX}*"),
            Origin::CommandLine => f.write_str("the command line"),
        }
    }
}

impl Problem {
    pub(super) fn from_figment(
        error: &figment::Error,
        figment: &Figment,
        env: &EnvProvider,
    ) -> Problem {
        // A list item's index is not a key anyone writes: report the list
        // (`policy.token_sources`, not `policy.token_sources.1`).
        let mut path: Vec<String> = error
            .path
            .iter()
            .take_while(|p| !p.bytes().all(|b| b.is_ascii_digit()))
            .cloned()
            .collect();
        let message = match &error.kind {
            Kind::UnknownField(field, expected) => {
                // figment's path ends with the unknown key already; make sure it does.
                if path.last() != Some(field) {
                    path.push(field.clone());
                }
                let parent = path[..path.len() - 1].join(".");
                unknown_key_message(&parent, field, expected)
            }
            Kind::UnknownVariant(found, expected) => {
                format!("unknown value {found:?}; expected one of: {}", expected.join(", "))
            }
            Kind::InvalidValue(Actual::Str(text), expected) if expected.contains("duration") => {
                // humantime_serde reports only "expected a duration"; humantime says why.
                let why = humantime::parse_duration(text).err().map(|e| format!(": {e}"));
                format!(
                    "{text:?} is not a duration{}; write durations like \"30s\", \"5m\", \"24h\"",
                    why.unwrap_or_default()
                )
            }
            Kind::InvalidType(_, expected) if expected.contains("duration") => format!(
                "{}; write durations as strings with a unit, like \"30s\", \"5m\", \"24h\"",
                error.kind
            ),
            other => other.to_string(),
        };
        let key = (!path.is_empty()).then(|| path.join("."));
        // The metadata of the value at the key names the source that supplied it; the error's
        // own metadata is the fallback (for a file that does not parse, say).
        let metadata =
            key.as_deref().and_then(|k| figment.find_metadata(k)).or(error.metadata.as_ref());
        let origin = metadata.map(|m| Origin::from_metadata(m, key.as_deref(), env));
        Problem { key, origin, message }
    }
}

pub(super) fn unknown_key_message(parent: &str, field: &str, expected: &[&str]) -> String {
    let mut message = "unknown key".to_owned();
    if let Some(best) = closest(field, expected.iter().copied()) {
        let best = if parent.is_empty() { best.to_owned() } else { format!("{parent}.{best}") };
        message.push_str(&format!("; did you mean {best}?"));
    }
    if !expected.is_empty() {
        let scope = if parent.is_empty() {
            "at the top level".to_owned()
        } else {
            format!("in [{parent}]")
        };
        message.push_str(&format!(" (known keys {scope}: {})", expected.join(", ")));
    }
    message
}
