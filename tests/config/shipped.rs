//! `config/robots-proxy.toml`, the documented example: it must load, say exactly the defaults,
//! and mention every key.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use robots_proxy::config::{self, Config};

use super::{load_ok, sources};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/robots-proxy.toml")
}

/// `section.key` for every `key = value` line, commented out (`# key = `) or not when
/// `commented` is true.
pub(crate) fn keys(toml: &str, commented: bool) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in toml.lines() {
        let mut line = line.trim();
        // `[[exceptions]]`, a list of tables, commented out or not: its keys are its own.
        let bare = line.strip_prefix('#').map_or(line, str::trim_start);
        if let Some(name) = bare.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            if commented || bare == line {
                section = name.to_owned();
            }
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        if commented {
            line = line.strip_prefix('#').map(str::trim_start).unwrap_or(line);
        }
        let Some((key, _)) = line.split_once(" = ") else { continue };
        if key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            keys.insert(if section.is_empty() {
                key.to_owned()
            } else {
                format!("{section}.{key}")
            });
        }
    }
    keys
}

#[test]
fn shipped_file_loads_to_exactly_the_defaults() {
    assert_eq!(load_ok(sources(Some(&shipped()), &[])), Config::default());
}

#[test]
fn shipped_file_mentions_every_key() {
    let text = std::fs::read_to_string(shipped()).unwrap();
    let mut every = Config::default();
    every.policy.default_token = robots_proxy::robots::ProductToken::new("ExampleBot").ok();
    every.https.ca_cert = Some("/ca.pem".into());
    every.https.ca_key = Some("/ca-key.pem".into());
    every.https.upstream_ca_file = Some("/roots.pem".into());
    every.access.users_file = Some("/users".into());
    every.audit.checkpoint_key = Some("/audit.pem".into());
    every.fleet.key_file = Some("/fleet.key".into());
    every.fleet.previous_key_file = Some("/fleet-previous.key".into());
    every.access.client_ca = Some("/clients-ca.pem".into());
    every.proxy.tls_listen = Some("127.0.0.1:8443".parse().unwrap());
    every.proxy.tls_certificate = Some("/proxy.pem".into());
    every.proxy.tls_key = Some("/proxy-key.pem".into());
    every.signing.directory_listen = Some(([127, 0, 0, 1], 9443).into());
    every.disclosure.operator_url = Some("https://example.com/".into());
    every.exceptions = vec![robots_proxy::policy::ExceptionEntry {
        id: "x".into(),
        authorities: vec!["news.example".into()],
        tokens: vec!["AcmeBot".into()],
        users: vec!["search-team".into()],
        paths: vec!["/".into()],
        effect: robots_proxy::policy::exceptions::Effect::Allow,
        reference: Some("r".into()),
        granted_by: Some("g".into()),
        expires: Some("2099-01-01T00:00:00Z".into()),
        usage: vec!["train-ai".into()],
    }];
    let wanted = keys(&config::render(&every), false);
    for key in ["state_dir", "proxy.listen", "policy.default_token", "log.level"] {
        assert!(wanted.contains(key), "the rendered keys include {key}: {wanted:?}");
    }
    let documented = keys(&text, true);
    let missing: Vec<_> = wanted.difference(&documented).collect();
    assert!(missing.is_empty(), "not in config/robots-proxy.toml: {missing:?}");
    let unknown: Vec<_> = documented.difference(&wanted).collect();
    assert!(unknown.is_empty(), "in config/robots-proxy.toml but not keys: {unknown:?}");
}

#[test]
fn shipped_file_leaves_out_only_the_version_and_the_optional_token() {
    let text = std::fs::read_to_string(shipped()).unwrap();
    let active = keys(&text, false);
    let all = keys(&text, true);
    let commented: Vec<_> = all.difference(&active).map(String::as_str).collect();
    assert_eq!(
        commented,
        [
            "access.client_ca",
            "access.users_file",
            "audit.checkpoint_key",
            "disclosure.operator_url",
            "exceptions.authorities",
            "exceptions.effect",
            "exceptions.expires",
            "exceptions.granted_by",
            "exceptions.id",
            "exceptions.paths",
            "exceptions.reference",
            "exceptions.tokens",
            "exceptions.usage",
            "exceptions.users",
            "fleet.key_file",
            "fleet.previous_key_file",
            "https.ca_cert",
            "https.ca_key",
            "https.upstream_ca_file",
            "policy.default_token",
            "proxy.tls_certificate",
            "proxy.tls_key",
            "proxy.tls_listen",
            "robots.user_agent",
            "signing.directory_listen"
        ]
    );
}

/// The comment at the top of the shipped file, as one line of words (without the `#`s).
fn header(text: &str) -> String {
    let lines = text.lines().take_while(|l| l.starts_with('#'));
    let words: Vec<&str> =
        lines.flat_map(|l| l.trim_start_matches('#').split_whitespace()).collect();
    words.join(" ")
}

/// Issue 38 item 7: every key the shipped file documents is either applied by a reload (the
/// typed list, `config::RELOADABLE`) or has the reason it needs a restart
/// (`config::RESTART_ONLY`); the file's header quotes the list as the code renders it, and
/// names every key or section that needs a restart.
#[test]
fn every_documented_key_is_reloadable_or_needs_a_restart_and_the_header_says_which() {
    use robots_proxy::config::{reloadability, Reloadability, Scope, RESTART_ONLY};
    let text = std::fs::read_to_string(shipped()).unwrap();
    let documented = keys(&text, true);
    let unclassified: Vec<&String> =
        documented.iter().filter(|k| reloadability(k) == Reloadability::Unclassified).collect();
    assert!(unclassified.is_empty(), "neither reloadable nor restart-only: {unclassified:?}");
    let header = header(&text);
    let summary = config::reload_summary();
    assert!(header.contains(&summary), "the header does not quote\n{summary}\n---\n{header}");
    for entry in RESTART_ONLY {
        let named = match entry.scope {
            Scope::Section => format!("[{}]", entry.key),
            Scope::Key | Scope::Tables => entry.key.to_owned(),
        };
        assert!(header.contains(&named), "the header's restart list does not name {named}");
    }
}
