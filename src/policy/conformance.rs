//! The conformance property (issue 37, review-tests): every rule source that matches path
//! patterns decides on every reading of the path, through the one mapping
//! [`super::pattern_reading`], so the same pattern written as a robots.txt `Disallow`, a
//! `Content-Usage: … train-ai=n` path or a reserving `tdmrep.json` location refuses exactly the
//! same requests, on a case-sensitive origin and on one that folds case. A new rule source that
//! matches paths joins the list in [`refusals`].

use std::sync::Arc;
use std::time::SystemTime;

use proptest::prelude::*;

use super::{Policy, PolicySection, Readings};
use crate::authority::{Authority, Scheme};
use crate::cache::{FetchOutcome, RobotsCache, RobotsRules, RobotsSection, RobotsSnapshot};
use crate::clock::SystemClock;
use crate::robots::optout::TdmFile;
use crate::robots::usage::{Category, Preference};
use crate::robots::RobotsTxt;

/// Patterns of every shape the sources share: plain prefixes, a reserved character written
/// encoded, an encoded separator, non-ASCII, a wildcard, an anchor.
const PATTERNS: &[&str] =
    &["/news/", "/private", "/wiki/Special%3A", "/a%2Fb", "/caf%C3%A9/", "/*.bak$", "/free/*/x"];

/// Pieces of request paths that make origins read a path differently.
const PIECES: &[&str] = &[
    "news",
    "NEWS",
    "News.",
    "private",
    "PRIVATE",
    "wiki",
    "Special:X",
    "Special%3AX",
    "..",
    "%2e%2e",
    ".",
    "%2f",
    "%2F",
    "%5c",
    ";x",
    "a",
    "b",
    "a%2Fb",
    "free",
    "x",
    "caf%C3%A9",
    "CAF%C3%89",
    "%6eews",
    "x.bak",
    "x.BAK",
    "",
];

fn snapshot(body: &str, folds_case: bool) -> RobotsSnapshot {
    let authority = Authority::new(Scheme::Http, "origin.test", 80).unwrap();
    let now = SystemTime::now();
    let mut s = RobotsSnapshot::unreachable_now(&authority, FetchOutcome::Status(200), now);
    let robots = RobotsTxt::parse(body.as_bytes()).with_case_insensitive_origin(folds_case);
    s.rules = RobotsRules::Parsed(Arc::new(robots));
    s.state = crate::cache::RobotsState::Fresh;
    s.failing_since = None;
    s.failures = 0;
    s
}

/// Whether each source, given `pattern`, refuses a trainer the request whose path is `path`.
fn refusals(
    policy: &Policy,
    pattern: &str,
    path: &str,
    folds_case: bool,
) -> [(&'static str, bool); 3] {
    let readings = Readings::of(path);
    let robots = snapshot(&format!("User-agent: *\nDisallow: {pattern}\n"), folds_case);
    let by_robots = !policy.is_allowed(&robots, None, &readings);
    let usage = snapshot(
        &format!("User-agent: *\nAllow: /\nContent-Usage: {pattern} train-ai=n\n"),
        folds_case,
    );
    let prefs = policy.usage_for(&usage, None, &readings);
    let by_usage = prefs.get(Category::TrainAi).preference == Preference::Disallow;
    let plain = snapshot("User-agent: *\nAllow: /\n", folds_case);
    let json = format!(r#"[{{"location": "{pattern}", "tdm-reservation": 1}}]"#);
    let file = TdmFile::parse(json.as_bytes()).unwrap();
    let by_tdmrep =
        policy.tdm_statement(&plain, &file, &readings).is_some_and(|s| s.reserved == Some(true));
    [("robots.txt", by_robots), ("Content-Usage", by_usage), ("tdmrep.json", by_tdmrep)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_rule_source_refuses_the_same_readings(
        pattern in proptest::sample::select(PATTERNS),
        pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..6),
        query in proptest::option::of(Just("?q=1")),
        folds_case in any::<bool>(),
    ) {
        let store = Arc::new(RobotsCache::new(RobotsSection::default(), Arc::new(SystemClock)));
        let policy = Policy::new(&PolicySection::default(), store);
        let path = format!("/{}{}", pieces.join("/"), query.unwrap_or(""));
        let found = refusals(&policy, pattern, &path, folds_case);
        let robots = found[0].1;
        for (source, refused) in found {
            prop_assert_eq!(
                refused, robots,
                "{} vs robots.txt on {:?} for pattern {:?} (folds case: {})",
                source, path, pattern, folds_case
            );
        }
    }
}

/// Patterns of `*`, `$` and literals, generated (review-tests F4): the prefix-index matcher
/// (robots.txt) and the pattern matcher (`Content-Usage`, `tdmrep.json`) agree on every one.
fn wildcard_pattern() -> impl Strategy<Value = String> {
    let piece = proptest::sample::select(&["a", "x", "b/", "*", "**", ".", "%2A", "%24"][..]);
    (proptest::collection::vec(piece, 0..5), any::<bool>()).prop_map(|(pieces, anchored)| {
        format!("/{}{}", pieces.concat(), if anchored { "$" } else { "" })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn both_matchers_agree_on_generated_wildcard_patterns(
        pattern in wildcard_pattern(),
        path in proptest::collection::vec(
            proptest::sample::select(&["a", "x", "b", "/", ".", "*", "$", "%2A", "ab", "xa"][..]),
            0..8,
        ),
        folds_case in any::<bool>(),
    ) {
        let store = Arc::new(RobotsCache::new(RobotsSection::default(), Arc::new(SystemClock)));
        let policy = Policy::new(&PolicySection::default(), store);
        let path = format!("/{}", path.concat());
        let found = refusals(&policy, &pattern, &path, folds_case);
        let robots = found[0].1;
        for (source, refused) in found {
            prop_assert_eq!(
                refused, robots,
                "{} vs robots.txt on {:?} for pattern {:?} (folds case: {})",
                source, path, pattern, folds_case
            );
        }
    }
}

/// The review's cases, fixed: each is refused by every source.
#[test]
fn the_reviews_readings_are_refused_by_every_source() {
    let store = Arc::new(RobotsCache::new(RobotsSection::default(), Arc::new(SystemClock)));
    let policy = Policy::new(&PolicySection::default(), store);
    for (pattern, path, folds) in [
        ("/wiki/Special%3A", "/wiki/Special:X", false),
        ("/news/", "/free/../news/a", false),
        ("/news/", "/free/%2e%2e/news/a", false),
        ("/news/", "//news/a", false),
        ("/news/", "/NEWS/x", true),
        ("/news/", "/News./x", true),
        ("/caf%C3%A9/", "/CAF%C3%89/x", true),
        // Review-tests F4: `*…*$`, where the anchor is read after a segment.
        ("/*a*$", "/xa/b", false),
    ] {
        for (source, refused) in refusals(&policy, pattern, path, folds) {
            assert!(refused, "{source} lets {path} past {pattern} (folds case: {folds})");
        }
    }
}
