//! The conformance property (issue 37, review-tests): every rule source that matches path
//! patterns decides on every reading of the path, through the one mapping
//! [`super::pattern_reading`], so the same pattern written as a robots.txt `Disallow`, a
//! `Content-Usage: … train-ai=n` path or a reserving `tdmrep.json` location refuses exactly the
//! same requests, on a case-sensitive origin and on one that folds case. A new rule source that
//! matches paths joins the list in [`refusals`].

use std::sync::Arc;
use std::time::SystemTime;

use proptest::prelude::*;

use super::{Claim, Policy, PolicySection, Readings};
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
    let ask = |s| policy.decide(s, Claim::asserted(None, None), &readings, SystemTime::UNIX_EPOCH);
    let by_robots = !ask(&robots).robots_allowed();
    let usage = snapshot(
        &format!("User-agent: *\nAllow: /\nContent-Usage: {pattern} train-ai=n\n"),
        folds_case,
    );
    let prefs = ask(&usage).usage();
    let by_usage = prefs.get(Category::TrainAi).preference == Preference::Disallow;
    let plain = snapshot("User-agent: *\nAllow: /\n", folds_case);
    let json = format!(r#"[{{"location": "{pattern}", "tdm-reservation": 1}}]"#);
    let file = TdmFile::parse(json.as_bytes()).unwrap();
    let by_tdmrep = ask(&plain).tdm_statement(&file).is_some_and(|s| s.reserved == Some(true));
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

/// How `[[exceptions]]` may name the origin's authority (`origin.test:80`): every spelling
/// reads as the request's authority does (case, a trailing dot, the port, a suffix).
const SITES: &[&str] = &["origin.test", "ORIGIN.Test", "origin.test.", "origin.test:80", "*.test"];

/// An exception for `TrainBot` with `effect` on `site` and the one path `pattern`.
fn exception(effect: super::exceptions::Effect, pattern: &str, site: &str) -> Policy {
    let entry = super::ExceptionEntry {
        id: "e".into(),
        authorities: vec![site.into()],
        tokens: vec!["TrainBot".into()],
        users: vec![],
        paths: vec![pattern.into()],
        effect,
        reference: Some("https://origin.test/permission".into()),
        granted_by: Some("tests".into()),
        expires: Some("2999-01-01T00:00:00Z".into()),
        usage: vec![],
    };
    let store = Arc::new(RobotsCache::new(RobotsSection::default(), Arc::new(SystemClock)));
    let exceptions = Arc::new(super::Exceptions::new(&[entry]));
    Policy::new(&PolicySection::default(), store).with_exceptions(exceptions)
}

/// What the exceptions of `policy` decide for `TrainBot` (tied to its user, so an allow
/// applies) on `path` over `robots`: `Some(true)` let through, `Some(false)` refused.
fn exception_decides(policy: &Policy, robots: &RobotsSnapshot, path: &str) -> Option<bool> {
    let token = crate::robots::ProductToken::new("TrainBot").unwrap();
    let readings = Readings::of(path);
    let claim = Claim::tied(Some(&token), None);
    let decision = policy.decide(robots, claim, &readings, SystemTime::now());
    decision.exception().map(|v| v.effect == super::exceptions::Effect::Allow)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Issue 37 (review-core): exceptions are a rule source too. A disallow exception for
    /// `pattern` refuses exactly the requests `Disallow: pattern` refuses, on every reading of
    /// the path; an allow exception for `pattern` over a robots.txt that disallows everything
    /// lets through exactly what `Allow: pattern` beside `Disallow: /` lets through (it must
    /// cover every reading robots.txt disallows); however the authority is spelled in
    /// `authorities`. An exception for another site decides nothing.
    #[test]
    fn exceptions_decide_on_every_reading_as_robots_txt_does(
        pattern in proptest::sample::select(PATTERNS),
        pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..6),
        query in proptest::option::of(Just("?q=1")),
        folds_case in any::<bool>(),
        site in proptest::sample::select(SITES),
    ) {
        use super::exceptions::Effect;
        let path = format!("/{}{}", pieces.join("/"), query.unwrap_or(""));
        let readings = Readings::of(&path);
        let plain = Policy::new(
            &PolicySection::default(),
            Arc::new(RobotsCache::new(RobotsSection::default(), Arc::new(SystemClock))),
        );

        let open = snapshot("User-agent: *\nAllow: /\n", folds_case);
        let robots = snapshot(&format!("User-agent: *\nDisallow: {pattern}\n"), folds_case);
        let ask = |s| plain.decide(s, Claim::asserted(None, None), &readings, SystemTime::UNIX_EPOCH);
        let refused_by_robots = !ask(&robots).robots_allowed();
        let deny = exception(Effect::Disallow, pattern, site);
        let refused = exception_decides(&deny, &open, &path) == Some(false);
        prop_assert_eq!(
            refused, refused_by_robots,
            "disallow exception vs robots.txt on {:?} for {:?} at {:?} (folds case: {})",
            path, pattern, site, folds_case
        );

        let closed = snapshot("User-agent: *\nDisallow: /\n", folds_case);
        let lifted = snapshot(&format!("User-agent: *\nDisallow: /\nAllow: {pattern}\n"), folds_case);
        let allowed_by_robots = ask(&lifted).robots_allowed();
        let allow = exception(Effect::Allow, pattern, site);
        let let_through = exception_decides(&allow, &closed, &path) == Some(true);
        prop_assert_eq!(
            let_through, allowed_by_robots,
            "allow exception vs robots.txt on {:?} for {:?} at {:?} (folds case: {})",
            path, pattern, site, folds_case
        );

        for effect in [Effect::Allow, Effect::Disallow] {
            let elsewhere = exception(effect, pattern, "other.example");
            prop_assert_eq!(exception_decides(&elsewhere, &closed, &path), None);
            prop_assert_eq!(exception_decides(&elsewhere, &open, &path), None);
        }
    }
}
