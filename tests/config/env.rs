//! `ROBOTS_PROXY_*` environment variables: naming, typing by key, typos, precedence.
//!
//! The variables are passed to the loader explicitly, so these tests never touch the process
//! environment and can run in parallel.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use robots_proxy::config::{
    self, ByteSize, ConfigSources, LogFormat, Origin, Overrides, TokenSource, CONFIG_FILE_ENV,
};

use super::{load_err, load_ok, sources, write};

#[test]
fn sections_keys_and_top_level() {
    let config = load_ok(sources(
        None,
        &[
            ("ROBOTS_PROXY_PROXY__LISTEN", "127.0.0.1:9000"),
            ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "12h"),
            ("ROBOTS_PROXY_STATE_DIR", "/srv/rp"),
            ("ROBOTS_PROXY_ROBOTS__MAX_BODY", "1MiB"),
            ("ROBOTS_PROXY_ROBOTS__CACHE_MEMORY", "1073741824"),
            ("ROBOTS_PROXY_ROBOTS__MAX_REDIRECTS", " 7 "),
            ("ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "true"),
            ("ROBOTS_PROXY_POLICY__TOKEN_SOURCES", "user-agent, header"),
            ("ROBOTS_PROXY_LOG__FORMAT", "json"),
        ],
    ));
    assert_eq!(config.proxy.listen, "127.0.0.1:9000".parse::<SocketAddr>().unwrap());
    assert_eq!(config.robots.max_age, Duration::from_secs(12 * 3600));
    assert_eq!(config.state_dir, PathBuf::from("/srv/rp"));
    assert_eq!(config.robots.max_body, ByteSize(1 << 20));
    assert_eq!(config.robots.cache_memory, ByteSize(1 << 30));
    assert_eq!(config.robots.max_redirects, 7);
    assert!(config.audit.all_decisions);
    assert_eq!(config.policy.token_sources, [TokenSource::UserAgent, TokenSource::Header]);
    assert_eq!(config.log.format, LogFormat::Json);
}

/// figment's `Env` reads `12345` as a number, which then fails to load as a string (Figment
/// issues #17, #42, #70). Values here are typed by the key they set.
#[test]
fn text_keys_take_the_value_verbatim() {
    let config = load_ok(sources(
        None,
        &[
            ("ROBOTS_PROXY_ROBOTS__USER_AGENT", "12345"),
            ("ROBOTS_PROXY_PROXY__VIA", "1.10"),
            ("ROBOTS_PROXY_POLICY__TOKEN_HEADER", "X-Token"),
            ("ROBOTS_PROXY_LOG__LEVEL", "warn,robots_proxy=debug"),
            ("ROBOTS_PROXY_AUDIT__PATH", "true"),
        ],
    ));
    assert_eq!(config.robots.user_agent, "12345");
    assert_eq!(config.proxy.via, "1.10");
    assert_eq!(config.policy.token_header, "X-Token");
    assert_eq!(config.log.level, "warn,robots_proxy=debug");
    assert_eq!(config.audit.path, PathBuf::from("true"));
}

#[test]
fn env_wins_over_file_and_flags_win_over_env() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[proxy]\nlisten = \"127.0.0.1:1111\"\nvia = \"from-file\"\n[log]\nlevel = \"debug\"\n\
         [policy]\ndefault_token = \"FileBot\"\n",
    );
    let mut s = sources(
        Some(&path),
        &[
            ("ROBOTS_PROXY_PROXY__LISTEN", "127.0.0.1:2222"),
            ("ROBOTS_PROXY_LOG__LEVEL", "warn"),
            ("ROBOTS_PROXY_POLICY__DEFAULT_TOKEN", ""),
        ],
    );
    s.overrides = Overrides {
        listen: Some("127.0.0.1:3333".parse().unwrap()),
        log_format: Some(LogFormat::Json),
        ..Overrides::default()
    };
    let config = load_ok(s);
    assert_eq!(config.proxy.listen.port(), 3333, "flag beats env");
    assert_eq!(config.proxy.via, "from-file", "file beats default");
    assert_eq!(config.log.level, "warn", "env beats file");
    assert_eq!(config.log.format, LogFormat::Json, "flag beats default");
    assert_eq!(config.policy.default_token, None, "an empty value unsets an optional key");
}

#[test]
fn typo_in_a_variable_is_an_error_naming_it_and_the_likely_key() {
    let e = load_err(sources(None, &[("ROBOTS_PROXY_PROXY__LISTN", "127.0.0.1:9000")]));
    assert_eq!(
        e.to_string(),
        "invalid configuration: proxy.listn (from environment variable \
         ROBOTS_PROXY_PROXY__LISTN): unknown key; did you mean proxy.listen \
         (ROBOTS_PROXY_PROXY__LISTEN)?"
    );
    let [problem] = e.problems() else { panic!("one problem: {e}") };
    assert_eq!(problem.origin, Some(Origin::Env(Some("ROBOTS_PROXY_PROXY__LISTN".into()))));
}

#[test]
fn single_underscore_separator_is_caught() {
    let text = load_err(sources(None, &[("ROBOTS_PROXY_ROBOTS_MAX_AGE", "1h")])).to_string();
    assert!(text.contains("robots_max_age (from environment variable"), "{text}");
    assert!(text.contains("did you mean robots.max_age (ROBOTS_PROXY_ROBOTS__MAX_AGE)?"), "{text}");
}

#[test]
fn unrelated_variables_are_ignored() {
    let config = load_ok(sources(
        None,
        &[
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("ROBOTS_PROXYISH", "x"),
            ("robots_proxy_proxy__listen", "lowercase prefix is not ours"),
            (CONFIG_FILE_ENV, "/etc/robots-proxy.toml"),
        ],
    ));
    assert_eq!(config, config::Config::default());
}

#[test]
fn a_section_cannot_be_set_as_a_whole() {
    let text = load_err(sources(None, &[("ROBOTS_PROXY_ROBOTS", "x")])).to_string();
    assert!(text.contains("robots (from environment variable ROBOTS_PROXY_ROBOTS)"), "{text}");
    assert!(text.contains("[robots] is a section; set its keys one by one"), "{text}");
}

#[test]
fn the_same_key_set_twice_is_an_error() {
    let text = load_err(sources(
        None,
        &[
            ("ROBOTS_PROXY_PROXY__LISTEN", "127.0.0.1:1"),
            ("ROBOTS_PROXY_proxy__listen", "127.0.0.1:2"),
        ],
    ))
    .to_string();
    assert!(text.contains("set twice, also by ROBOTS_PROXY_PROXY__LISTEN"), "{text}");
}

#[test]
fn bad_values_name_the_variable() {
    let e = load_err(sources(
        None,
        &[
            ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "12x"),
            ("ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "yes"),
            ("ROBOTS_PROXY_UPSTREAM__POOL_MAX_IDLE_PER_HOST", "-1"),
            ("ROBOTS_PROXY_PROXY__LISTEN", "localhost:8080"),
            ("ROBOTS_PROXY_LOG__FORMAT", "xml"),
        ],
    ));
    let text = e.to_string();
    assert!(text.starts_with("invalid configuration (5 problems):"), "{text}");
    for (key, var, message) in [
        ("robots.max_age", "ROBOTS_PROXY_ROBOTS__MAX_AGE", "unknown time unit \"x\""),
        ("audit.all_decisions", "ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "expected a boolean"),
        ("upstream.pool_max_idle_per_host", "ROBOTS_PROXY_UPSTREAM__POOL_MAX_IDLE_PER_HOST", "-1"),
        ("proxy.listen", "ROBOTS_PROXY_PROXY__LISTEN", "invalid socket address"),
        ("log.format", "ROBOTS_PROXY_LOG__FORMAT", "expected one of: text, json"),
    ] {
        let problem = e
            .problems()
            .iter()
            .find(|p| p.key.as_deref() == Some(key))
            .unwrap_or_else(|| panic!("no problem for {key}: {text}"));
        assert_eq!(problem.origin, Some(Origin::Env(Some(var.into()))), "{key}");
        assert!(problem.message.contains(message), "{key}: {}", problem.message);
        assert!(text.contains(&format!("\n  {key} (from environment variable {var}): ")), "{text}");
    }
}

#[test]
fn typos_are_reported_with_the_other_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[robots]\nmax_redirects = 50\n");
    let e = load_err(sources(Some(&path), &[("ROBOTS_PROXY_PROXY__LISTN", "x")]));
    assert_eq!(e.problems().len(), 2, "{e}");
}

#[test]
fn from_process_env_keeps_only_our_variables() {
    // Reads the real environment: only checks the filter, not particular values.
    let s = ConfigSources::from_process_env(None, Overrides::default());
    assert!(s.env.iter().all(|(name, _)| name.starts_with(config::ENV_PREFIX)));
}

#[test]
fn upstream_body_idle_timeout_is_set_like_every_key_and_not_zero() {
    let config = load_ok(sources(None, &[("ROBOTS_PROXY_UPSTREAM__BODY_IDLE_TIMEOUT", "750ms")]));
    assert_eq!(config.upstream.body_idle_timeout, Duration::from_millis(750));
    assert!(config::is_reloadable("upstream.body_idle_timeout"));
    let e = load_err(sources(None, &[("ROBOTS_PROXY_UPSTREAM__BODY_IDLE_TIMEOUT", "0s")]));
    let problem = e
        .problems()
        .iter()
        .find(|p| p.key.as_deref() == Some("upstream.body_idle_timeout"))
        .unwrap_or_else(|| panic!("no problem for the key: {e}"));
    assert_eq!(problem.message, "must be longer than zero");
    assert_eq!(
        problem.origin,
        Some(Origin::Env(Some("ROBOTS_PROXY_UPSTREAM__BODY_IDLE_TIMEOUT".into())))
    );
}
