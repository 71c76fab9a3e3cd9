//! `[pacing]`: decimal rates from the file and the environment, per-site tables from the file
//! only, and each bad value named with its key and source.

use std::time::Duration;

use robots_proxy::config::{self, Origin};
use robots_proxy::pacing::SitePace;

use super::{load_err, load_ok, sources, write};

const INLINE: &str = "[pacing]\nenabled = true\ndefault_rps = 2.5\nmax_wait = \"5s\"\nsites = \
                      [{ authority = \"https://www.example.com\", rps = 2, concurrency = 4 }]\n";

#[test]
fn file_sets_rates_and_sites_in_both_forms() {
    let dir = tempfile::tempdir().unwrap();
    // Inline and `[[pacing.sites]]` cannot both name the key in one file: one file each.
    let inline = write(dir.path(), "inline.toml", INLINE);
    let config = load_ok(sources(Some(&inline), &[]));
    assert!(config.pacing.enabled);
    assert_eq!(config.pacing.default_rps, 2.5);
    assert_eq!(config.pacing.max_wait, Duration::from_secs(5));
    assert_eq!(
        config.pacing.sites,
        [SitePace {
            authority: "https://www.example.com".into(),
            rps: Some(2.0),
            concurrency: Some(4),
        }]
    );
    let tables = write(
        dir.path(),
        "tables.toml",
        "[[pacing.sites]]\nauthority = \"http://slow.example.org:8080\"\nrps = 0.2\n",
    );
    let config = load_ok(sources(Some(&tables), &[]));
    assert_eq!(config.pacing.sites[0].rps, Some(0.2));
    assert_eq!(config.pacing.sites[0].concurrency, None);
    // What `config check` prints loads back to the same configuration.
    let text = config::render(&config);
    let rendered = write(dir.path(), "rendered.toml", &text);
    assert_eq!(load_ok(sources(Some(&rendered), &[])), config, "rendered:\n{text}");
}

#[test]
fn env_takes_decimal_rates_but_not_sites() {
    let config = load_ok(sources(
        None,
        &[
            ("ROBOTS_PROXY_PACING__ENABLED", "true"),
            ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "0.5"),
            ("ROBOTS_PROXY_PACING__DEFAULT_CONCURRENCY", "3"),
        ],
    ));
    assert!(config.pacing.enabled);
    assert_eq!(config.pacing.default_rps, 0.5);
    assert_eq!(config.pacing.default_concurrency, 3);

    let e = load_err(sources(None, &[("ROBOTS_PROXY_PACING__SITES", "https://example.com")]));
    let problem = &e.problems()[0];
    assert_eq!(problem.key.as_deref(), Some("pacing.sites"));
    assert_eq!(problem.origin, Some(Origin::Env(Some("ROBOTS_PROXY_PACING__SITES".into()))));
    assert!(problem.message.contains("configuration file"), "{problem}");

    let e = load_err(sources(None, &[("ROBOTS_PROXY_PACING__DEFAULT_RPS", "fast")]));
    assert_eq!(e.problems()[0].key.as_deref(), Some("pacing.default_rps"), "{e}");
}

#[test]
fn bad_values_name_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[pacing]\ndefault_rps = -1\nmax_crawl_delay = \"0s\"\n\
         sites = [{ authority = \"example.com\" }, { authority = \"https://a.example/x\" }]\n",
    );
    let e = load_err(sources(Some(&path), &[]));
    let found = |key: &str| {
        e.problems()
            .iter()
            .filter(|p| p.key.as_deref() == Some(key))
            .map(|p| {
                assert_eq!(p.origin, Some(Origin::File(path.clone())), "{p}");
                p.message.clone()
            })
            .collect::<Vec<_>>()
    };
    assert!(found("pacing.default_rps")[0].contains("is not a rate"), "{e}");
    assert!(found("pacing.max_crawl_delay")[0].contains("longer than zero"), "{e}");
    let sites = found("pacing.sites");
    assert_eq!(sites.len(), 2, "{e}");
    assert!(sites[0].contains("entry 1 (\"example.com\")"), "{e}");
    assert!(sites[1].contains("has a path"), "{e}");
}

#[test]
fn unknown_key_in_a_site_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[[pacing.sites]]\nauthority = \"https://example.com\"\nrate = 2\n",
    );
    let e = load_err(sources(Some(&path), &[]));
    assert!(e.to_string().contains("unknown"), "{e}");
    assert!(e.to_string().contains("pacing.sites"), "{e}");
}
