//! The shipped Grafana dashboard (`config/grafana/robots-proxy.json`) and Prometheus alert rules
//! (`config/prometheus/alerts.yaml`) name only metrics that a running proxy exposes: a renamed
//! or removed metric would leave a panel empty and an alert silent, with nothing to say so.
//! (`.ci/run` checks the rules' syntax with `promtool check rules`.)

use std::collections::BTreeSet;
use std::path::Path;

use super::support::{get, proxied_client, Origin, ProxyProcess};
use crate::fleet::support::Redis;

/// Every `robots_proxy_…` name in `text` (the whole file: expressions, and the names the
/// descriptions point operators to).
fn names_in(text: &str) -> BTreeSet<String> {
    const PREFIX: &str = "robots_proxy_";
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let tail = &rest[at + PREFIX.len()..];
        let len = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        // The prefix alone (as in "robots_proxy_*") names no metric.
        if len > 0 {
            names.insert(format!("{PREFIX}{}", &tail[..len]));
        }
        rest = &tail[len..];
    }
    names
}

/// The names a scrape in the classic text format exposes: every sample's name, and every
/// family's declared name (a histogram's as its `_bucket`, `_sum` and `_count` series), so that
/// a family declared with no series yet (the pacing queues, while no request waits) counts.
fn exposed(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            } else {
                names.insert(name.to_owned());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

fn shipped(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn dashboard_and_alerts_name_only_metrics_a_running_proxy_exposes() {
    // The fleet's metrics exist only with a fleet, so the proxy runs as a fleet of one.
    let Some(redis) = Redis::start().await else { return };
    let url = redis.url();
    // An exception, for `robots_proxy_exception_expiry_seconds` (one series per exception).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    let config = format!(
        "state_dir = {:?}\n\n[[exceptions]]\nid = \"partner\"\nauthorities = [\"news.example\"]\n\
         tokens = [\"AcmeBot\"]\neffect = \"allow\"\nreference = \"https://legal.example/1\"\n\
         granted_by = \"legal@example.com\"\nexpires = \"2099-01-01T00:00:00Z\"\n",
        dir.path().join("state")
    );
    std::fs::write(&file, config).unwrap();
    let proxy = ProxyProcess::start(
        &["--config", file.to_str().unwrap()],
        &[
            ("ROBOTS_PROXY_FLEET__REDIS", &url),
            ("ROBOTS_PROXY_FLEET__KEY_PREFIX", "test-dashboards:"),
            ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        ],
    );
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let client = proxied_client(proxy.proxy_addr);
    for (path, status) in [("/public", 200), ("/private/x", 403), ("/public/2", 200)] {
        let resp = client.get(format!("{}{path}", origin.base())).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{path}");
    }
    let (status, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert_eq!(status, 200);
    let exposed = exposed(&metrics);

    for file in ["config/grafana/robots-proxy.json", "config/prometheus/alerts.yaml"] {
        let used = names_in(&shipped(file));
        // What the file must at least watch; also proves the names were found at all.
        for name in ["robots_proxy_requests_total", "robots_proxy_audit_records_failed_total"] {
            assert!(used.contains(name), "{file} does not use {name}");
        }
        let missing: Vec<&String> = used.iter().filter(|n| !exposed.contains(*n)).collect();
        assert!(
            missing.is_empty(),
            "{file} uses metrics a running proxy does not expose: {missing:?}\n/metrics:\n{metrics}"
        );
    }
    drop(redis);
}

#[test]
fn names_are_read_whole_and_histograms_expand() {
    let text =
        "rate(robots_proxy_a_total{x=\"1\"}[5m]) / robots_proxy_b_seconds_bucket robots_proxy_*";
    let names: Vec<String> = names_in(text).into_iter().collect();
    assert_eq!(names, ["robots_proxy_a_total", "robots_proxy_b_seconds_bucket"]);
    let scrape = "# TYPE robots_proxy_b_seconds histogram\nrobots_proxy_b_seconds_sum 1\n\
                  # TYPE robots_proxy_q gauge\nrobots_proxy_c_total{k=\"v\"} 2\n";
    let exposed = exposed(scrape);
    for name in ["robots_proxy_b_seconds_bucket", "robots_proxy_q", "robots_proxy_c_total"] {
        assert!(exposed.contains(name), "{name}");
    }
    assert!(!exposed.contains("robots_proxy_b_seconds"));
}
