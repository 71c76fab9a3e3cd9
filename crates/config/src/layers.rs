//! The layering machinery: the configuration file and the typed environment provider that
//! figment merges, and the schema that types environment values and suggests keys.

use std::collections::{BTreeMap, BTreeSet};

use figment::value::{Dict, Empty, Map, Num, Tag, Value};
use figment::{Metadata, Profile, Provider};

use super::*;

/// The configuration file, read once by [`load`] so that a missing file is reported as such,
/// and named in errors by its path.
pub(super) struct FileProvider {
    pub(super) path: PathBuf,
    pub(super) text: String,
}

impl Provider for FileProvider {
    fn metadata(&self) -> Metadata {
        Metadata::from("TOML file", self.path.as_path())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Toml::string(&self.text).data()
    }
}

/// The `ROBOTS_PROXY_*` variables, typed by the schema, as a figment provider.
///
/// figment's own `Env` guesses each value's type from its look (`123` is a number, `true` a
/// boolean), so `ROBOTS_PROXY_ROBOTS__USER_AGENT=123` fails to load as a string; it also reads
/// the process environment itself. This provider types values by the key they set instead.
#[derive(Clone)]
pub(super) struct EnvProvider {
    pub(super) dict: Dict,
    /// The variable that set each key (`robots.max_age` → `ROBOTS_PROXY_ROBOTS__MAX_AGE`).
    pub(super) names: BTreeMap<String, String>,
}

impl EnvProvider {
    pub(super) fn new(
        env: &[(String, String)],
        schema: &Schema,
        problems: &mut Vec<Problem>,
    ) -> Self {
        let mut provider = EnvProvider { dict: Dict::new(), names: BTreeMap::new() };
        for (name, value) in env {
            let Some(rest) = name.strip_prefix(ENV_PREFIX) else { continue };
            if name == CONFIG_FILE_ENV {
                continue;
            }
            let path: Vec<String> =
                rest.split(ENV_SEPARATOR).map(str::to_ascii_lowercase).collect();
            let key = path.join(".");
            let origin = Some(Origin::Env(Some(name.clone())));
            let problem = |message: String| Problem {
                key: Some(key.clone()),
                origin: origin.clone(),
                message,
            };
            if value == NOT_UTF8 {
                problems.push(problem(
                    "the variable's name or value is not valid UTF-8; it would be read altered \
                     (a different path, a different name), so it is refused"
                        .to_owned(),
                ));
                continue;
            }
            let Some(kind) = schema.kinds.get(&key) else {
                let mut message = "unknown key".to_owned();
                if let Some(best) = closest(&key, schema.kinds.keys().map(String::as_str)) {
                    message.push_str(&format!("; did you mean {best} ({})?", env_name(best)));
                }
                problems.push(problem(message));
                continue;
            };
            if let KeyKind::Section = kind {
                problems.push(problem(format!(
                    "[{key}] is a section; set its keys one by one, like {}",
                    schema
                        .kinds
                        .keys()
                        .find(|k| k.starts_with(&format!("{key}.")))
                        .map(|k| env_name(k))
                        .unwrap_or_default()
                )));
                continue;
            }
            if let KeyKind::Tables = kind {
                problems.push(problem(format!(
                    "{key} is a list of tables: set it in the configuration file, not the \
                     environment"
                )));
                continue;
            }
            if let Some(earlier) = provider.names.get(&key) {
                problems.push(problem(format!("set twice, also by {earlier}")));
                continue;
            }
            let optional = schema.optional.contains(&key);
            insert(&mut provider.dict, &path, kind.value(value, optional));
            provider.names.insert(key, name.clone());
        }
        provider
    }
}

impl Provider for EnvProvider {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_PROVIDER)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// The environment variable that sets a dotted key.
pub(super) fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', ENV_SEPARATOR).to_ascii_uppercase())
}

pub(super) fn insert(dict: &mut Dict, path: &[String], value: Value) {
    match path {
        [] => {}
        [last] => {
            dict.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry =
                dict.entry(first.clone()).or_insert_with(|| Value::Dict(Tag::Default, Dict::new()));
            if let Value::Dict(_, inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

/// What kind of value each key takes, derived from the serialised defaults so that it cannot
/// drift from the structs.
pub(super) struct Schema {
    pub(super) kinds: BTreeMap<String, KeyKind>,
    /// Keys that may be unset (`Option`).
    pub(super) optional: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyKind {
    Text,
    Integer,
    /// A number that may have a fraction (`pacing.default_rps`).
    Float,
    Boolean,
    List,
    /// A list of tables (`[[pacing.sites]]`): file only, a comma-separated list cannot say it.
    Tables,
    Section,
}

impl KeyKind {
    /// The environment variable's value as this kind of value. A value that does not fit is
    /// passed on as text, for the deserializer to reject with a message naming the expected type.
    pub(super) fn value(self, raw: &str, optional: bool) -> Value {
        if optional && raw.is_empty() {
            return Value::from(Empty::None);
        }
        let trimmed = raw.trim();
        match self {
            KeyKind::Integer => {
                if let Ok(n) = trimmed.parse::<u64>() {
                    Value::from(n)
                } else if let Ok(n) = trimmed.parse::<i64>() {
                    Value::from(n)
                } else {
                    Value::from(raw.to_owned())
                }
            }
            KeyKind::Float => match trimmed.parse::<f64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::from(raw.to_owned()),
            },
            KeyKind::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Value::from(true),
                "false" => Value::from(false),
                _ => Value::from(raw.to_owned()),
            },
            // `a, b` or `[a, b]`; items that are whole numbers are numbers (`connect_ports`),
            // since no list of the configuration holds digit-only strings.
            KeyKind::List => Value::Array(
                Tag::Default,
                trimmed
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .split(',')
                    .map(|item| item.trim().trim_matches('"'))
                    .filter(|item| !item.is_empty())
                    .map(|item| match item.parse::<u64>() {
                        Ok(n) => Value::from(n),
                        Err(_) => Value::from(item.to_owned()),
                    })
                    .collect(),
            ),
            KeyKind::Text | KeyKind::Tables | KeyKind::Section => Value::from(raw.to_owned()),
        }
    }
}

impl Schema {
    pub(super) fn new() -> Schema {
        let mut schema = Schema { kinds: BTreeMap::new(), optional: BTreeSet::new() };
        if let Ok(Value::Dict(_, dict)) = Value::serialize(schema_sample()) {
            schema.walk("", &dict);
        }
        if let Ok(Value::Dict(_, defaults)) = Value::serialize(Config::default()) {
            let mut present = BTreeMap::new();
            Schema::leaves("", &defaults, &mut present);
            for key in schema.kinds.keys() {
                let unset = matches!(present.get(key), None | Some(Value::Empty(..)));
                if unset && schema.kinds[key] != KeyKind::Section {
                    schema.optional.insert(key.clone());
                }
            }
        }
        schema
    }

    pub(super) fn walk(&mut self, prefix: &str, dict: &Dict) {
        for (name, value) in dict {
            let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            let kind = match value {
                Value::Dict(_, inner) => {
                    self.walk(&key, inner);
                    KeyKind::Section
                }
                Value::Num(_, Num::F32(_) | Num::F64(_)) => KeyKind::Float,
                Value::Num(..) => KeyKind::Integer,
                Value::Bool(..) => KeyKind::Boolean,
                Value::Array(_, items) if matches!(items.first(), Some(Value::Dict(..))) => {
                    KeyKind::Tables
                }
                Value::Array(..) => KeyKind::List,
                Value::String(..) | Value::Char(..) | Value::Empty(..) => KeyKind::Text,
            };
            self.kinds.insert(key, kind);
        }
    }

    pub(super) fn leaves(prefix: &str, dict: &Dict, out: &mut BTreeMap<String, Value>) {
        for (name, value) in dict {
            let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            if let Value::Dict(_, inner) = value {
                Schema::leaves(&key, inner, out);
            }
            out.insert(key, value.clone());
        }
    }
}

/// A configuration with every optional key set, so that serialising it shows every key and its
/// type. A new `Option` field must be set here (a unit test checks that none is left unset), and
/// a list of tables needs one entry to be told from a plain list.
pub(super) fn schema_sample() -> Config {
    let mut config = Config::default();
    config.pacing.sites = vec![robots_proxy_pace::SitePace {
        authority: String::new(),
        rps: Some(0.0),
        concurrency: Some(0),
    }];
    config.policy.default_token = robots_proxy_engine::ProductToken::new("Sample").ok();
    config.usage.crawlers = vec![robots_proxy_decide::usage::UsageCrawler {
        token: Some(String::new()),
        user: Some(String::new()),
        purposes: vec![String::new()],
    }];
    config.exceptions = vec![robots_proxy_decide::ExceptionEntry {
        id: String::new(),
        authorities: vec![String::new()],
        tokens: vec![String::new()],
        users: vec![String::new()],
        paths: vec![String::new()],
        effect: robots_proxy_decide::exceptions::Effect::Allow,
        reference: Some(String::new()),
        granted_by: Some(String::new()),
        expires: Some(String::new()),
        usage: vec![String::new()],
    }];
    config.disclosure.operator_url = Some(String::new());
    config.disclosure.crawlers = vec![robots_proxy_disclosure::CrawlerEntry {
        token: Some(String::new()),
        name: Some(String::new()),
        description: Some(String::new()),
        about_url: Some(String::new()),
        trigger: Some(robots_proxy_disclosure::Trigger::Crawler),
        user_agent: Some(String::new()),
        ip_ranges: vec![String::new()],
    }];
    config.https.ca_cert = Some(PathBuf::new());
    config.https.ca_key = Some(PathBuf::new());
    config.https.upstream_ca_file = Some(PathBuf::new());
    config.access.users_file = Some(PathBuf::new());
    config.audit.checkpoint_key = Some(PathBuf::new());
    config.fleet.key_file = Some(PathBuf::new());
    config.fleet.previous_key_file = Some(PathBuf::new());
    config.access.client_ca = Some(PathBuf::new());
    config.proxy.tls_listen = Some(config.proxy.listen);
    config.proxy.tls_certificate = Some(PathBuf::new());
    config.proxy.tls_key = Some(PathBuf::new());
    let time = Some(robots_proxy_identity::section::Timestamp(std::time::UNIX_EPOCH));
    config.signing.directory_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    if let (Ok(name), Ok(agent)) = ("sample".parse(), "https://example.com".parse()) {
        config.signing.keys = vec![robots_proxy_identity::KeyEntry {
            name,
            sign_from: time,
            sign_until: time,
            publish_until: time,
        }];
        config.signing.identities = vec![robots_proxy_identity::SigningIdentity {
            token: Some(robots_proxy_identity::TokenPattern::Any),
            user: Some(String::new()),
            users: vec![String::new()],
            keys: vec![],
            agent,
            // Not the default, so that the sample serialises the key.
            agent_type: robots_proxy_identity::AgentType::JwksUri,
            client_keys: Some(std::path::PathBuf::new()),
        }];
    }
    config
}

/// The candidate nearest to `word` by edit distance, if near enough to be a likely typo.
pub(super) fn closest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.len() / 3).clamp(1, 3);
    candidates
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}
