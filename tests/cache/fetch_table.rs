//! One test per row of the status table (RFC 9309 §2.3.1, `shared/spec/README.md`).

use std::time::{Duration, Instant};

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::cache::{FetchOutcome, RobotsRules, RobotsSnapshot, RobotsState};
use robots_proxy::clock::Clock;

use super::support::{allowed, cache, cache_with, settings, Origin, Reply, TEST_AGENT};

const RULES: &str = "User-agent: *\nDisallow: /private\nAllow: /private/ok\n";

fn assert_rules_of(snapshot: &RobotsSnapshot) {
    assert!(matches!(snapshot.rules, RobotsRules::Parsed(_)), "{snapshot:?}");
    assert!(!allowed(snapshot, "/private/x"));
    assert!(allowed(snapshot, "/private/ok"));
    assert!(allowed(snapshot, "/public"));
}

fn assert_unreachable(snapshot: &RobotsSnapshot) {
    assert_eq!(snapshot.state, RobotsState::Unreachable, "{snapshot:?}");
    assert!(matches!(snapshot.rules, RobotsRules::DisallowAll));
    assert!(!allowed(snapshot, "/anything"));
    assert_eq!(snapshot.failures, 1);
    assert!(snapshot.failing_since.is_some());
}

fn network_error(snapshot: &RobotsSnapshot) -> String {
    match &snapshot.last_outcome {
        FetchOutcome::Network(e) => e.clone(),
        other => panic!("expected a network error, got {other:?}"),
    }
}

/// §2.3.1.1: a 2xx body is parsed and obeyed, fetched with the configured User-Agent.
#[tokio::test]
async fn ok_200_rules_are_obeyed() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh);
    assert_eq!(snapshot.last_outcome, FetchOutcome::Status(200));
    assert_eq!(snapshot.fetched_at, clock.now());
    assert_eq!(snapshot.expires_at, snapshot.fetched_at + settings().max_age);
    assert_eq!(snapshot.robots_url, format!("{}/robots.txt", origin.base_url()));
    assert_rules_of(&snapshot);
    assert_eq!(origin.user_agents(), [TEST_AGENT]);
    // Cached: a second request does not fetch again.
    let again = cache.get(&origin.authority()).await;
    assert!(std::sync::Arc::ptr_eq(&snapshot, &again));
    assert_eq!(origin.robots_hits(), 1);
}

/// §2.3.1.2: a 301 → 302 → 200 chain across two origins; the rules apply to the authority
/// that was asked for, not to the one that served them.
#[tokio::test]
async fn redirect_chain_across_origins() {
    let first = Origin::start().await;
    let second = Origin::start().await;
    first.route("/robots.txt", Reply::redirect(301, &format!("{}/moved", second.base_url())));
    second.route("/moved", Reply::redirect(302, "/final/robots.txt"));
    second.route("/final/robots.txt", Reply::ok(RULES));
    let (cache, _clock) = cache();

    let snapshot = cache.get(&first.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh);
    assert_eq!(snapshot.authority, first.authority());
    assert_rules_of(&snapshot);
    assert_eq!(
        (first.robots_hits(), second.hits("/moved"), second.hits("/final/robots.txt")),
        (1, 1, 1)
    );
    // Nothing was stored for the origin the chain passed through.
    assert!(cache.peek(&second.authority()).await.is_none());
    assert_eq!(second.robots_hits(), 0);
}

/// Builds a chain `/robots.txt → /r1 → … → /r{redirects}` ending in a 200 at the last path,
/// and returns that path.
fn chain(origin: &Origin, redirects: usize) -> String {
    let mut from = "/robots.txt".to_owned();
    for i in 1..=redirects {
        let to = format!("/r{i}");
        let status = [301, 302, 303, 307, 308][i % 5];
        origin.route(&from, Reply::redirect(status, &to));
        from = to;
    }
    origin.route(&from, Reply::ok(RULES));
    from
}

/// §2.3.1.2: five consecutive redirects are followed.
#[tokio::test]
async fn five_redirects_are_followed() {
    let origin = Origin::start().await;
    let last = chain(&origin, 5);
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh, "{snapshot:?}");
    assert_rules_of(&snapshot);
    assert_eq!(origin.hits(&last), 1);
}

/// §2.3.1.2 and Google: more than five redirects count as a 404, everything allowed.
#[tokio::test]
async fn six_redirects_are_a_redirect_limit() {
    let origin = Origin::start().await;
    let last = chain(&origin, 6);
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Unavailable);
    assert_eq!(snapshot.last_outcome, FetchOutcome::RedirectLimit);
    assert!(matches!(snapshot.rules, RobotsRules::AllowAll));
    assert!(allowed(&snapshot, "/private/x"));
    assert_eq!(origin.hits("/r5"), 1);
    assert_eq!(origin.hits(&last), 0, "the sixth redirect must not be followed");
}

async fn unavailable(status: u16) {
    let origin = Origin::with_robots(Reply::status(status)).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Unavailable);
    assert_eq!(snapshot.last_outcome, FetchOutcome::Status(status));
    assert!(matches!(snapshot.rules, RobotsRules::AllowAll));
    assert!(allowed(&snapshot, "/private/x"));
    assert_eq!(snapshot.failing_since, None);
    assert_eq!(snapshot.expires_at, snapshot.fetched_at + settings().max_age);
    cache.get(&origin.authority()).await;
    assert_eq!(origin.robots_hits(), 1, "an unavailable answer is cached too");
}

/// §2.3.1.3: 404 → unavailable, everything allowed.
#[tokio::test]
async fn not_found_404_allows_all() {
    unavailable(404).await;
}

/// §2.3.1.3: 410 → unavailable, everything allowed.
#[tokio::test]
async fn gone_410_allows_all() {
    unavailable(410).await;
}

async fn unreachable_status(status: u16) {
    let origin = Origin::with_robots(Reply::status(status)).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_unreachable(&snapshot);
    assert_eq!(snapshot.last_outcome, FetchOutcome::Status(status));
    assert_eq!(snapshot.expires_at, snapshot.fetched_at + settings().retry_initial);
}

/// §2.3.1.4 (and Google): 429 counts as unreachable, not as a 4xx.
#[tokio::test]
async fn too_many_requests_429_disallows_all() {
    unreachable_status(429).await;
}

/// §2.3.1.4: 500 → unreachable, everything disallowed.
#[tokio::test]
async fn server_error_500_disallows_all() {
    unreachable_status(500).await;
}

/// §2.3.1.4: 503 → unreachable, everything disallowed.
#[tokio::test]
async fn unavailable_503_disallows_all() {
    unreachable_status(503).await;
}

/// §2.3.1.4: an origin that accepts and never answers is unreachable after `fetch_timeout`.
#[tokio::test]
async fn timeout_disallows_all() {
    let origin = Origin::with_robots(Reply::Hang).await;
    let timeout = Duration::from_millis(300);
    let (cache, _clock) =
        cache_with(robots_proxy::config::RobotsSection { fetch_timeout: timeout, ..settings() });
    let started = Instant::now();
    let snapshot = cache.get(&origin.authority()).await;
    assert!(started.elapsed() >= timeout);
    assert_unreachable(&snapshot);
    assert!(network_error(&snapshot).contains("timed out"), "{snapshot:?}");
    assert_eq!(origin.robots_hits(), 1);
}

/// §2.3.1.4: a connection reset in the middle of the response head is unreachable.
#[tokio::test]
async fn reset_mid_headers_disallows_all() {
    let origin =
        Origin::with_robots(Reply::ResetAfter(b"HTTP/1.1 200 OK\r\nContent-Le".to_vec())).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_unreachable(&snapshot);
    network_error(&snapshot);
}

/// §2.3.1.4: a reset in the middle of a 2xx body is unreachable too (a cut file could lose
/// rules), not a short robots.txt.
#[tokio::test]
async fn reset_mid_body_disallows_all() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nUser-agent: *\nAllow: /\n";
    let origin = Origin::with_robots(Reply::ResetAfter(head.to_vec())).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_unreachable(&snapshot);
    assert!(network_error(&snapshot).contains("body"), "{snapshot:?}");
}

/// §2.3.1.4: a response that is not HTTP is unreachable.
#[tokio::test]
async fn garbage_status_line_disallows_all() {
    let origin = Origin::with_robots(Reply::Raw(b"SPAM SPAM SPAM\r\n\r\nhello".to_vec())).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_unreachable(&snapshot);
    network_error(&snapshot);
}

/// A status outside 2xx–5xx is not a valid answer: unreachable.
#[tokio::test]
async fn status_600_disallows_all() {
    let origin = Origin::with_robots(Reply::status(600)).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_unreachable(&snapshot);
    assert!(network_error(&snapshot).contains("600"));
}

/// §2.3.1.4: a refused connection is unreachable.
#[tokio::test]
async fn connection_refused_disallows_all() {
    // A port that refuses connections (bound, never listening).
    let (_reserved, port) = crate::proxy::support::refusing_port();
    let authority = Authority::new(Scheme::Http, "127.0.0.1", port).unwrap();
    let (cache, _clock) = cache();
    let snapshot = cache.get(&authority).await;
    assert_unreachable(&snapshot);
    network_error(&snapshot);
}

/// Without a TLS connector, an https authority is a network failure, not a panic.
#[tokio::test]
async fn https_is_not_supported_yet() {
    let (cache, _clock) = cache();
    let authority = Authority::new(Scheme::Https, "127.0.0.1", 9).unwrap();
    let snapshot = cache.get(&authority).await;
    assert_unreachable(&snapshot);
    assert_eq!(snapshot.last_outcome, FetchOutcome::Network("https not supported yet".into()));
}

/// §2.5: content past the size limit (500 KiB by default) is ignored, not an error: a rule
/// before the limit applies, one after does not, and a line the limit cuts in two is dropped
/// whole rather than shortened.
#[tokio::test]
async fn body_past_500_kib_is_ignored() {
    let limit = 500 * 1024;
    let mut body = String::from("User-agent: *\nDisallow: /early\n");
    while body.len() < limit - 200 {
        body.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    body.push_str("Disallow: /near-the-end\n");
    // The limit falls inside the path of the next rule: if that line were shortened, it would
    // read `Disallow: /str` and block `/strange`.
    let straddle_at = limit - "Disallow: /str".len();
    body.push_str(&"#".repeat(straddle_at - body.len() - 1));
    body.push('\n');
    assert_eq!(body.len(), straddle_at);
    body.push_str("Disallow: /straddling-the-limit\n");
    while body.len() < 600 * 1024 {
        body.push_str("# more padding after the limit, more padding after the limit\n");
    }
    body.push_str("Disallow: /late\n");

    let origin = Origin::with_robots(Reply::ok(body)).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh);
    assert!(!allowed(&snapshot, "/early"));
    assert!(!allowed(&snapshot, "/near-the-end"));
    assert!(allowed(&snapshot, "/strange"), "a cut line must not be shortened");
    assert!(allowed(&snapshot, "/straddling-the-limit"));
    assert!(allowed(&snapshot, "/late"));
    let RobotsRules::Parsed(robots) = &snapshot.rules else { unreachable!() };
    assert!(robots.parsed_bytes() <= limit);
    assert!(robots.ignored_bytes() > 0);
}

/// The connector seam (for TLS later): a cache over a caller-supplied connector fetches
/// through it.
#[tokio::test]
async fn fetches_through_a_supplied_connector() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let clock = std::sync::Arc::new(robots_proxy::clock::ManualClock::default());
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let cache = robots_proxy::cache::RobotsCache::with_connector(settings(), clock, connector);
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh);
    assert_rules_of(&snapshot);
    assert_eq!(origin.user_agents(), [TEST_AGENT]);
}

/// Review-core N14: a `304` to a GET without validators, and a redirect without a usable
/// `Location` (none, not a URL, another scheme), say nothing about the file: unreachable
/// (disallow all), never "not found" (allow all).
#[tokio::test]
async fn a_304_and_a_redirect_leading_nowhere_are_unreachable() {
    for (label, reply) in [
        ("304", Reply::status(304)),
        ("302 without Location", Reply::status(302)),
        ("300 without Location", Reply::status(300)),
        ("302 to a bad URL", Reply::redirect(302, "http://[bad")),
        ("301 to ftp", Reply::redirect(301, "ftp://example.com/robots.txt")),
    ] {
        let origin = Origin::with_robots(reply).await;
        let (cache, _clock) = cache();
        let snapshot = cache.get(&origin.authority()).await;
        assert_unreachable(&snapshot);
        assert!(
            matches!(snapshot.last_outcome, FetchOutcome::Status(300..=399)),
            "{label}: {snapshot:?}"
        );
    }
}
