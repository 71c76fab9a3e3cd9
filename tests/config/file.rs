//! The TOML file: layering over the defaults, unknown keys, bad values, unreadable files.

use std::net::SocketAddr;
use std::time::Duration;

use robots_proxy::config::{self, ByteSize, Config, ConfigError, Origin};

use super::{load_err, load_ok, sources, write};

#[test]
fn no_file_no_env_gives_the_defaults() {
    assert_eq!(load_ok(sources(None, &[])), Config::default());
}

#[test]
fn file_values_replace_defaults_and_leave_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        r#"
state_dir = "/var/lib/rp"
[proxy]
listen = "0.0.0.0:3128"
[robots]
max_age = "12h"
max_body = "1MiB"
[policy]
token_sources = ["user-agent"]
default_token = "ExampleBot"
"#,
    );
    let config = load_ok(sources(Some(&path), &[]));
    let mut expected = Config { state_dir: "/var/lib/rp".into(), ..Config::default() };
    expected.proxy.listen = "0.0.0.0:3128".parse::<SocketAddr>().unwrap();
    expected.robots.max_age = Duration::from_secs(12 * 3600);
    expected.robots.max_body = ByteSize(1 << 20);
    expected.policy.token_sources = vec![config::TokenSource::UserAgent];
    expected.policy.default_token = robots_proxy::robots::ProductToken::new("ExampleBot").ok();
    assert_eq!(config, expected);
}

#[test]
fn missing_file_named_explicitly_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let e = load_err(sources(Some(&path), &[]));
    assert!(matches!(e, ConfigError::ReadFile { .. }));
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("cannot read configuration file {}: ", path.display())),
        "{text}"
    );
    assert!(text.contains("No such file"), "{text}");
}

#[test]
fn a_directory_is_not_a_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let e = load_err(sources(Some(dir.path()), &[]));
    assert!(matches!(e, ConfigError::ReadFile { .. }), "{e}");
}

#[test]
fn unknown_key_names_key_file_and_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[robots]\nmax_agee = \"1h\"\n");
    let e = load_err(sources(Some(&path), &[]));
    let text = e.to_string();
    let expected_start = format!(
        "invalid configuration: robots.max_agee (from file {}): unknown key; did you mean \
         robots.max_age? (known keys in [robots]: user_agent, connect_timeout,",
        path.display()
    );
    assert!(text.starts_with(&expected_start), "{text}");
    let [problem] = e.problems() else { panic!("one problem: {e}") };
    assert_eq!(problem.key.as_deref(), Some("robots.max_agee"));
    assert_eq!(problem.origin, Some(Origin::File(path.clone())));
}

#[test]
fn unknown_section_and_top_level_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "statedir = \"x\"\n[proxxy]\nlisten = \"1.2.3.4:5\"\n");
    let e = load_err(sources(Some(&path), &[]));
    let keys: Vec<_> = e.problems().iter().map(|p| p.key.clone().unwrap_or_default()).collect();
    assert!(keys.contains(&"statedir".to_owned()), "{e}");
    assert!(keys.contains(&"proxxy".to_owned()), "{e}");
    let text = e.to_string();
    assert!(text.contains("statedir (from file"), "{text}");
    assert!(text.contains("did you mean state_dir?"), "{text}");
    assert!(text.contains("did you mean proxy?"), "{text}");
    assert!(text.contains("(known keys at the top level: state_dir, proxy,"), "{text}");
}

#[test]
fn wrong_type_names_key_file_and_expected_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[robots]\nmax_redirects = \"five\"\n");
    let e = load_err(sources(Some(&path), &[]));
    assert_eq!(
        e.to_string(),
        format!(
            "invalid configuration: robots.max_redirects (from file {}): invalid type: found \
             string \"five\", expected u32",
            path.display()
        )
    );
}

#[test]
fn duration_as_a_number_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[robots]\nmax_age = 3600\n");
    let text = load_err(sources(Some(&path), &[])).to_string();
    assert!(text.contains("robots.max_age (from file"), "{text}");
    assert!(text.contains("write durations as strings with a unit, like \"30s\""), "{text}");
}

#[test]
fn bad_duration_and_size_strings() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[upstream]\nconnect_timeout = \"10 parsecs\"\n[robots]\ncache_memory = \"2 TiB\"\n",
    );
    let e = load_err(sources(Some(&path), &[]));
    let text = e.to_string();
    assert!(text.starts_with("invalid configuration (2 problems):\n  "), "{text}");
    assert!(text.contains("upstream.connect_timeout (from file"), "{text}");
    assert!(text.contains("robots.cache_memory (from file"), "{text}");
    assert!(text.contains("unknown size unit \"tib\""), "{text}");
}

#[test]
fn unknown_enum_value_lists_the_choices() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[audit]\nfsync = \"sometimes\"\n");
    let text = load_err(sources(Some(&path), &[])).to_string();
    let expected = format!(
        "invalid configuration: audit.fsync (from file {}): unknown value \"sometimes\"; \
         expected one of: never, interval, always",
        path.display()
    );
    assert_eq!(text, expected);
}

#[test]
fn toml_syntax_error_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[proxy]\nlisten = \n");
    let e = load_err(sources(Some(&path), &[]));
    let [problem] = e.problems() else { panic!("one problem: {e}") };
    assert_eq!(problem.key, None);
    assert_eq!(problem.origin, Some(Origin::File(path.clone())));
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("invalid configuration: file {}: ", path.display())),
        "{text}"
    );
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn render_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.policy.default_token = robots_proxy::robots::ProductToken::new("ExampleBot").ok();
    config.robots.user_agent = "12345".into();
    config.robots.max_body = ByteSize(600 * 1024);
    config.robots.retry_initial = Duration::from_millis(1500);
    config.audit.fsync = config::FsyncPolicy::Always;
    for config in [Config::default(), config] {
        let text = config::render(&config);
        let path = write(dir.path(), "rendered.toml", &text);
        assert_eq!(load_ok(sources(Some(&path), &[])), config, "rendered:\n{text}");
    }
    let text = config::render(&Config::default());
    assert!(text.contains("max_body = \"500KiB\""), "{text}");
    assert!(text.contains("[audit]"), "{text}");
}

#[test]
fn audit_path_is_under_state_dir_unless_absolute() {
    let mut config = Config { state_dir: "/var/lib/rp".into(), ..Config::default() };
    assert_eq!(config.audit_path(), std::path::Path::new("/var/lib/rp/audit.jsonl"));
    config.audit.path = "/var/log/rp/audit.jsonl".into();
    assert_eq!(config.audit_path(), std::path::Path::new("/var/log/rp/audit.jsonl"));
}
