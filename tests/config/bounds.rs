//! The property of issue 27 ("How to keep it fixed"), at the validation level: values at and
//! beyond every key's bounds ([`robots_proxy::config::bounds`]) are either refused, naming each
//! key out of its bound, or accepted and then built into the proxy's runtime structures without
//! a panic. The same generator drives the binary-level property in `ops::properties`.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};

use robots_proxy::config::{self, BoundKind, BoundSpec, ConfigSources, Overrides};

/// Where a generated value lies against its key's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Below,
    AtMin,
    Inside,
    AtMax,
    Above,
    /// Far beyond: what used to overflow (`500000000000years`, `i64::MAX`).
    Huge,
}

impl Place {
    pub fn in_bounds(self) -> bool {
        matches!(self, Place::AtMin | Place::Inside | Place::AtMax)
    }
}

/// One generated setting: the key, its environment variable's value, and where it lies.
#[derive(Debug, Clone)]
pub struct Setting {
    pub key: &'static str,
    pub value: String,
    pub place: Place,
}

impl Setting {
    /// `ROBOTS_PROXY_SECTION__KEY`.
    pub fn var(&self) -> String {
        format!("ROBOTS_PROXY_{}", self.key.replace('.', "__").to_ascii_uppercase())
    }
}

fn render(kind: BoundKind, n: u128) -> String {
    match kind {
        BoundKind::Duration => format!("{n}ns"),
        BoundKind::Size => format!("{n}B"),
        BoundKind::Count => n.to_string(),
    }
}

fn setting(spec: BoundSpec, place: Place, fraction: f64) -> Option<Setting> {
    let value = match place {
        Place::Below if spec.min == 0 => return None,
        Place::Below => render(spec.kind, spec.min - 1),
        Place::AtMin => render(spec.kind, spec.min),
        Place::Inside => {
            let span = (spec.max - spec.min) as f64;
            render(spec.kind, spec.min + (span * fraction) as u128)
        }
        Place::AtMax => render(spec.kind, spec.max),
        Place::Above => render(spec.kind, spec.max + 1),
        Place::Huge => match spec.kind {
            BoundKind::Duration => "500000000000years".to_owned(),
            BoundKind::Size => format!("{}B", u64::MAX),
            BoundKind::Count => i64::MAX.to_string(),
        },
    };
    Some(Setting { key: spec.key, value, place })
}

/// One to four settings of distinct bounded keys, each at or beyond its bounds.
pub fn settings() -> impl Strategy<Value = Vec<Setting>> {
    let specs = config::bounds();
    // Mostly in bounds, so that many cases are accepted and go on to be built or served.
    let places = prop_oneof![
        1 => Just(Place::Below),
        3 => Just(Place::AtMin),
        3 => Just(Place::Inside),
        3 => Just(Place::AtMax),
        1 => Just(Place::Above),
        1 => Just(Place::Huge),
    ];
    proptest::collection::vec((0..specs.len(), places, 0.0..1.0f64), 1..=4).prop_map(move |picks| {
        let mut out: Vec<Setting> = Vec::new();
        for (i, place, fraction) in picks {
            if out.iter().any(|s| s.key == specs[i].key) {
                continue;
            }
            out.extend(setting(specs[i], place, fraction));
        }
        out
    })
}

/// The keys a refusal names, one per problem line.
pub fn named_keys(e: &config::ConfigError) -> Vec<String> {
    e.problems().iter().filter_map(|p| p.key.clone()).collect()
}

/// Builds what `serve` builds from `config` (the audit log, the robots cache, the pacer, the
/// proxy, the connection gate) and the deadlines each duration becomes; panics if any panics.
async fn build_runtime(config: &robots_proxy::config::Config) {
    use robots_proxy::clock::{Clock, SystemClock};
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let tls = Arc::new(robots_proxy::tls::client_config(None).unwrap());
    let guard = Arc::new(config.destination_guard());
    let connector = robots_proxy::tls::https_connector(
        (*tls).clone(),
        config.robots.connect_timeout,
        guard.clone(),
    );
    let cache = Arc::new(robots_proxy::cache::RobotsCache::with_connector(
        config.robots.clone(),
        clock.clone(),
        connector,
    ));
    let audit =
        robots_proxy::audit::AuditLog::open(config.audit_path(), config.audit.clone()).unwrap();
    let pacer = Arc::new(robots_proxy::pacing::Pacer::new(&config.pacing).unwrap());
    let parts = robots_proxy::proxy::ProxyParts {
        store: cache,
        audit: audit.clone(),
        clock,
        ca: None,
        guard,
        tls,
        pacer,
        fleet: None,
        signer: None,
    };
    let _proxy = robots_proxy::proxy::Proxy::new(config, parts).unwrap();
    let _gate = robots_proxy::limits::ConnectionGate::new(&config.limits);
    // Every duration of the configuration as a deadline, as hyper and the writer make them.
    let text = config::render(config);
    for spec in config::bounds().iter().filter(|s| s.kind == BoundKind::Duration) {
        let (section, key) = spec.key.split_once('.').unwrap_or(("", spec.key));
        let value = duration_of(&text, section, key);
        let _ = std::time::Instant::now() + value;
        let _ = tokio::time::Instant::now() + value;
    }
    let _ = audit.close().await;
}

/// The value of `[section] key = "…"` in rendered TOML, as a duration.
fn duration_of(toml: &str, section: &str, key: &str) -> Duration {
    let table: toml::Table = toml.parse().unwrap();
    let value = if section.is_empty() { table.get(key) } else { table[section].get(key) };
    let text = value.and_then(|v| v.as_str()).unwrap_or_else(|| panic!("{section}.{key}"));
    humantime::parse_duration(text).unwrap()
}

/// Accepted ⇔ buildable: whatever the validation accepts builds without a panic; whatever it
/// refuses names every key set out of its bound.
#[test]
fn accepted_values_build_and_refused_ones_are_named() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_owned();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&settings(), |settings| {
            let mut env = vec![("ROBOTS_PROXY_STATE_DIR".to_owned(), state_dir.clone())];
            env.extend(settings.iter().map(|s| (s.var(), s.value.clone())));
            let sources = ConfigSources { file: None, env, overrides: Overrides::default() };
            match config::load(sources) {
                Ok(config) => {
                    prop_assert!(
                        settings.iter().all(|s| s.place.in_bounds()),
                        "accepted out of bounds: {settings:?}"
                    );
                    runtime.block_on(build_runtime(&config));
                }
                Err(e) => {
                    let named = named_keys(&e);
                    prop_assert!(!named.is_empty(), "a refusal names no key: {e}");
                    for s in settings.iter().filter(|s| !s.place.in_bounds()) {
                        prop_assert!(named.iter().any(|k| k == s.key), "{} not named: {e}", s.key);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}
