#[test]
fn both_listeners_of_a_configuration_are_its_own() {
    let mut config = Config::default();
    config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap()];
    let guard = config.destination_guard();
    for own in [config.proxy.listen, config.admin.listen] {
        assert!(guard.check(own).is_err(), "{own}");
    }
    assert_eq!(guard.check("127.0.0.1:1".parse().unwrap()), Ok(()));
}

use super::layers::*;
use super::*;
use figment::value::{Num, Value};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn schema_sample_sets_every_optional_key() {
    let Ok(Value::Dict(_, dict)) = Value::serialize(schema_sample()) else {
        panic!("the configuration serialises to a table");
    };
    let mut leaves = BTreeMap::new();
    Schema::leaves("", &dict, &mut leaves);
    let unset: Vec<_> =
        leaves.iter().filter(|(_, v)| matches!(v, Value::Empty(..))).map(|(k, _)| k).collect();
    assert!(unset.is_empty(), "set these in schema_sample(): {unset:?}");
}

#[test]
fn schema_kinds() {
    let schema = Schema::new();
    assert_eq!(schema.kinds["proxy"], KeyKind::Section);
    assert_eq!(schema.kinds["state_dir"], KeyKind::Text);
    assert_eq!(schema.kinds["proxy.listen"], KeyKind::Text);
    assert_eq!(schema.kinds["robots.user_agent"], KeyKind::Text);
    assert_eq!(schema.kinds["robots.max_age"], KeyKind::Text);
    assert_eq!(schema.kinds["robots.max_body"], KeyKind::Text);
    assert_eq!(schema.kinds["robots.max_redirects"], KeyKind::Integer);
    assert_eq!(schema.kinds["audit.all_decisions"], KeyKind::Boolean);
    assert_eq!(schema.kinds["policy.token_sources"], KeyKind::List);
    assert_eq!(schema.kinds["policy.default_token"], KeyKind::Text);
    assert_eq!(schema.kinds["https.connect_ports"], KeyKind::List);
    assert_eq!(schema.kinds["access.allow_clients"], KeyKind::List);
    assert_eq!(schema.kinds["access.allow_destinations"], KeyKind::List);
    assert_eq!(schema.kinds["limits.max_connections"], KeyKind::Integer);
    assert_eq!(schema.kinds["limits.when_full"], KeyKind::Text);
    assert_eq!(schema.kinds["pacing.default_rps"], KeyKind::Float);
    assert_eq!(schema.kinds["pacing.default_concurrency"], KeyKind::Integer);
    assert_eq!(schema.kinds["pacing.max_wait"], KeyKind::Text);
    assert_eq!(schema.kinds["pacing.sites"], KeyKind::Tables);
    assert_eq!(schema.kinds["signing.keys"], KeyKind::Tables);
    assert_eq!(schema.kinds["signing.identities"], KeyKind::Tables);
    assert_eq!(schema.kinds["signing.directory_listen"], KeyKind::Text);
    assert_eq!(
        schema.optional.iter().collect::<Vec<_>>(),
        [
            "access.client_ca",
            "access.users_file",
            "audit.checkpoint_key",
            "disclosure.operator_url",
            "fleet.key_file",
            "fleet.previous_key_file",
            "https.ca_cert",
            "https.ca_key",
            "https.upstream_ca_file",
            "policy.default_token",
            "proxy.tls_certificate",
            "proxy.tls_key",
            "proxy.tls_listen",
            "signing.directory_listen"
        ]
    );
}

#[test]
fn env_values_typed_by_key() {
    let v = |kind: KeyKind, raw: &str| kind.value(raw, false);
    assert!(matches!(v(KeyKind::Text, "123"), Value::String(_, s) if s == "123"));
    assert!(matches!(v(KeyKind::Text, "true"), Value::String(_, s) if s == "true"));
    assert!(matches!(v(KeyKind::Text, " a b "), Value::String(_, s) if s == " a b "));
    assert!(matches!(v(KeyKind::Integer, " 7 "), Value::Num(..)));
    assert!(matches!(v(KeyKind::Integer, "-7"), Value::Num(..)));
    assert!(matches!(v(KeyKind::Integer, "seven"), Value::String(..)));
    assert!(matches!(v(KeyKind::Boolean, "TRUE"), Value::Bool(_, true)));
    assert!(matches!(v(KeyKind::Float, " 2.5 "), Value::Num(_, Num::F64(n)) if n == 2.5));
    assert!(matches!(v(KeyKind::Float, "2"), Value::Num(_, Num::F64(n)) if n == 2.0));
    assert!(matches!(v(KeyKind::Float, "fast"), Value::String(..)));
    assert!(matches!(v(KeyKind::Boolean, "yes"), Value::String(..)));
    let Value::Array(_, items) = v(KeyKind::List, "header, user-agent,,") else {
        panic!("a list");
    };
    assert_eq!(items.len(), 2);
    let Value::Array(_, ports) = v(KeyKind::List, "[443, 8443]") else { panic!("a list") };
    assert!(matches!(ports[0], Value::Num(..)), "{ports:?}");
    assert!(matches!(KeyKind::Text.value("", true), Value::Empty(..)));
    assert!(matches!(KeyKind::Text.value("", false), Value::String(_, s) if s.is_empty()));
}

#[test]
fn byte_size_shows_and_parses_back() {
    for (n, text) in
        [(512_000, "500KiB"), (256 << 20, "256MiB"), (3 << 30, "3GiB"), (1000, "1000B"), (0, "0B")]
    {
        assert_eq!(ByteSize(n).to_string(), text);
        assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(n)));
    }
    // 1.5 KiB is not a whole number of KiB: shown in bytes.
    assert_eq!(ByteSize(1536).to_string(), "1536B");
    assert!("1.5MiB".parse::<ByteSize>().is_err());
    assert!("99999999999999GiB".parse::<ByteSize>().unwrap_err().contains("too large"));
    // What a general-purpose size crate would read otherwise, and configuration files written
    // for this one rely on: a bare `k`, `m`, `g` is binary, a space before the unit is fine,
    // and an unknown unit is an error, not a guess.
    assert_eq!("64k".parse::<ByteSize>(), Ok(ByteSize(64 << 10)));
    assert_eq!("2M".parse::<ByteSize>(), Ok(ByteSize(2 << 20)));
    assert_eq!("1 MiB".parse::<ByteSize>(), Ok(ByteSize(1 << 20)));
    assert_eq!("64KB".parse::<ByteSize>(), Ok(ByteSize(64_000)));
    assert!("2 TiB".parse::<ByteSize>().unwrap_err().contains("unknown size unit"));
}

#[test]
fn closest_finds_typos_only() {
    let keys = ["proxy.listen", "proxy.via", "robots.max_age"];
    assert_eq!(closest("proxy.listn", keys.iter().copied()), Some("proxy.listen"));
    assert_eq!(closest("proxy_listen", keys.iter().copied()), Some("proxy.listen"));
    assert_eq!(closest("completely.else", keys.iter().copied()), None);
}

#[test]
fn env_name_round_trip() {
    assert_eq!(env_name("proxy.listen"), "ROBOTS_PROXY_PROXY__LISTEN");
    assert_eq!(env_name("state_dir"), "ROBOTS_PROXY_STATE_DIR");
}

#[test]
fn reloadable_keys_and_restart_changes() {
    assert!(is_reloadable("policy.default_token"));
    assert!(is_reloadable("audit.all_decisions"));
    assert!(!is_reloadable("audit.path"));
    assert!(!is_reloadable("policyx.default_token"));
    let old = Config::default();
    let mut new = Config::default();
    new.policy.default_token = robots_proxy_engine::ProductToken::new("ExampleBot").ok();
    new.audit.all_decisions = true;
    new.log.level = "debug".into();
    assert!(needs_restart(&old, &new).is_empty(), "{:?}", needs_restart(&old, &new));
    // Issue 23: [access], [pacing], [robots] lifetimes, [https] mode and ports, [signing].
    new.robots.max_age = Duration::from_secs(60);
    new.https.ca_cert = Some(PathBuf::from("/ca.pem"));
    new.https.mode = robots_proxy_net::tls::HttpsMode::Reject;
    new.https.connect_ports = vec![443, 8443];
    new.access.allow_destinations = vec!["10.0.0.0/8".parse().unwrap()];
    new.pacing.default_rps = 2.0;
    new.signing.lifetime = Duration::from_secs(30);
    assert!(needs_restart(&old, &new).is_empty(), "{:?}", needs_restart(&old, &new));
    new.admin.listen = SocketAddr::from(([127, 0, 0, 1], 9999));
    new.robots.cache_memory = robots_proxy_units::ByteSize(1 << 30);
    new.signing.directory_listen = Some(SocketAddr::from(([127, 0, 0, 1], 9998)));
    new.https.upstream_ca_file = Some(PathBuf::from("/roots.pem"));
    assert_eq!(
        needs_restart(&old, &new),
        [
            "admin.listen",
            "https.upstream_ca_file",
            "robots.cache_memory",
            "signing.directory_listen"
        ]
    );
    for key in needs_restart(&old, &new) {
        assert_ne!(restart_reason(&key), "applied at start only", "{key} has no reason");
    }
}

/// Every key of the configuration is either applied by a reload ([`RELOADABLE`]) or has the
/// reason it needs a restart ([`RESTART_ONLY`]); none is in both by name, and every entry of
/// either table covers a key (review-house B8, issue 38 item 7).
#[test]
fn every_key_is_reloadable_or_has_a_restart_reason() {
    let schema = Schema::new();
    let mut keys: Vec<&str> = schema
        .kinds
        .iter()
        .filter(|(_, kind)| **kind != KeyKind::Section)
        .map(|(k, _)| k.as_str())
        .collect();
    // A deprecated alias, serialised only when set (so not in the schema).
    keys.push("signing.keep_client_signatures");
    let unclassified: Vec<&&str> =
        keys.iter().filter(|k| reloadability(k) == Reloadability::Unclassified).collect();
    assert!(
        unclassified.is_empty(),
        "neither reloadable nor with a restart reason: {unclassified:?}"
    );
    for entry in RELOADABLE {
        assert!(keys.iter().any(|k| entry.covers(k)), "{entry:?} covers no key");
        assert!(
            !RESTART_ONLY.iter().any(|r| r.key == entry.key),
            "{} is both reloadable and restart-only",
            entry.key
        );
    }
    for entry in RESTART_ONLY {
        assert!(keys.iter().any(|k| entry.covers(k)), "{entry:?} covers no key");
    }
    for applier in Applier::ALL {
        assert!(applied_by(applier).next().is_some(), "{applier:?} applies no key");
    }
    // Sections and lists of tables cover their keys, not their neighbours.
    assert!(is_reloadable("exceptions") && is_reloadable("exceptions.id"));
    assert!(!is_reloadable("exceptionsx") && !is_reloadable("policy"));
    assert_eq!(
        restart_reason("admin.listen"),
        restart_reason("proxy.listen"),
        "key before section"
    );
    assert_eq!(restart_reason("nothing.here"), UNCLASSIFIED);
}

/// A reload's report masks secrets: the Redis password (userinfo or `pass=`) never shows, and a
/// change of the password alone is still reported, masked.
#[test]
fn changes_mask_secrets() {
    let old = Config::default();
    let mut new = Config::default();
    new.fleet.redis = "redis://:hunter2@127.0.0.1:6379/0".to_owned().try_into().unwrap();
    let shown = serde_json::to_string(&changes(&old, &new)).unwrap();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("fleet.redis"), "{shown}");
    let mut other = new.clone();
    other.fleet.redis = "redis://:swordfish@127.0.0.1:6379/0".to_owned().try_into().unwrap();
    let diff = changes(&new, &other);
    assert_eq!(diff.len(), 1, "{diff:?}");
    let shown = serde_json::to_string(&diff).unwrap();
    assert!(!shown.contains("swordfish") && !shown.contains("hunter2"), "{shown}");
    assert!(!diff[0].reloadable);
    assert!(is_secret("fleet.password") && is_secret("x.token_file") && !is_secret("x.token"));
}

#[test]
fn admin_and_proxy_need_their_own_ports() {
    let mut config = Config::default();
    config.admin.listen = config.proxy.listen;
    let e = config.validate().unwrap_err();
    let bad = e.problems();
    assert_eq!(bad.len(), 1, "{e}");
    assert_eq!(bad[0].key.as_deref(), Some("admin.listen"));
    // Port 0 (any free port) on both is fine: the two get different ports.
    config.proxy.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin.listen = config.proxy.listen;
    assert!(config.validate().is_ok());
}

#[test]
fn defaults_are_valid() {
    // Every section's default, through its own `TryFrom`, and the rules between them.
    let converted = Config::try_from(RawConfig::default());
    assert_eq!(converted.as_ref().err(), None);
    assert_eq!(converted.ok(), Some(Config::default()));
}

#[test]
fn every_duration_size_and_count_has_a_bound() {
    let mut values = BTreeMap::new();
    if let Ok(Value::Dict(_, dict)) = Value::serialize(layers::schema_sample()) {
        Schema::leaves("", &dict, &mut values);
    }
    let schema = Schema::new();
    let mut unbounded = Vec::new();
    for (key, kind) in &schema.kinds {
        let numeric = match (kind, values.get(key)) {
            (KeyKind::Integer, _) => true,
            (KeyKind::Text, Some(Value::String(_, text))) => {
                humantime::parse_duration(text).is_ok() || text.parse::<ByteSize>().is_ok()
            }
            _ => false,
        };
        if numeric && bounds::bound(key).is_none() {
            unbounded.push(key.clone());
        }
    }
    assert!(
        unbounded.is_empty(),
        "add these keys to their section's table of bounds: {unbounded:?}"
    );
    // The defaults within their bounds: `defaults_are_valid`.
    for bound in bounds::bounds() {
        assert!(schema.kinds.contains_key(bound.key), "{} is not a key", bound.key);
    }
}

#[test]
fn the_shipped_file_documents_every_bound() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/robots-proxy.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let wanted = bounds::documentation();
    assert!(
        text.contains(&wanted),
        "config/robots-proxy.toml must list the bounds exactly so:\n{wanted}"
    );
}
