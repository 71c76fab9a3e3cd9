//! Operational logs: what the proxy is doing, for whoever runs it. Written with `tracing` to
//! standard error, as text or as one JSON object per line.
//!
//! The audit trail of decisions is *not* here: it goes through [`crate::audit`], so that a log
//! level chosen for diagnostics can never hide it.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::{LogFormat, LogSection};

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// `log.level` is not a valid filter.
    #[error("log.level {level:?} is not a valid filter: {source}")]
    Level {
        /// The filter as configured.
        level: String,
        /// Why it does not parse.
        source: tracing_subscriber::filter::ParseError,
    },
    /// `RUST_LOG` is set but is not a valid filter.
    #[error("environment variable RUST_LOG={value:?} is not a valid filter: {source}")]
    RustLog {
        /// The variable's value.
        value: String,
        /// Why it does not parse.
        source: tracing_subscriber::filter::ParseError,
    },
    /// The installed subscriber is gone (not expected while the process runs).
    #[error("cannot change the log filter: {0}")]
    Reload(#[from] reload::Error),
}

/// The filter of the subscriber [`init`] installed, so that [`set_filter`] can change it on a
/// configuration reload. Empty when another subscriber was installed first (in tests).
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the global subscriber: `section.format` to standard error, filtered by `RUST_LOG`
/// when that is set and not empty, by `section.level` otherwise.
///
/// Only the first call in a process installs anything; later calls return `Ok(())` and change
/// nothing, so tests (which share a process) can call it freely.
pub fn init(section: &LogSection) -> Result<(), LoggingError> {
    let rust_log = std::env::var("RUST_LOG").ok();
    init_with(section, rust_log.as_deref())
}

/// [`init`] with the value of `RUST_LOG` given, instead of read from the environment.
pub fn init_with(section: &LogSection, rust_log: Option<&str>) -> Result<(), LoggingError> {
    let filter = filter(section, rust_log)?;
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::stderr().is_terminal();
    let output = match section.format {
        LogFormat::Text => {
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed()
        }
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    // `try_init` fails only when a global subscriber is already installed (by an earlier call,
    // or by a test harness): that one stays, as documented above.
    if tracing_subscriber::registry().with(filter).with(output).try_init().is_ok() {
        let _ = FILTER.set(handle);
    }
    Ok(())
}

/// Replaces the filter of the subscriber installed by [`init`] with the one for `section`
/// (or `rust_log`, which still wins when set), for a configuration reload. The format cannot
/// change without a restart.
///
/// Returns `Ok(false)` when [`init`] did not install the subscriber, so there is nothing to
/// change; a bad filter is an error and leaves the old one in force.
pub fn set_filter(section: &LogSection, rust_log: Option<&str>) -> Result<bool, LoggingError> {
    let filter = filter(section, rust_log)?;
    match FILTER.get() {
        Some(handle) => {
            handle.reload(filter)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The filter for `section`, or for `rust_log` when that is given and not blank.
pub fn filter(section: &LogSection, rust_log: Option<&str>) -> Result<EnvFilter, LoggingError> {
    match rust_log.filter(|v| !v.trim().is_empty()) {
        Some(value) => EnvFilter::builder()
            .parse(value)
            .map_err(|source| LoggingError::RustLog { value: value.to_owned(), source }),
        None => EnvFilter::builder()
            .parse(&section.level)
            .map_err(|source| LoggingError::Level { level: section.level.clone(), source }),
    }
}

#[cfg(test)]
mod tests {
    use tracing::level_filters::LevelFilter;

    use super::*;

    fn section(level: &str) -> LogSection {
        LogSection { level: level.to_owned(), ..LogSection::default() }
    }

    #[test]
    fn level_from_config() {
        let f = filter(&section("warn"), None).expect("valid");
        assert_eq!(f.max_level_hint(), Some(LevelFilter::WARN));
    }

    #[test]
    fn rust_log_wins_when_set() {
        let f = filter(&section("warn"), Some("debug")).expect("valid");
        assert_eq!(f.max_level_hint(), Some(LevelFilter::DEBUG));
        let blank = filter(&section("warn"), Some("  ")).expect("valid");
        assert_eq!(blank.max_level_hint(), Some(LevelFilter::WARN));
    }

    #[test]
    fn bad_filters_name_their_source() {
        let e = filter(&section("robots_proxy=loud"), None).unwrap_err();
        assert!(e.to_string().starts_with("log.level \"robots_proxy=loud\""), "{e}");
        let e = filter(&section("info"), Some("=[")).unwrap_err();
        assert!(e.to_string().starts_with("environment variable RUST_LOG=\"=[\""), "{e}");
    }
}
