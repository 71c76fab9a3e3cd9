//! Rules checked after loading: each problem names its key and where the value came from.

use std::time::Duration;

use robots_proxy::config::{Config, Origin, Overrides};

use super::{load_err, sources, write};

/// The problem for `key`, from loading `toml` as a file with no environment.
fn file_problem(toml: &str, key: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", toml);
    let e = load_err(sources(Some(&path), &[]));
    let problem = e
        .problems()
        .iter()
        .find(|p| p.key.as_deref() == Some(key))
        .unwrap_or_else(|| panic!("no problem for {key}: {e}"));
    assert_eq!(problem.origin, Some(Origin::File(path.clone())), "{problem}");
    problem.message.clone()
}

#[test]
fn max_body_below_500_kib() {
    let m = file_problem("[robots]\nmax_body = \"100KiB\"\n", "robots.max_body");
    assert_eq!(m, "100KiB is below 500KiB: RFC 9309 §2.5 requires parsing at least 500 KiB");
}

#[test]
fn max_redirects_above_20() {
    let m = file_problem("[robots]\nmax_redirects = 21\n", "robots.max_redirects");
    assert_eq!(m, "21 is more than 20");
}

#[test]
fn min_age_above_max_age_names_the_env_var() {
    let e = load_err(sources(
        None,
        &[("ROBOTS_PROXY_ROBOTS__MIN_AGE", "2h"), ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "1h")],
    ));
    assert_eq!(
        e.to_string(),
        "invalid configuration: robots.min_age (from environment variable \
         ROBOTS_PROXY_ROBOTS__MIN_AGE): 2h is longer than robots.max_age (1h)"
    );
}

#[test]
fn empty_user_agent() {
    let m = file_problem("[robots]\nuser_agent = \"  \"\n", "robots.user_agent");
    assert!(m.starts_with("must not be empty"), "{m}");
}

#[test]
fn user_agent_with_control_characters() {
    let m = file_problem("[robots]\nuser_agent = \"bot\\nInjected: yes\"\n", "robots.user_agent");
    assert!(m.contains("is not a valid header value"), "{m}");
}

#[test]
fn empty_token_sources_from_env() {
    let e = load_err(sources(None, &[("ROBOTS_PROXY_POLICY__TOKEN_SOURCES", "")]));
    let text = e.to_string();
    assert!(
        text.contains(
            "policy.token_sources (from environment variable ROBOTS_PROXY_POLICY__TOKEN_SOURCES): \
             must name at least one of: header, user-agent, default"
        ),
        "{text}"
    );
}

#[test]
fn duplicate_token_source() {
    let m = file_problem(
        "[policy]\ntoken_sources = [\"header\", \"header\"]\n",
        "policy.token_sources",
    );
    assert_eq!(m, "header is listed twice");
}

#[test]
fn token_header_must_be_a_header_name_the_request_does_not_need() {
    let m = file_problem("[policy]\ntoken_header = \"X Token\"\n", "policy.token_header");
    assert_eq!(m, "\"X Token\" is not a valid header name");
    let m = file_problem("[policy]\ntoken_header = \"Host\"\n", "policy.token_header");
    assert!(m.starts_with("\"Host\" cannot be used"), "{m}");
}

#[test]
fn fold_case_sites_must_be_hosts() {
    for bad in ["https://shop.example.com", "shop.example.com/x", "", "user@host", "a b"] {
        let toml = format!("[policy]\nfold_case_sites = [{bad:?}]\n");
        let m = file_problem(&toml, "policy.fold_case_sites");
        assert!(m.contains("is not a site"), "{bad}: {m}");
    }
    let m = file_problem("[policy]\nfold_case = \"sometimes\"\n", "policy.fold_case");
    assert!(m.contains("detect"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let toml = "[policy]\nfold_case = \"listed\"\nfold_case_sites = [\"Shop.example.com\", \
                \"10.0.0.5:8080\", \"[::1]:8443\"]\n";
    let path = write(dir.path(), "c.toml", toml);
    assert!(robots_proxy::config::load(sources(Some(&path), &[])).is_ok());
}

#[test]
fn report_mode_keys_are_checked_naming_the_key() {
    let m = file_problem("[policy]\nmode = \"warn\"\n", "policy.mode");
    assert!(m.contains("enforce") && m.contains("report"), "{m}");
    let m = file_problem("[policy]\nreport_tokens = [\"Acme/Bot\"]\n", "policy.report_tokens");
    assert!(m.contains("is not a product token"), "{m}");
    let m = file_problem("[policy]\nreport_users = [\" \"]\n", "policy.report_users");
    assert!(m.contains("must not be empty"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let toml = "[policy]\nmode = \"report\"\nreport_tokens = [\"AcmeBot\"]\n\
                report_users = [\"search-team\"]\n";
    let path = write(dir.path(), "c.toml", toml);
    let config = robots_proxy::config::load(sources(Some(&path), &[])).unwrap();
    assert_eq!(config.policy.mode, robots_proxy::policy::PolicyMode::Report);
    assert_eq!(config.policy.report_tokens, ["AcmeBot"]);
}

#[test]
fn default_token_must_be_a_product_token() {
    let m = file_problem("[policy]\ndefault_token = \"Example Bot/1.0\"\n", "policy.default_token");
    assert!(m.contains("is not a product token"), "{m}");
}

#[test]
fn via_must_be_a_token() {
    let m = file_problem("[proxy]\nvia = \"my proxy\"\n", "proxy.via");
    assert!(m.starts_with("\"my proxy\" is not a valid Via pseudonym"), "{m}");
}

#[test]
fn zero_durations_and_inverted_ranges() {
    let toml = "[upstream]\nconnect_timeout = \"0s\"\n[robots]\nconnect_timeout = \"30s\"\n\
                fetch_timeout = \"20s\"\nretry_initial = \"2h\"\n[audit]\nfsync_interval = \"0s\"\n\
                queue_capacity = 0\n";
    assert_eq!(file_problem(toml, "upstream.connect_timeout"), "must be longer than zero");
    assert!(
        file_problem(toml, "robots.connect_timeout").contains("longer than robots.fetch_timeout")
    );
    assert!(file_problem(toml, "robots.retry_initial").contains("longer than robots.retry_max"));
    assert_eq!(file_problem(toml, "audit.fsync_interval"), "must be longer than zero");
    assert_eq!(file_problem(toml, "audit.queue_capacity"), "must be at least 1");
}

#[test]
fn zero_fsync_interval_is_fine_when_not_used() {
    let mut config = Config::default();
    config.audit.fsync = robots_proxy::config::FsyncPolicy::Always;
    config.audit.fsync_interval = Duration::ZERO;
    assert!(config.validate().is_ok());
}

#[test]
fn cache_smaller_than_one_body() {
    let m = file_problem("[robots]\ncache_memory = \"100KiB\"\n", "robots.cache_memory");
    assert_eq!(m, "100KiB cannot hold even one robots.txt of robots.max_body (500KiB)");
}

/// Issue 41, M4: `archive.max_bytes` is checked by `config check`: a bound that cannot hold
/// one robots.txt is refused, naming both keys; past its range, naming the range.
#[test]
fn archive_max_bytes_below_one_body_or_out_of_range() {
    let m = file_problem("[archive]\nmax_bytes = \"100KiB\"\n", "archive.max_bytes");
    assert_eq!(
        m,
        "100KiB cannot hold even one robots.txt of robots.max_body (500KiB); 0 means no bound"
    );
    let m = file_problem("[archive]\nmax_bytes = \"70000GiB\"\n", "archive.max_bytes");
    assert!(m.contains("65536GiB") && m.contains("0 means no bound"), "{m}");
}

#[test]
fn bad_log_level() {
    let m = file_problem("[log]\nlevel = \"robots_proxy=loud\"\n", "log.level");
    assert!(m.starts_with("\"robots_proxy=loud\" is not a valid filter"), "{m}");
}

#[test]
fn a_bad_flag_is_reported_as_coming_from_the_command_line() {
    let mut s = sources(None, &[]);
    s.overrides = Overrides { log_level: Some("a=b=c".into()), ..Overrides::default() };
    let text = load_err(s).to_string();
    assert!(
        text.starts_with("invalid configuration: log.level (from the command line): "),
        "{text}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[robots]\nmax_body = 1\nmax_redirects = 99\n[policy]\ntoken_sources = []\n",
    );
    let e = load_err(sources(Some(&path), &[]));
    let keys: Vec<_> = e.problems().iter().filter_map(|p| p.key.as_deref()).collect();
    assert_eq!(keys, ["robots.max_body", "robots.max_redirects", "policy.token_sources"], "{e}");
}

#[test]
fn validate_reports_keys_without_origin() {
    let mut config = Config::default();
    config.robots.max_redirects = 100;
    let e = config.validate().unwrap_err();
    assert_eq!(e.to_string(), "invalid configuration: robots.max_redirects: 100 is more than 20");
}

#[test]
fn tls_listener_needs_its_certificate_and_key() {
    let m = file_problem("[proxy]\ntls_listen = \"127.0.0.1:8443\"\n", "proxy.tls_listen");
    assert_eq!(m, "needs proxy.tls_certificate and proxy.tls_key (PEM files)");
    let m = file_problem("[proxy]\ntls_certificate = \"/proxy.pem\"\n", "proxy.tls_certificate");
    assert_eq!(m, "the TLS listener's files are set but proxy.tls_listen is not");
    let m = file_problem("[proxy]\ntls_listen = \"127.0.0.1:9090\"\n", "proxy.tls_listen");
    assert!(m.contains("also proxy.listen or admin.listen"), "{m}");
}

#[test]
fn client_certificates_need_the_tls_listener_and_a_ca() {
    let m = file_problem("[access]\nclient_ca = \"/ca.pem\"\n", "access.client_ca");
    assert!(m.contains("set proxy.tls_listen"), "{m}");
    let m =
        file_problem("[access]\nclient_certificate = \"required\"\n", "access.client_certificate");
    assert!(m.contains("needs access.client_ca"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[access]\nclient_certificate = \"always\"\n");
    let e = load_err(sources(Some(&path), &[])).to_string();
    assert!(e.contains("access.client_certificate"), "{e}");
}

#[test]
fn signing_identity_naming_an_unlisted_key() {
    let m = file_problem(
        "[signing]\nkeys = [{ name = \"k1\" }]\n\
         identities = [{ token = \"ExampleBot\", keys = [\"k2\"], agent = \"https://bots.example.com\" }]\n",
        "signing.identities",
    );
    assert_eq!(m, "entry 1: key k2 is not listed in signing.keys");
}

#[test]
fn signing_reuse_not_shorter_than_lifetime() {
    let m = file_problem("[signing]\nlifetime = \"10s\"\nreuse = \"10s\"\n", "signing.reuse");
    assert!(m.contains("a reused signature would reach the origin expired"), "{m}");
}

#[test]
fn signing_unknown_component_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[signing]\ncomponents = [\"@method\", \"@body\"]\n");
    let e = load_err(sources(Some(&path), &[])).to_string();
    assert!(e.contains("signing.components") && e.contains("\"@body\""), "{e}");
    let m = file_problem("[signing]\ncomponents = [\"@path\", \"@path\"]\n", "signing.components");
    assert!(m.contains("@path is listed more than once"), "{m}");
}

#[test]
fn signing_agent_must_have_the_form_of_its_type() {
    let entry = |agent: &str, ty: &str| {
        format!(
            "[signing]\nkeys = [{{ name = \"k1\" }}]\nidentities = [{{ token = \"ExampleBot\", \
             keys = [\"k1\"], agent = \"{agent}\"{ty} }}]\n"
        )
    };
    // directory (the default): an origin, nothing else.
    for agent in
        ["https://bots.example.com/keys", "https://bots.example.com/", "https://b.example?x"]
    {
        let m = file_problem(&entry(agent, ""), "signing.identities");
        assert!(m.contains("is not an origin"), "{agent}: {m}");
    }
    // jwks_uri: a full https URL.
    let m = file_problem(
        &entry("http://bots.example.com/jwks.json", ", agent_type = \"jwks_uri\""),
        "signing.identities",
    );
    assert!(m.contains("takes the https URL of the JWK Set"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        &entry("https://bots.example.com/jwks.json", ", agent_type = \"jwks\""),
    );
    let e = load_err(sources(Some(&path), &[])).to_string();
    assert!(e.contains("signing.identities") && e.contains("jwks_uri"), "{e}");
}

#[test]
fn signing_values_are_parsed_when_the_file_is_read() {
    for (toml, says) in [
        ("keys = [{ name = \"../k\" }]", "is not a key name"),
        ("keys = [{ name = \"k\", sign_from = \"tomorrow\" }]", "is not an RFC 3339 time"),
        (
            "identities = [{ token = \"*\", keys = [\"k\"], agent = \"ftp://bots.example.com\" }]",
            "must be an https:// (or http://) URL",
        ),
        (
            "identities = [{ token = \"Bad/Bot\", keys = [\"k\"], agent = \"https://b.example\" }]",
            "Bad/Bot",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "c.toml", &format!("[signing]\n{toml}\n"));
        let e = load_err(sources(Some(&path), &[])).to_string();
        assert!(e.contains("signing.") && e.contains(says), "{toml}: {e}");
    }
}

/// Values that deserialize fine but used to crash `serve` (issue 27 §8, §9): each is refused
/// naming the key and the bound.
#[test]
fn huge_durations_and_counts_are_refused_naming_the_key_and_the_bound() {
    let huge = "500000000000years";
    let cases: &[(&str, &str, &str, &str)] = &[
        ("proxy.header_read_timeout", "ROBOTS_PROXY_PROXY__HEADER_READ_TIMEOUT", huge, "1day"),
        ("upstream.body_idle_timeout", "ROBOTS_PROXY_UPSTREAM__BODY_IDLE_TIMEOUT", huge, "1day"),
        ("audit.fsync_interval", "ROBOTS_PROXY_AUDIT__FSYNC_INTERVAL", huge, "1day"),
        ("robots.give_up_after", "ROBOTS_PROXY_ROBOTS__GIVE_UP_AFTER", huge, "1year"),
        (
            "audit.queue_capacity",
            "ROBOTS_PROXY_AUDIT__QUEUE_CAPACITY",
            "9223372036854775807",
            "1048576",
        ),
        ("limits.max_headers", "ROBOTS_PROXY_LIMITS__MAX_HEADERS", "9223372036854775807", "8192"),
        (
            "upstream.pool_max_idle_per_host",
            "ROBOTS_PROXY_UPSTREAM__POOL_MAX_IDLE_PER_HOST",
            "9223372036854775807",
            "65536",
        ),
    ];
    for (key, var, value, bound) in cases {
        let e = load_err(sources(None, &[(var, value)]));
        let problem = e
            .problems()
            .iter()
            .find(|p| p.key.as_deref() == Some(*key))
            .unwrap_or_else(|| panic!("no problem for {key}: {e}"));
        assert_eq!(problem.origin, Some(Origin::Env(Some(var.to_string()))), "{problem}");
        assert!(problem.message.contains(&format!("is more than {bound}")), "{problem}");
    }
}

/// Issue 39, item 6: `audit.witnesses` and `audit.witness_keys` are checked, each problem
/// named: a URL that is not https (or http to loopback), a key that is not a cosignature vkey,
/// counts that differ, witnesses without a checkpoint key.
#[test]
fn witnesses_and_their_keys_are_checked() {
    let good = "witness.example.net/w1+9980d344+BE8bb9KowqGpPx4NXo0KbDsvnkp9HIteLzptnAseT3oo";
    let keyed = "[audit]\ncheckpoint_key = \"/audit.pem\"\n";
    let m = file_problem(
        &format!(
            "{keyed}witnesses = [\"http://witness.example.net\"]\nwitness_keys = [\"{good}\"]\n"
        ),
        "audit.witnesses",
    );
    assert_eq!(m, "entry 1 (\"http://witness.example.net\"): http is allowed only to a loopback address: use https");
    let log_key = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
    let m = file_problem(
        &format!("{keyed}witnesses = [\"https://w.example\"]\nwitness_keys = [\"{log_key}\"]\n"),
        "audit.witness_keys",
    );
    assert!(m.starts_with("entry 1 (") && m.contains("signature type 0x01"), "{m}");
    let bad_id = good.replace("9980d344", "00000000");
    let m = file_problem(
        &format!("{keyed}witnesses = [\"https://w.example\"]\nwitness_keys = [\"{bad_id}\"]\n"),
        "audit.witness_keys",
    );
    assert!(m.contains("does not match the name and key (SHA-256 gives 9980d344)"), "{m}");
    let m = file_problem(
        &format!("{keyed}witnesses = [\"https://a.example\", \"https://b.example\"]\nwitness_keys = [\"{good}\"]\n"),
        "audit.witness_keys",
    );
    assert_eq!(m, "2 witness URL(s) and 1 key(s): give one key per URL, in the same order");
    let m = file_problem(
        &format!("[audit]\nwitnesses = [\"https://w.example\"]\nwitness_keys = [\"{good}\"]\n"),
        "audit.witnesses",
    );
    assert_eq!(m, "witnesses cosign checkpoints: set audit.checkpoint_key too");
    let mut config = Config::default();
    config.audit.checkpoint_key = Some("/audit.pem".into());
    config.audit.witnesses = vec!["http://127.0.0.1:7000/".into(), "https://w.example/p".into()];
    config.audit.witness_keys = vec![good.into(), good.replace("w1", "w2")];
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("audit.witness_keys") && e.contains("does not match"), "{e}");
    config.audit.witness_keys[1] = good.into();
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("the key name witness.example.net/w1 is given twice"), "{e}");
}

/// A configuration built in code is refused by `Config::validate` exactly as the same values
/// written in a file are by the loader (`serve`, `config check` and every reload): both go
/// through the one conversion, each section's `TryFrom` and the rules between sections.
#[test]
fn validate_refuses_what_the_loader_refuses_with_the_same_problems() {
    type Set = fn(&mut Config);
    let rows: &[(&str, Set)] = &[
        ("[proxy]\nvia = \"a b\"\n", |c| c.proxy.via = "a b".into()),
        ("[robots]\nrefresh_ahead = 0.9\n", |c| c.robots.refresh_ahead = 0.9),
        ("[audit]\nqueue_capacity = 0\n", |c| c.audit.queue_capacity = 0),
        ("[pacing]\ndefault_rps = -1.0\n", |c| c.pacing.default_rps = -1.0),
        ("[limits]\nmax_headers = 0\n", |c| c.limits.max_headers = 0),
        ("[fleet]\nprevious_key_file = \"/k\"\n", |c| {
            c.fleet.previous_key_file = Some("/k".into())
        }),
        ("[signing]\nreuse = \"2days\"\n", |c| c.signing.reuse = Duration::from_secs(2 * 86400)),
        ("[disclosure]\nfeed_entries = 0\n", |c| c.disclosure.feed_entries = 0),
        ("[archive]\nmax_bytes = \"1KiB\"\n", |c| {
            c.archive.max_bytes = robots_proxy::config::ByteSize(1024)
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (toml, set) in rows {
        let path = write(dir.path(), "c.toml", toml);
        let loaded = load_err(sources(Some(&path), &[]));
        let mut config = Config::default();
        set(&mut config);
        let validated = config.validate().unwrap_err();
        let shown = |e: &robots_proxy::config::ConfigError| -> Vec<(Option<String>, String)> {
            e.problems().iter().map(|p| (p.key.clone(), p.message.clone())).collect()
        };
        assert!(!shown(&loaded).is_empty(), "{toml}");
        assert_eq!(shown(&loaded), shown(&validated), "{toml}");
    }
}
