//! Operational logs: what the proxy is doing, for whoever runs it. Written with `tracing` to
//! standard error, as text or as one JSON object per line.
//!
//! The audit trail of decisions is *not* here: it goes through [`crate::audit`], so that a log
//! level chosen for diagnostics can never hide it.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FormatFields, MakeWriter};
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
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .fmt_fields(EscapedFields)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(JsonLines(std::io::stderr))
            .boxed(),
    };
    // `try_init` fails only when a global subscriber is already installed (by an earlier call,
    // or by a test harness): that one stays, as documented above.
    if tracing_subscriber::registry().with(filter).with(output).try_init().is_ok() {
        let _ = FILTER.set(handle);
        let _ = FORMAT.set(section.format);
    }
    Ok(())
}

/// The format of the subscriber [`init`] installed, once it is installed.
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The text format's field formatter: every field value and the message are written through
/// [`crate::output::log`] (C0 and C1 controls, DEL, bidi controls and line separators shown
/// escaped, a value cut at [`crate::output::LOG_MAX`]), so that no call site can forget it and
/// no value an outsider wrote (a URL, a User-Agent, an origin's header) can forge or hide a
/// log line. Fields are written as the default formatter writes them: the message first, then
/// `name=value`, a `?`-recorded string quoted.
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = EscapingVisitor { writer, first: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes each field it visits, escaped, for [`EscapedFields`].
struct EscapingVisitor<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl EscapingVisitor<'_> {
    fn write(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        let separator = if self.first { "" } else { " " };
        self.first = false;
        let value = crate::output::log(value);
        self.result = match field.name() {
            "message" => write!(self.writer, "{separator}{value}"),
            name => {
                let name = name.strip_prefix("r#").unwrap_or(name);
                write!(self.writer, "{separator}{name}={value}")
            }
        };
    }
}

impl Visit for EscapingVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.write(field, format_args!("{value}"));
        } else {
            self.write(field, format_args!("{value:?}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, format_args!("{value:?}"));
    }
}

/// The JSON format's writer: each line the formatter writes (one event, in one write) goes to
/// the inner writer (standard error) through [`crate::output::json_line`], so the C1 controls,
/// bidi controls and line separators an outsider's value holds are `\uXXXX` escapes there, as
/// in the audit log; the value a JSON reader gets is unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for JsonLines<M> {
    type Writer = JsonLineWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        JsonLineWriter(self.0.make_writer())
    }
}

/// The writer [`JsonLines`] makes.
#[derive(Debug)]
pub struct JsonLineWriter<W>(W);

impl<W: Write> Write for JsonLineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut line = buf.to_vec();
        crate::output::json_line(&mut line);
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The log format a line written now should take: the one [`init`] installed; before that
/// (the configuration did not load, so `serve` stops), the best reading of what the
/// configuration asks for: `ROBOTS_PROXY_LOG__FORMAT`, else `[log] format` in `file` (read on
/// its own, so another key's error does not hide it), else text.
pub fn format_now(file: Option<&Path>) -> LogFormat {
    if let Some(&format) = FORMAT.get() {
        return format;
    }
    let parse = |text: &str| match text.trim() {
        "json" => Some(LogFormat::Json),
        "text" => Some(LogFormat::Text),
        _ => None,
    };
    if let Some(format) = std::env::var("ROBOTS_PROXY_LOG__FORMAT").ok().and_then(|v| parse(&v)) {
        return format;
    }
    file.and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("log")?.get("format")?.as_str().and_then(parse))
        .unwrap_or(LogFormat::Text)
}

/// Writes one line to standard error whatever `log.level` says (the listening addresses that
/// operators and scripts read, a fatal error at start): in text as it is, escaped as every log
/// value is; in JSON as one object (`timestamp`, `level`, `message`, `target`, like the log's),
/// so that every line of a JSON log parses, also those written before or without [`init`].
pub fn line(format: LogFormat, level: tracing::Level, target: &str, message: &str) {
    let mut out = match format {
        LogFormat::Text => format!("{}", crate::output::log(message)).into_bytes(),
        LogFormat::Json => serde_json::json!({
            "timestamp": crate::audit::timestamp(std::time::SystemTime::now()),
            "level": level.as_str(),
            "message": message,
            "target": target,
        })
        .to_string()
        .into_bytes(),
    };
    crate::output::json_line(&mut out);
    out.push(b'\n');
    let _ = std::io::stderr().write_all(&out);
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

    /// A writer into a shared buffer, for the formatters under test.
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    /// What a crawler or an origin writes: a fake next log line after C1 controls (NEL, CSI,
    /// OSC), a line separator, bidi overrides; and a raw line feed, which hyper refuses but a
    /// future call site could still log.
    const FORGED: &str = "/a\u{85}2026-11-29T00:00:00Z  INFO robots_proxy::serve: robots-proxy \
        started\u{9b}2K\u{9d}0;\u{2028}\u{202e}gpj.exe\u{2066}\n2026-11-29T00:00:01Z  INFO forged";

    fn log_hostile() {
        let url = format!("http://127.0.0.1:1{FORGED}");
        tracing::info!(url = %url, user_agent = FORGED, origin = ?FORGED, "refused {FORGED}");
    }

    /// Issue 42: the text formatter escapes every field and the message itself, however the
    /// call site recorded it (`%`, `?`, a plain string): one event is one line, with no
    /// character a terminal or a line tool acts on.
    #[test]
    fn text_log_escapes_every_field_and_the_message() {
        let buffer = Buffer::default();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(EscapedFields)
            .with_ansi(false)
            .with_writer(buffer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log_hostile);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert!(!text.chars().any(|c| c != '\n' && crate::output::is_unsafe(c)), "{text:?}");
        assert!(text.contains("refused /a\\u0085"), "{text}");
        assert!(text.contains("url=http://127.0.0.1:1/a\\u0085"), "{text}");
        assert!(text.contains("\\u009b2K\\u009d0;\\u2028\\u202egpj.exe\\u2066"), "{text}");
        assert!(text.contains("origin=\"/a\\u{85}"), "{text}");
    }

    /// Issue 42: the JSON format writes one object per event, the exact values once parsed,
    /// with no raw C1 control, bidi control or line separator on the line.
    #[test]
    fn json_log_is_one_clean_object_per_event() {
        let buffer = Buffer::default();
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(JsonLines(buffer.clone()));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log_hostile);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert!(!text.chars().any(|c| c != '\n' && crate::output::is_unsafe(c)), "{text:?}");
        let value: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(value["user_agent"], FORGED);
        assert_eq!(value["url"], format!("http://127.0.0.1:1{FORGED}"));
        assert_eq!(value["message"], format!("refused {FORGED}"));
    }

    /// The lines written outside the subscriber (listening addresses, a fatal error) take the
    /// same form.
    #[test]
    fn format_now_reads_the_file_when_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[log]\nformat = \"json\"\n[proxy]\nlisten = 5\n").unwrap();
        if FORMAT.get().is_none() && std::env::var_os("ROBOTS_PROXY_LOG__FORMAT").is_none() {
            assert_eq!(format_now(Some(&file)), LogFormat::Json);
            assert_eq!(format_now(None), LogFormat::Text);
        }
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
